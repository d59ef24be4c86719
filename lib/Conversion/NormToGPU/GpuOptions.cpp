//===- GpuOptions.cpp - Validate the GPU options against the chip ---------===//
//
// Part of norm-opt.
//
// Every GPU option is checked here, once, before a pipeline runs: a bad
// value never reaches LLVM (whose NVPTX back end aborts on an unknown chip
// or a PTX version too old for it) nor ptxas (which rejects too much shared
// memory after --emit=ptx has succeeded).
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/GpuOptions.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Triple.h"

#include <memory>

using namespace mlir;
using namespace mlir::norm;

namespace {
/// NVPTX's own processor and feature lists (the back end the pipeline uses).
const llvm::MCSubtargetInfo *nvptxSubtargetInfo() {
  static const std::unique_ptr<llvm::MCSubtargetInfo> info = [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTargetMC();
    llvm::Triple triple("nvptx64-nvidia-cuda");
    std::string error;
    const llvm::Target *target =
        llvm::TargetRegistry::lookupTarget(triple, error);
    return std::unique_ptr<llvm::MCSubtargetInfo>(
        target ? target->createMCSubtargetInfo(triple, "", "") : nullptr);
  }();
  return info.get();
}

bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// The target description's chips that this LLVM's NVPTX knows.
std::string supportedChips() {
  const llvm::MCSubtargetInfo *info = nvptxSubtargetInfo();
  SmallVector<StringRef> names;
  for (StringRef chip : knownGpuChips())
    if (!info || info->isCPUStringValid(chip))
      names.push_back(chip);
  return llvm::join(names, ", ");
}
} // namespace

//===----------------------------------------------------------------------===//
// Option values
//===----------------------------------------------------------------------===//

