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

/// The latency kernels (latencyKernelPlan): threads per CTA; lanes per row
/// group at least; columns per lane at most (more lanes above: each is
/// an accumulator per column result through the last pass); the 32-bit
/// registers of raw loads per thread that one unrolled step of a pass
/// issues at most, and its rows at most; the bytes of the static arrays of
/// row sums (this CTA's parts and the totals), which cap latency_rows.
constexpr int64_t kLatencyThreads = 512;
constexpr int64_t kLatencyMinLanes = 8;
constexpr int64_t kLatencyMaxColumns = 16;
constexpr int64_t kLatencyLoadRegisters = 32;
constexpr int64_t kLatencyUnroll = 8;
constexpr int64_t kLatencySlotBytes = 32 * 1024;
/// Rows x a CTA's chunks of a row that the latency kernels take at most
/// (KernelPlanner::withLatencyKernels: measured on the H200, 7x4099's 1799
/// won, 4x17389's 4348 lost).
constexpr int64_t kLatencyChunkRows = 2048;

/// User overrides of the heuristic (0 means "pick"): the GPU options of
/// Passes.td (see GpuOptions.h).
using KernelPlanOptions = ConvertNormToGPUOptions;

/// The kernel plan's fields, defined once as the parameters of
/// #norm.kernel_plan and #norm.resident_tier (NormAttrs.td, which says what
/// each means; docs/gpu.md): a member per field, generated.
#define GEN_KERNEL_PLAN_FIELDS
#include "norm/Dialect/Norm/IR/KernelPlanFields.h.inc"

/// How one op maps onto the GPU. A program is a group of `threadsPerRow`
/// lanes; a CTA holds `rowsPerCta` programs. Lane t of a program owns the
/// chunks t, t + G, t + 2G, ... of `vector` consecutive columns. The
/// fields are KernelPlanFields'; here only what the attribute does not
/// hold.
struct KernelPlan : KernelPlanFields {
  // The planner's estimate of the main kernel's registers per thread.
  int64_t estimatedRegisters = 0;
  // N when the op's type says it.
  std::optional<int64_t> staticCols;
  // Run-time N: the resident tiers, by increasing `cols` (the launcher
  // takes the first that holds N; this plan's looped kernels above the
  // last). Empty for a static N and with tier-min-cols = 0.
  std::vector<KernelPlan> tiers;

  /// Threads per CTA (the attribute's derived `block`).
  int64_t block() const { return threadsPerRow * rowsPerCta; }
  /// Threads of the final reduction (kernel or tail; the attribute's
  /// derived `final_threads`): the main kernel's block, so both paths sum
  /// in one order; 32 columns x threads / 32.
  int64_t finalThreads() const {
    return block() % kFinalColumnsPerCTA == 0 ? block() : 512;
  }
  bool resident() const { return chunksPerThread > 0; }
  // A latency kernel's own plan (latencyKernelPlan): rows of one pass
  // unrolled at a time; 0 for every other kernel.
  int64_t latencyUnroll = 0;
  bool latencyKernel() const { return latencyUnroll > 0; }
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
/// SM (KernelPlan::twoCtasPerSm): 100 KiB on the H100, at most half an SM's
/// shared memory less 14 KiB (static arrays, the reserved 1 KiB per CTA).
int64_t loopedSharedBytes(const GpuTarget &target);

/// Bytes of one element of `t` (or of its element type, for shaped types).
int64_t elementBytes(Type t);
/// The most elementBytes among `values` (1 for none).
int64_t widestElementBytes(ValueRange values);

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
  bool peel;            // the peeled vector kernel
  bool latency = false; // a `_latency` kernel (latencyKernelPlan)
};

/// The plan of a plan's split kernels (`_main_split*`): its split column
/// groups and their accumulators, two launches, no bulk ring.
KernelPlan splitKernelPlan(const KernelPlan &plan);

/// The plan of a plan's latency kernel of `vector` columns per access
/// (`_latency`: the plan's vector; `_latency_scalar`: 1): one cluster of
/// latency_ctas CTAs, each owning a part of ceil(N / vector / C) chunks;
/// a CTA of kLatencyThreads threads in groups of the fewest lanes (a power
/// of two, at least kLatencyMinLanes) that hold the part in at most
/// kLatencyMaxColumns columns each; rows unrolled kLatencyUnroll at a time
/// within kLatencyLoadRegisters of raw loads per thread; the groups'
/// column sums in dynamic shared memory. Two passes or more over the rows,
/// so no ring, prefetch or peel; one launch and no final kernel.
KernelPlan latencyKernelPlan(MixedReductionOp op, const KernelPlan &plan,
                             int64_t vector);

/// The main kernels a plan (or tier) has, named `prefix` + suffix, in the
/// host's choice order: worked out here only, for the builders and the
/// launches alike.
SmallVector<MainKernel> mainKernels(const KernelPlan &plan, StringRef prefix);

/// The plan one main kernel of `plan` is built from, every choice of that
/// kernel made: the split kernels' (splitKernelPlan); the aligned vector
/// kernel's (no peel); the scalar kernels' (`vector` 1 and as many columns
/// per lane as the vector kernel, no cp.async or bulk ring, the plan's
/// scalar prefetch, no two-CTAs-per-SM cap); the register prefetch only
/// without a ring, the row inputs in the ring and the cluster sums a row
/// ahead only where this kernel has what they need. The kernel builders
/// read it as it is.
KernelPlan mainKernelPlan(MixedReductionOp op, const KernelPlan &plan,
                          const MainKernel &kernel);

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
