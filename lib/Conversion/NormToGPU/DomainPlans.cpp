//===- DomainPlans.cpp - The plans of slab and channels-first domains -----===//
//
// Part of norm-opt. planKernel's plans for the domains that are not rows
// of a row-major [M, N] (DomainPlans.h): GroupNorm's slabs and the
// channels-first (strided) rows. Each is one step: the kernel's threads,
// its vector width and what it keeps where; the row-major planner
// (KernelPlan.cpp) takes everything else.
//
//===----------------------------------------------------------------------===//

#include "DomainPlans.h"

#include "norm/Conversion/GpuOptions.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::norm;

namespace {
/// The slab kernel's threads per CTA (one CTA per GroupNorm slab).
constexpr int64_t kSlabThreads = 512;
/// The slab plan's split kernels: CTAs (a cluster) per slab, where slabs
/// are fewer than the SMs (perf-notes, "GroupNorm slabs": NCHW 4 measured
/// slower than 2, a CTA per SM at ~120 registers takes two waves; channels
/// last takes several groups per CTA, so fewer CTAs per sample, and more
/// per cluster).
constexpr int64_t kSlabSplitCtas = 2;
constexpr int64_t kSlabSplitCtasChannelsLast = 8;
/// Channels-first rows (planStridedRows; perf-notes, "Channels-first
/// rows"): the W warps of a tile split N so each walks about this many
/// columns (a few iterations per pass), at most 16 of them; a CTA of 16
/// warps (512 threads) takes 16 / W tiles at once.
constexpr int64_t kStridedColumnsPerWarp = 12;
constexpr int64_t kStridedWarpsPerCTA = 16;
constexpr int64_t kStridedRowsPerLane = 4;
/// Held columns (K x V values per full input per lane), at most: 48
/// spilled 300-1900 bytes (perf-notes, "Channels-first rows").
constexpr int64_t kStridedHeldElements = 24;
} // namespace

/// A slab domain (GroupNorm, checkSupportedOnGpu): one CTA per slab,
/// 16-byte accesses where the slabs allow (channels last: V channels of
/// a run, V dividing C/G, and K adjacent groups per CTA), two launches;
/// on sm_90+ also the split kernels for few slabs (a cluster of CTAs per
/// slab). NCHW: a warp per channel, as
/// many warps as give each the same number of channels, at most
/// kSlabThreads / 32 (a warp per channel at C/G = 10 of SD's 320 / 32);
/// channels last: kSlabThreads, or 1024 for runs of over 512 threads.
KernelPlan mlir::norm::planSlabRows(MixedReductionOp op,
                                      const SlabDomain &slab,
                                      const KernelPlanOptions &options,
                                      const GpuTarget &target) {
  KernelPlan plan;
  plan.slabRows = true;
  int64_t widest = std::max(widestElementBytes(op.getFull()),
                            widestElementBytes(op.getFullResults()));
  plan.vector = std::max<int64_t>(1, options.vectorBytes / widest);
  int64_t maxWarps = kSlabThreads / 32;
  int64_t warps = maxWarps;
  if (slab.channelsLast) {
    while (slab.cSize % plan.vector != 0)
      plan.vector /= 2;
    if (slab.cSize / plan.vector > kSlabThreads)
      warps = 32;
  } else if (slab.cSize >= 4) {
    int64_t perWarp = llvm::divideCeil(slab.cSize, maxWarps);
    warps = llvm::divideCeil(slab.cSize, perWarp);
  }
  plan.threadsPerRow =
      options.threadsPerRow >= 32 ? options.threadsPerRow : 32 * warps;
  // Channels last: the fewest adjacent groups (dividing G) whose runs
  // make slab-run-bytes, while a position's runs fit the CTA; a
  // position's runs need their K x C/G / V threads (also under a smaller
  // threads-per-row).
  if (slab.channelsLast) {
    int64_t runBytes = slab.cSize * widest;
    for (int64_t k = 1; k <= slab.aSize; ++k) {
      if (slab.aSize % k != 0 || k * slab.cSize / plan.vector > 1024)
        continue;
      plan.slabGroups = k;
      if (k * runBytes >= options.slabRunBytes)
        break;
    }
    plan.threadsPerRow = std::max<int64_t>(
        plan.threadsPerRow,
        llvm::alignTo(plan.slabGroups * slab.cSize / plan.vector, 32));
  }
  plan.rowsPerCta = 1;
  plan.columnGroups = 1;
  // Few slabs: the split kernels, a cluster of CTAs per slab exchanging
  // the row sums through distributed shared memory.
  if (target.hasClusters &&
      ptxVersionOf(options.features, target) >= kClusterMinPTXVersion)
    plan.splitColumnGroups = std::min<int64_t>(
        slab.channelsLast ? kSlabSplitCtasChannelsLast : kSlabSplitCtas,
        options.maxClusterCTAs);
  if (plan.splitColumnGroups == 1)
    plan.splitColumnGroups = 0;
  // Split CTAs with little to walk cost more in the cluster's exchange
  // and the extra partial rows than they gain (perf-notes, "GroupNorm
  // slabs": channels last bf16 8x640x32x32, 20 KiB a CTA, 31.2 -> 38.1
  // us split; 8x320x64x64, 80 KiB, 114.1 -> 60.0).
  if (plan.splitColumnGroups > 1)
    plan.splitMinBytes = options.slabSplitMinBytes;
  plan.programsPerSm = options.programsPerSM;
  plan.estimatedRegisters = 64;
  return plan;
}