LogicalResult mlir::norm::validateGpuOptions(
    const NormGpuOptions &options,
    function_ref<void(StringRef, StringRef, const Twine &)> report) {
  bool ok = true;
  auto bad = [&](StringRef argument, const Twine &value, const Twine &problem) {
    report(argument, value.str(), problem);
    ok = false;
  };

  // The chip: exactly one name NVPTX knows (case-sensitive), sm_80 or newer.
  const llvm::MCSubtargetInfo *nvptx = nvptxSubtargetInfo();
  std::optional<GpuTarget> target = lookupGpuTarget(options.chip);
  if (!target || (nvptx && !nvptx->isCPUStringValid(options.chip))) {
    bool known = nvptx && !options.chip.empty() &&
                 nvptx->isCPUStringValid(options.chip);
    bad("chip", options.chip,
        Twine(known ? "the kernels need sm_80 or newer (cp.async)"
                    : "not one NVPTX GPU architecture") +
            "; expected exactly one of " + supportedChips() +
            " (case-sensitive)");
  }

  // Features: empty, or +name items NVPTX knows; the PTX version (+ptxNN)
  // must be at least the chip's minimum.
  bool featuresOk = true;
  SmallVector<StringRef> items;
  StringRef(options.features).split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    StringRef name = item.trim();
    bool known = name.consume_front("+") && nvptx &&
                 llvm::any_of(nvptx->getAllProcessorFeatures(),
                              [&](const llvm::SubtargetFeatureKV &kv) {
                                return name == kv.Key;
                              });
    if (!known) {
      bad("features", options.features,
          "'" + item + "' is not an NVPTX feature; expected a comma-"
          "separated list of +ptxNN (e.g. +ptx80), or nothing for the "
          "chip's minimum PTX version");
      featuresOk = false;
      break;
    }
  }
  int64_t ptx = target ? ptxVersionOf(options.features, *target) : 0;
  if (featuresOk && target && ptx < target->minPTXVersion)
    bad("features", options.features,
        "PTX " + Twine(ptx / 10) + "." + Twine(ptx % 10) +
            " does not support " + target->chip + "; it needs +ptx" +
            Twine(target->minPTXVersion) +
            " or newer (or no features: the chip's minimum)");

  if (options.optLevel < 0 || options.optLevel > 3)
    bad("opt-level", Twine(options.optLevel), "expected 0, 1, 2 or 3");

  // Without a valid chip, the ranges of a default target description.
  const GpuTarget limits = target.value_or(GpuTarget());
  int64_t maxThreads = limits.maxThreadsPerBlock;
  if (options.threadsPerRow != 0 &&
      (!isPowerOfTwo(options.threadsPerRow) ||
       options.threadsPerRow > maxThreads))
    bad("threads-per-row", Twine(options.threadsPerRow),
        "expected 0 (pick) or a power of two in [1, " + Twine(maxThreads) +
            "]");
  if (options.rowsPerCTA != 0 &&
      (!isPowerOfTwo(options.rowsPerCTA) || options.rowsPerCTA > maxThreads))
    bad("rows-per-cta", Twine(options.rowsPerCTA),
        "expected 0 (pick) or a power of two in [1, " + Twine(maxThreads) +
            "]");
  else if (options.rowsPerCTA != 0 && isPowerOfTwo(options.threadsPerRow) &&
           options.threadsPerRow * options.rowsPerCTA > maxThreads)
    bad("rows-per-cta", Twine(options.rowsPerCTA),
        "threads-per-row " + Twine(options.threadsPerRow) + " x rows-per-cta " +
            Twine(options.rowsPerCTA) + " is more than the " +
            Twine(maxThreads) + " threads a block may have");
  if (!llvm::is_contained({1, 2, 4, 8, 16}, options.vectorBytes))
    bad("vector-bytes", Twine(options.vectorBytes),
        "expected 1, 2, 4, 8 or 16");
  int64_t maxCTAs = limits.maxCTAsPerSM;
  if (options.programsPerSM < 0 || options.programsPerSM > maxCTAs)
    bad("programs-per-sm", Twine(options.programsPerSM),
        "expected 0 (from the occupancy) or a CTA count in [1, " +
            Twine(maxCTAs) + "]" +
            (target ? " (" + target->chip + "'s resident CTAs per SM)"
                    : Twine()));
  if (options.maxResidentElements < 0 ||
      options.maxResidentElements > kMaxResidentElementsLimit)
    bad("max-resident-elements", Twine(options.maxResidentElements),
        "expected 0 (pick) or a column count in [1, " +
            Twine(kMaxResidentElementsLimit) + "]");
  if (options.asyncStages < 0 || options.asyncStages > kMaxAsyncStagesLimit)
    bad("async-stages", Twine(options.asyncStages),
        "expected 0 or 1 (plain loads) or a ring depth in [2, " +
            Twine(kMaxAsyncStagesLimit) + "]");
  if (options.bulkStages < 0 || options.bulkStages > kMaxAsyncStagesLimit)
    bad("bulk-stages", Twine(options.bulkStages),
        "expected 0 or 1 (no bulk ring) or a ring depth in [2, " +
            Twine(kMaxAsyncStagesLimit) + "]");
  if (options.maxClusterCTAs < 1 || options.maxClusterCTAs > 8 ||
      !isPowerOfTwo(options.maxClusterCTAs))
    bad("max-cluster-ctas", Twine(options.maxClusterCTAs),
        "expected 1 (no clusters), 2, 4 or 8 (the portable cluster sizes)");
  if (options.latencyCTAs < 0 || options.latencyCTAs > 16 ||
      (options.latencyCTAs > 1 && !isPowerOfTwo(options.latencyCTAs)))
    bad("latency-ctas", Twine(options.latencyCTAs),
        "expected 0 or 1 (no latency kernel), 2, 4, 8 or 16");
  if (options.latencyMaxRows < 0)
    bad("latency-max-rows", Twine(options.latencyMaxRows),
        "expected 0 (no latency kernel) or a row count");
  if (options.slabSplitMinBytes < 0)
    bad("slab-split-min-bytes", Twine(options.slabSplitMinBytes),
        "expected 0 (split wherever the units are few) or a byte count");
  if (options.slabRunBytes < 1)
    bad("slab-run-bytes", Twine(options.slabRunBytes),
        "expected a byte count of at least 1");
  if (options.tierMinCols != 0 &&
      (!isPowerOfTwo(options.tierMinCols) ||
       options.tierMinCols < kMinTierColsLimit ||
       options.tierMinCols > kMaxTierColsLimit))
    bad("tier-min-cols", Twine(options.tierMinCols),
        "expected 0 (no resident tiers for a run-time N) or a power of two "
        "in [" + Twine(kMinTierColsLimit) + ", " + Twine(kMaxTierColsLimit) +
            "]");
  return success(ok);
}

