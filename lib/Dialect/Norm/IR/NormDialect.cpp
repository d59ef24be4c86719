//===- NormDialect.cpp - The norm dialect ---------------------------------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormDialect.h"
#include "norm/Dialect/Norm/IR/NormAttrs.h"
#include "norm/Dialect/Norm/IR/NormOps.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::norm;

#include "norm/Dialect/Norm/IR/NormOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "norm/Dialect/Norm/IR/NormAttrs.cpp.inc"

void NormDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "norm/Dialect/Norm/IR/NormAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "norm/Dialect/Norm/IR/NormOps.cpp.inc"
      >();
}

namespace {
bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// The fields a kernel plan and its resident tiers share.
LogicalResult verifyKernelShape(function_ref<InFlightDiagnostic()> emitError,
                                StringRef what, int64_t vector,
                                int64_t threadsPerRow, int64_t rowsPerCta,
                                int64_t block, int64_t asyncStages,
                                int64_t finalThreads,
                                int64_t dynamicSharedBytes,
                                bool slabRows = false) {
  if (!isPowerOfTwo(vector) || vector > 16)
    return emitError() << what
                       << ": vector must be a power of two <= 16, got "
                       << vector;
  // A slab kernel's CTA is its row's lanes: whole warps (320 threads for
  // 10 channels a group), not a butterfly's power of two.
  if (slabRows && (threadsPerRow < 32 || threadsPerRow % 32 != 0 ||
                   threadsPerRow > 1024))
    return emitError() << what
                       << ": a slab plan's threads_per_row must be whole "
                          "warps, at most 1024, got "
                       << threadsPerRow;
  if (!slabRows && (!isPowerOfTwo(threadsPerRow) || threadsPerRow > 1024))
    return emitError() << what
                       << ": threads_per_row must be a power of two <= "
                          "1024, got "
                       << threadsPerRow;
  if (rowsPerCta < 1 || block != threadsPerRow * rowsPerCta || block > 1024)
    return emitError() << what << ": block (" << block
                       << ") must be threads_per_row x rows_per_cta (<= 1024)";
  if (asyncStages < 0 || dynamicSharedBytes < 0)
    return emitError() << what << ": negative count or size";
  if (asyncStages == 1)
    return emitError() << what << ": a cp.async ring has at least 2 stages";
  if (finalThreads < 32 || finalThreads % 32 != 0 || finalThreads > 1024)
    return emitError() << what
                       << ": final_threads must be a multiple of 32 in [32, "
                          "1024], got "
                       << finalThreads;
  if (dynamicSharedBytes % 4 != 0)
    return emitError() << what << ": shared-memory sizes are f32 counts";
  return success();
}
} // namespace

LogicalResult
ResidentTierAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         int64_t cols, int64_t vector, int64_t threadsPerRow,
                         int64_t rowsPerCta, int64_t chunksPerThread,
                         int64_t block, BoolAttr combineInCta,
                         BoolAttr singleLaunch, int64_t asyncStages,
                         int64_t finalThreads, int64_t dynamicSharedBytes,
                         bool peel, bool prefetch, bool scalarPrefetch,
                         int64_t asyncRingOffset, bool ringRowInputs) {
  if (failed(verifyKernelShape(emitError, "resident_tier", vector,
                               threadsPerRow, rowsPerCta, block, asyncStages,
                               finalThreads, dynamicSharedBytes)))
    return failure();
  if (ringRowInputs && asyncStages < 2)
    return emitError() << "resident_tier: ring_row_inputs needs a cp.async "
                          "ring (async_stages >= 2)";
  if (chunksPerThread < 1)
    return emitError() << "resident_tier: chunks_per_thread must be >= 1 "
                          "(a tier is register-resident), got "
                       << chunksPerThread;
  if (peel && (vector == 1 || threadsPerRow < vector))
    return emitError() << "resident_tier: peel needs a vector kernel of at "
                          "least `vector` threads per row";
  if (cols < 1 || cols % vector != 0 ||
      cols > threadsPerRow * chunksPerThread * vector)
    return emitError() << "resident_tier: cols (" << cols
                       << ") must be a multiple of vector and at most "
                          "threads_per_row x chunks_per_thread x vector";
  return success();
}

