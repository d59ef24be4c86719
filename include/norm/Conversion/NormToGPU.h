//===- NormToGPU.h - norm.mixed_reduction on the GPU ------------*- C++ -*-===//
//
// Part of norm-opt. The kernel shape chosen for one norm.mixed_reduction
// (shared by --convert-norm-to-gpu, which writes the kernels, and the
// compile mode, which writes the host launcher that sizes the grid).
//
//===----------------------------------------------------------------------===//

#ifndef NORM_CONVERSION_NORMTOGPU_H
#define NORM_CONVERSION_NORMTOGPU_H

#include "norm/Conversion/NormToGPU/GpuTarget.h"
#include "norm/Conversion/Passes.h"
#include "norm/Dialect/Norm/IR/GroupBoundary.h"
#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <optional>
#include <vector>

namespace mlir::norm {

/// Columns per tile of the final reduction, at least (one per lane of a
/// warp); and partial rows per slice of it, at most (see
/// emitColumnReduction).
constexpr int64_t kFinalColumnsPerCTA = 32;
constexpr int64_t kFinalProgramsPerSlice = 16;

/// Most programs (CTAs) that share one row in the looped variant.
constexpr int64_t kMaxColumnGroups = 8;

/// CTAs per row of the looped variant's `_main_split` kernels (few rows).
constexpr int64_t kSplitColumnGroups = 4;

/// User overrides of the heuristic (0 means "pick"): the GPU options of
/// Passes.td (see GpuOptions.h).
using KernelPlanOptions = ConvertNormToGPUOptions;

/// How one op maps onto the GPU. A program is a group of `threadsPerRow`
/// lanes; a CTA holds `rowsPerCTA` programs. Lane t of a program owns the
/// chunks t, t + G, t + 2G, ... of `vector` consecutive columns.
struct KernelPlan {
  int64_t vector = 1;          // columns per access in the main kernel
  int64_t threadsPerRow = 32;  // G
  int64_t rowsPerCTA = 1;      // R (programs per CTA)
  int64_t chunksPerThread = 0; // K; 0: the looped variant (N too long)
  int64_t programsPerSM = 0;   // CTAs per SM; 0: the occupancy limit
  int64_t estimatedRegisters = 0;
  std::optional<int64_t> staticCols; // N when the type says it
  // Resident, R > 1: the R programs of a CTA add their accumulators in
  // shared memory (in order) and write one partial row per CTA.
  bool combineInCTA = false;
  // Looped: the column accumulators live in shared memory, not in the
  // partial buffer (when N x column results fit).
  bool sharedAccumulators = false;
  // Resident: load the next row while this one is reduced (when the
  // registers allow it).
  bool prefetch = false;
  // The same for the scalar fallback kernel of a vector plan (misaligned
  // rows), which keeps one register per prefetched element.
  bool scalarPrefetch = false;
  int64_t dynamicSharedBytes = 0;
  // The main kernel also does the final reduction, after a grid barrier
  // (cooperative launch; the launcher falls back to the final kernel).
  bool singleLaunch = false;
  // The two-launch path (sm_90+): the final kernel is launched as a
  // programmatic dependent of the main kernel (griddepcontrol; the main
  // kernels signal after their partial rows, the final kernel waits for
  // the main kernel before it reads).
  bool dependentLaunch = false;
  // Looped: programs (CTAs) per row, a compile-time constant (column
  // groups; the `_main_split` kernels have their own, below).
  int64_t minColumnGroups = 1;
  // Looped: the `_main_split` kernels share each row among this many CTAs
  // (0: none), with `splitSharedBytes` of accumulators; the launcher takes
  // them when there are too few rows to fill the SMs.
  int64_t splitColumnGroups = 0;
  int64_t splitSharedBytes = 0;
  // Looped: ask ptxas for two CTAs per SM (<= 64 registers at 512
  // threads) in the vector kernel.
  bool twoCTAsPerSM = false;
  // Resident vector kernel: rows in the cp.async ring (0: plain loads); the
  // ring starts at byte `asyncRingOffset` of the dynamic shared memory.
  int64_t asyncStages = 0;
  int64_t asyncRingOffset = 0;
  // The row inputs ride the cp.async ring (rows of several warps, 4-byte
  // row inputs): no register carried a row ahead.
  bool ringRowInputs = false;
  // Looped vector kernel (sm_90+, static N, 16-byte chunks of every full
  // input): this many rows of the full inputs staged whole in shared
  // memory by cp.async.bulk (0: none), at byte `bulkRingOffset` of the
  // dynamic shared memory, then one mbarrier per stage.
  int64_t bulkStages = 0;
  int64_t bulkRingOffset = 0;
  // Resident, static N too long for one CTA: this many CTAs of a
  // thread-block cluster share each row (1: none). CTA r owns the r-th
  // contiguous part of the row's chunks (chunksPerThread counts the part);
  // the cluster is the program, writing one partial row.
  int64_t clusterCTAs = 1;
  // Cluster rows with a cp.async ring of >= 3 rows and one row stage: row
  // it + 1's sums are pushed to the cluster before row it's are awaited,
  // and the vector kernel reads each row from the ring twice (sums, then
  // the elementwise part) instead of holding it.
  bool clusterSumsAhead = false;
  // Resident vector plan of one CTA per row: a `_main_peel` kernel for
  // rows that need not start on a 16-byte boundary (a static N not a
  // multiple of `vector`, which then has no `_main` kernel, or a tier's
  // run-time N). Each program's rows share one phase (the launcher makes
  // the row stride P x the rows' stride a multiple of `vector`); the
  // program peels the columns before its first boundary (head) and after
  // its last whole chunk (tail), one per lane, and takes the 16-byte chunks
  // in between.
  bool peel = false;
  // A resident tier of a run-time N: the plan made as for a static N =
  // tierCols, whose kernels read N at run time and take any N <= tierCols
  // (0: not a tier).
  int64_t tierCols = 0;
  // A channels-first domain (N not the last dim): one kernel
  // (`_main_scalar`) of threadsPerRow / 32 warps that split N, a lane per
  // row (StridedKernel.cpp, docs/gpu.md "Channels-first rows"); static N.
  bool stridedRows = false;
  // Run-time N: the resident tiers, by increasing tierCols (the launcher
  // takes the first that holds N; this plan's looped kernels above the
  // last). Empty for a static N and with tier-min-cols = 0.
  std::vector<KernelPlan> tiers;