LogicalResult mlir::norm::validateGpuOptions(const NormGpuOptions &options,
                                             Location loc) {
  return validateGpuOptions(
      options, [&](StringRef argument, StringRef value, const Twine &problem) {
        emitError(loc) << "invalid GPU option '" << argument << "=" << value
                       << "': " << problem;
      });
}

//===----------------------------------------------------------------------===//
// Ops and kernels
//===----------------------------------------------------------------------===//

LogicalResult mlir::norm::checkSupportedOnGpu(MixedReductionOp op) {
  // Batched rows (adaLN) are the 2-D kernels with a sample per
  // blockIdx.y, slab domains (GroupNorm) the slab kernel; the other
  // multi-axis domains have none.
  std::optional<SlabDomain> slab = op.getSlabDomain();
  if (slab && slab->channelsLast && slab->cSize > 1024)
    return op.emitError()
           << "cannot map onto the GPU: a channels-last GroupNorm of "
           << slab->cSize
           << " channels per group (the slab kernel takes at most 1024)";
  if (op.isMultiAxis() && op.getBatchRank() == 0 && !slab)
    return op.emitError()
           << "cannot map onto the GPU: a multi-axis domain (row_sum_dims, "
              "col_dims) that is neither batched rows (adaLN's [B, S, N]) "
              "nor GroupNorm's slabs ([N, G, C/G, HW] or [N, HW, G, C/G], G "
              "and C/G static) has no GPU kernels; fuse with multi-axis=gpu "
              "to leave such groups unfused (norm-opt's GPU pipeline does), "
              "or lower it with --norm-lower-to-cpu";
  int64_t n = op.getStaticCols();
  if (n == 0)
    return op.emitError()
           << "cannot map onto the GPU: N (dim " << op.getNDimIndex()
           << " of the domain " << op.getFull().front().getType()
           << ") is 0; the kernels need at least one column";
  if (!op.isRowMajor() && ShapedType::isDynamic(n))
    return op.emitError()
           << "cannot map onto the GPU: a channels-first domain (N = dim "
           << op.getNDimIndex() << " of " << op.getFull().front().getType()
           << ") needs a static N (its column accumulators are static "
              "shared memory)";
  return success();
}

LogicalResult mlir::norm::checkKernelResources(MixedReductionOp op,
                                               gpu::GPUFuncOp kernel,
                                               int64_t dynamicSharedBytes,
                                               const GpuTarget &target) {
  int64_t threads = 1;
  if (std::optional<ArrayRef<int32_t>> block = kernel.getKnownBlockSize())
    for (int32_t extent : *block)
      threads *= extent;
  if (threads > target.maxThreadsPerBlock)
    return op.emitError() << "GPU kernel '" << kernel.getName() << "' needs "
                          << threads << " threads per block; "
                          << target.chip << " allows at most "
                          << target.maxThreadsPerBlock
                          << " (lower rows-per-cta or threads-per-row)";

  int64_t staticBytes = 0;
  for (BlockArgument buffer : kernel.getWorkgroupAttributions()) {
    auto type = cast<MemRefType>(buffer.getType());
    staticBytes += type.getNumElements() *
                   ((type.getElementTypeBitWidth() + 7) / 8);
  }
  if (staticBytes > target.staticSharedBytesPerBlock)
    return op.emitError() << "GPU kernel '" << kernel.getName() << "' needs "
                          << staticBytes
                          << " bytes of static shared memory; ptxas allows at "
                             "most "
                          << target.staticSharedBytesPerBlock
                          << " (lower rows-per-cta or threads-per-row)";
  if (staticBytes + dynamicSharedBytes > target.sharedBytesPerBlock)
    return op.emitError()
           << "GPU kernel '" << kernel.getName() << "' needs "
           << staticBytes + dynamicSharedBytes
           << " bytes of shared memory per block (" << staticBytes
           << " static + " << dynamicSharedBytes << " dynamic); "
           << target.chip << " allows at most " << target.sharedBytesPerBlock
           << " (lower rows-per-cta or async-stages)";
  return success();
}
