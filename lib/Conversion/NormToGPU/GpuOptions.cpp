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

//===----------------------------------------------------------------------===//
// Per-chip limits (the one table to replace by the target description)
//===----------------------------------------------------------------------===//

namespace {
constexpr int64_t KiB = 1024;
constexpr int64_t kThreads = 1024, kStatic = 48 * KiB;
// clang-format off
const GpuChipLimits kChipLimits[] = {
  // chip       PTX  threads    shared/block  static   CTAs/SM
  {"sm_80",     70,  kThreads,  163 * KiB,    kStatic, 32},
  {"sm_86",     71,  kThreads,   99 * KiB,    kStatic, 16},
  {"sm_87",     74,  kThreads,  163 * KiB,    kStatic, 16},
  {"sm_88",     90,  kThreads,   99 * KiB,    kStatic, 24},
  {"sm_89",     78,  kThreads,   99 * KiB,    kStatic, 24},
  {"sm_90",     78,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_90a",    80,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_100",    86,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_100a",   86,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_100f",   88,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_101",    86,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_101a",   86,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_101f",   88,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_103",    88,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_103a",   88,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_103f",   88,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_110",    90,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_110a",   90,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_110f",   90,  kThreads,  227 * KiB,    kStatic, 32},
  {"sm_120",    87,  kThreads,   99 * KiB,    kStatic, 24},
  {"sm_120a",   87,  kThreads,   99 * KiB,    kStatic, 24},
  {"sm_120f",   88,  kThreads,   99 * KiB,    kStatic, 24},
  {"sm_121",    88,  kThreads,   99 * KiB,    kStatic, 24},
  {"sm_121a",   88,  kThreads,   99 * KiB,    kStatic, 24},
  {"sm_121f",   88,  kThreads,   99 * KiB,    kStatic, 24},
};
// clang-format on

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

std::string supportedChips() {
  const llvm::MCSubtargetInfo *info = nvptxSubtargetInfo();
  SmallVector<StringRef> names;
  for (const GpuChipLimits &limits : kChipLimits)
    if (!info || info->isCPUStringValid(limits.chip))
      names.push_back(limits.chip);
  return llvm::join(names, ", ");
}
} // namespace

std::optional<GpuChipLimits> mlir::norm::lookupGpuChipLimits(StringRef chip) {
  for (const GpuChipLimits &limits : kChipLimits)
    if (limits.chip == chip)
      return limits;
  return std::nullopt;
}

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
  std::optional<GpuChipLimits> limits = lookupGpuChipLimits(options.chip);
  if (!limits || (nvptx && !nvptx->isCPUStringValid(options.chip))) {
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
  int64_t ptx = 0;
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
    int64_t version;
    if (name.consume_front("ptx") && !name.getAsInteger(10, version))
      ptx = std::max(ptx, version);
  }
  if (featuresOk && limits && ptx != 0 && ptx < limits->minPTXVersion)
    bad("features", options.features,
        "PTX " + Twine(ptx / 10) + "." + Twine(ptx % 10) +
            " does not support " + limits->chip + "; it needs +ptx" +
            Twine(limits->minPTXVersion) +
            " or newer (or no features: the chip's minimum)");

  if (options.optLevel < 0 || options.optLevel > 3)
    bad("opt-level", Twine(options.optLevel), "expected 0, 1, 2 or 3");

  int64_t maxThreads = limits ? limits->maxThreadsPerBlock : 1024;
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
  int64_t maxCTAs = limits ? limits->maxCTAsPerSM : 32;
  if (options.programsPerSM < 0 || options.programsPerSM > maxCTAs)
    bad("programs-per-sm", Twine(options.programsPerSM),
        "expected 0 (from the occupancy) or a CTA count in [1, " +
            Twine(maxCTAs) + "]" +
            (limits ? " (" + limits->chip + "'s resident CTAs per SM)"
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
  ArrayRef<int64_t> domain = op.getDomainShape();
  if (domain.back() == 0)
    return op.emitError()
           << "cannot map onto the GPU: N (the last dim of the domain "
           << op.getFull().front().getType()
           << ") is 0; the kernels need at least one column";
  return success();
}

LogicalResult mlir::norm::checkKernelResources(MixedReductionOp op,
                                               gpu::GPUFuncOp kernel,
                                               int64_t dynamicSharedBytes,
                                               const GpuChipLimits &limits) {
  int64_t threads = 1;
  if (std::optional<ArrayRef<int32_t>> block = kernel.getKnownBlockSize())
    for (int32_t extent : *block)
      threads *= extent;
  if (threads > limits.maxThreadsPerBlock)
    return op.emitError() << "GPU kernel '" << kernel.getName() << "' needs "
                          << threads << " threads per block; "
                          << limits.chip << " allows at most "
                          << limits.maxThreadsPerBlock
                          << " (lower rows-per-cta or threads-per-row)";

  int64_t staticBytes = 0;
  for (BlockArgument buffer : kernel.getWorkgroupAttributions()) {
    auto type = cast<MemRefType>(buffer.getType());
    staticBytes += type.getNumElements() *
                   ((type.getElementTypeBitWidth() + 7) / 8);
  }
  if (staticBytes > limits.maxStaticSharedBytes)
    return op.emitError() << "GPU kernel '" << kernel.getName() << "' needs "
                          << staticBytes
                          << " bytes of static shared memory; ptxas allows at "
                             "most "
                          << limits.maxStaticSharedBytes
                          << " (lower rows-per-cta or threads-per-row)";
  if (staticBytes + dynamicSharedBytes > limits.maxSharedBytesPerBlock)
    return op.emitError()
           << "GPU kernel '" << kernel.getName() << "' needs "
           << staticBytes + dynamicSharedBytes
           << " bytes of shared memory per block (" << staticBytes
           << " static + " << dynamicSharedBytes << " dynamic); "
           << limits.chip << " allows at most " << limits.maxSharedBytesPerBlock
           << " (lower rows-per-cta or async-stages)";
  return success();
}