LogicalResult
KernelPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       StringRef kernel, int64_t vector, int64_t threadsPerRow,
                       int64_t rowsPerCta, int64_t chunksPerThread,
                       int64_t programsPerSm, int64_t block,
                       BoolAttr combineInCta, BoolAttr singleLaunch,
                       int64_t asyncStages, int64_t columnGroups,
                       int64_t splitColumnGroups, int64_t splitSharedBytes,
                       int64_t finalThreads, int64_t dynamicSharedBytes,
                       int64_t clusterCtas, int64_t bulkStages,
                       bool dependentLaunch, bool peel, bool prefetch,
                       bool scalarPrefetch, bool sharedAccumulators,
                       bool twoCtasPerSm, int64_t asyncRingOffset,
                       bool ringRowInputs, int64_t bulkRingOffset,
                       bool clusterSumsAhead, bool stridedRows,
                       bool slabRows, int64_t slabGroups,
                       int64_t splitMinBytes, int64_t latencyCtas,
                       int64_t latencyRows, ArrayAttr tiers) {
  if (kernel.empty())
    return emitError() << "kernel_plan: empty kernel name";
  if (failed(verifyKernelShape(emitError, "kernel_plan", vector,
                               threadsPerRow, rowsPerCta, block, asyncStages,
                               finalThreads, dynamicSharedBytes, slabRows)))
    return failure();
  if (chunksPerThread < 0 || programsPerSm < 0 || columnGroups < 0 ||
      splitColumnGroups < 0 || splitSharedBytes < 0)
    return emitError() << "kernel_plan: negative count or size";
  if (asyncRingOffset < 0 || bulkRingOffset < 0 ||
      asyncRingOffset % 16 != 0 || bulkRingOffset % 16 != 0)
    return emitError() << "kernel_plan: ring offsets must be 16-byte "
                          "multiples";
  bool resident = chunksPerThread > 0;
  if (resident && (columnGroups != 0 || splitColumnGroups != 0))
    return emitError() << "kernel_plan: a resident plan has no column groups";
  if (!resident && (asyncStages != 0 ||
                    (combineInCta.getValue() && !stridedRows)))
    return emitError() << "kernel_plan: the looped variant has no cp.async "
                          "ring and no CTA-combined partials";
  if (!resident && !stridedRows && !slabRows && rowsPerCta != 1)
    return emitError() << "kernel_plan: the looped variant takes one row per "
                          "CTA (its shared accumulators are the CTA's), got "
                          "rows_per_cta "
                       << rowsPerCta;
  if (splitSharedBytes % 4 != 0)
    return emitError() << "kernel_plan: shared-memory sizes are f32 counts";
  if (ringRowInputs && asyncStages < 2)
    return emitError() << "kernel_plan: ring_row_inputs needs a cp.async "
                          "ring (async_stages >= 2)";
  if (clusterCtas < 1 || clusterCtas > 16 || !llvm::isPowerOf2_64(clusterCtas))
    return emitError() << "kernel_plan: cluster_ctas must be 1, 2, 4, 8 or "
                          "16, got "
                       << clusterCtas;
  if (clusterCtas > 1 && (!resident || rowsPerCta != 1 || tiers))
    return emitError() << "kernel_plan: only a resident plan of one row per "
                          "CTA and a static N shares rows in a cluster";
  if (peel && (!resident || vector == 1 || clusterCtas != 1 ||
               threadsPerRow < vector))
    return emitError() << "kernel_plan: peel needs a resident vector plan "
                          "of one CTA per row and at least `vector` threads "
                          "per row";
  if (clusterSumsAhead && (clusterCtas < 2 || asyncStages < 3))
    return emitError() << "kernel_plan: cluster_sums_ahead needs a cluster "
                          "(cluster_ctas > 1) and a cp.async ring of at "
                          "least 3 rows";
  if (latencyCtas < 0 || latencyCtas > 16 ||
      (latencyCtas > 0 && !llvm::isPowerOf2_64(latencyCtas)) ||
      latencyRows < 0 || (latencyCtas > 1) != (latencyRows > 0))
    return emitError() << "kernel_plan: latency_ctas must be 0 or a power "
                          "of two up to 16, and latency_rows at least 1 "
                          "exactly where latency_ctas is at least 2";
  if (latencyCtas > 1 && (stridedRows || slabRows || tiers))
    return emitError() << "kernel_plan: the latency kernels are for a "
                          "row-major static N";
  if (splitMinBytes < 0 || (splitMinBytes > 0 && !slabRows))
    return emitError() << "kernel_plan: split_min_bytes must be at least 0, "
                          "and 0 unless slab_rows";
  if (slabGroups < 1 || (slabGroups > 1 && !slabRows))
    return emitError() << "kernel_plan: slab_groups must be at least 1, and "
                          "1 unless slab_rows";
  if (bulkStages < 0 || bulkStages == 1)
    return emitError() << "kernel_plan: bulk_stages must be 0 (none) or at "
                          "least 2, got "
                       << bulkStages;
  if (bulkStages > 0 && (resident || vector == 1 || rowsPerCta != 1 || tiers))
    return emitError() << "kernel_plan: only a looped vector plan of one row "
                          "per CTA and a static N has a bulk ring";
  if (!tiers)
    return success();
  int64_t previous = 0;
  for (Attribute element : tiers) {
    auto tier = dyn_cast<ResidentTierAttr>(element);
    if (!tier)
      return emitError() << "kernel_plan: tiers must be #norm.resident_tier "
                            "attributes, got "
                         << element;
    if (tier.getCols() <= previous)
      return emitError() << "kernel_plan: tiers must be by increasing cols";
    if (tier.getVector() != vector)
      return emitError() << "kernel_plan: a tier's vector ("
                         << tier.getVector() << ") must be the plan's ("
                         << vector << ")";
    previous = tier.getCols();
  }
  return success();
}