  int64_t blockThreads() const { return threadsPerRow * rowsPerCTA; }
  /// Threads of the final reduction (kernel or tail): the main kernel's
  /// block, so both paths sum in one order; 32 columns x threads / 32.
  int64_t finalThreads() const {
    return blockThreads() % kFinalColumnsPerCTA == 0 ? blockThreads() : 512;
  }
  bool resident() const { return chunksPerThread > 0; }
  /// Looped: chunks per iteration of the loops over a row, for the kernel
  /// of `vector` columns per access (the vector or the scalar kernel).
  int64_t loopUnroll(MixedReductionOp op, int64_t vector) const;
};

/// Dynamic shared memory one CTA may use for accumulators (and the
/// cp.async ring) on `target`: 160 KiB where the CTA may have 227 (the
/// rest stays for a second CTA's worth of occupancy; measured on the H100),
/// and 3 KiB below the CTA's limit (its static arrays) elsewhere.
int64_t maxAccumulatorSharedBytes(const GpuTarget &target);

/// Dynamic shared memory of one CTA that takes an SM to itself (the
/// looped kernels' bulk ring, KernelPlan::bulkStages): the CTA's limit less
/// 3 KiB for its static arrays.
int64_t maxDynamicSharedBytes(const GpuTarget &target);

/// The bulk ring's mbarrier per stage (8 bytes, kept 16-byte aligned).
constexpr int64_t kBulkBarrierBytes = 16;

/// The looped variant's accumulators per CTA when it aims at two CTAs per
/// SM (KernelPlan::twoCTAsPerSM): 100 KiB on the H100, at most half an SM's
/// shared memory less 14 KiB (static arrays, the reserved 1 KiB per CTA).
int64_t loopedSharedBytes(const GpuTarget &target);

/// Bytes of one element of `t` (or of its element type, for shaped types).
int64_t elementBytes(Type t);

/// The plan as `#norm.kernel_plan` (kernel names start with `prefix`):
/// the one description of the op's kernels (PlanAttr.cpp).
KernelPlanAttr kernelPlanAttr(MLIRContext *ctx, StringRef prefix,
                              const KernelPlan &plan);

/// The plan `op`'s `#norm.kernel_plan` says: what the kernel builders and
/// the host lowering read (the planner's estimates are not in it).
FailureOr<KernelPlan> readKernelPlan(MixedReductionOp op);

/// One main kernel of a plan: its name, the columns per access it is
/// built for, and whether it is a split kernel (more CTAs per row).
struct MainKernel {
  std::string name;
  int64_t vector;
  bool split;
  bool peel; // the peeled vector kernel
};

/// The plan of a plan's split kernels (`_main_split*`): its split column
/// groups and their accumulators, two launches, no bulk ring.
KernelPlan splitKernelPlan(const KernelPlan &plan);

/// The main kernels a plan (or tier) has, named `prefix` + suffix, in the
/// host's choice order: worked out here only, for the builders and the
/// launches alike.
SmallVector<MainKernel> mainKernels(const KernelPlan &plan, StringRef prefix);

/// What a kernel parameter carries. The kernel builders declare and read
/// their parameters, and the host launches pass them, in the order
/// mainKernelParams / finalKernelParams give: one list for both sides.
enum class KernelParam {
  FullIn,    // the full inputs (pointers)
  RowIn,     // the row inputs
  ColIn,     // the column inputs
  FullOut,   // the full results
  Partial,   // the fp32 partial buffer [C, P, N]
  Rows,      // i64 rows
  Cols,      // i64 N
  StrideIn,  // i64 row (or column) stride per full input
  StrideOut, // i64 stride per full result
  Scalar,    // a pointer per captured 0-d tensor
  Barrier,   // the grid-barrier word (single launch)
  InitIn,    // a pointer per column init that is not a constant
  ColOut,    // the column results
  Finalize,  // i64: the main kernel finishes the columns itself
  Programs,  // i64 partial rows P (final kernel)
};

/// `count` parameters of one kind, pointers or i64.
struct KernelParamGroup {
  KernelParam kind;
  unsigned count;
  bool pointer;
};

/// The main kernels' parameters of `op`, in order (every main kernel,
/// tiers and split kernels included, takes the same list).
SmallVector<KernelParamGroup> mainKernelParams(MixedReductionOp op);
/// The final kernels' parameters of `op`, in order.
SmallVector<KernelParamGroup> finalKernelParams(MixedReductionOp op);

/// Picks the kernel shape for `op` on `target` (see docs/gpu.md for the
/// rules).
KernelPlan planKernel(MixedReductionOp op, const KernelPlanOptions &options,
                      const GpuTarget &target);


} // namespace mlir::norm

#endif // NORM_CONVERSION_NORMTOGPU_H