/// A channels-first domain (static N, checkSupportedOnGpu): W warps of
/// a tile split N, about kStridedColumnsPerWarp columns each, held in
/// registers between the passes where they fit.
KernelPlan mlir::norm::planStridedRows(MixedReductionOp op,
                                         const KernelPlanOptions &options) {
  KernelPlan plan;
  plan.stridedRows = true;
  plan.staticCols = op.getStaticCols();
  int64_t warps = std::min<int64_t>(
      llvm::PowerOf2Ceil(std::max<int64_t>(
          1, *plan.staticCols / kStridedColumnsPerWarp)),
      kStridedWarpsPerCTA);
  // threads-per-row and rows-per-cta override W x 32 and R.
  if (options.threadsPerRow >= 32)
    warps = options.threadsPerRow / 32;
  plan.threadsPerRow = 32 * warps;
  plan.rowsPerCta = options.rowsPerCTA > 0
                        ? options.rowsPerCTA
                        : std::max<int64_t>(1, kStridedWarpsPerCTA / warps);
  // The vector kernel's rows per lane: at most kStridedRowsPerLane, and
  // vector-bytes of the widest element.
  int64_t widest = std::max(widestElementBytes(op.getFull()),
                            widestElementBytes(op.getFullResults()));
  plan.vector = std::clamp<int64_t>(options.vectorBytes / widest, 1,
                                    kStridedRowsPerLane);
  // Held columns: a warp's K columns of its V rows stay in registers
  // from the first pass to the second (no reload), at the widest V with
  // K x V <= max-resident-elements (0: kStridedHeldElements) per input.
  int64_t k = llvm::divideCeil(*plan.staticCols, warps);
  int64_t held = options.maxResidentElements > 0
                     ? options.maxResidentElements
                     : kStridedHeldElements;
  for (int64_t v = plan.vector; v >= 1; v /= 2) {
    if (k * v <= held) {
      plan.vector = v;
      plan.chunksPerThread = k;
      break;
    }
  }
  plan.combineInCta = true;
  // The grid's partial rows reduced after a grid barrier where the
  // launch can be cooperative (one CTA per SM), else by the final kernel.
  plan.singleLaunch = options.singleLaunch;
  // The groups' column accumulators [R][C][N] f32.
  plan.dynamicSharedBytes =
      llvm::alignTo(plan.rowsPerCta * op.getColResults().size() *
                        *plan.staticCols * 4,
                    16);
  plan.programsPerSm = options.programsPerSM;
  plan.estimatedRegisters = 64;
  return plan;
}
