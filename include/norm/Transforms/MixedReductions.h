//===- MixedReductions.h - Recognition of mixed-order reductions -*- C++ -*-===//
//
// Part of norm-opt.
//
// The recognition behind --norm-fuse-mixed-reductions as a library a host
// compiler can steer (as upstream Linalg's elementwise fusion exposes
// areElementwiseOpsFusable / fuseElementwiseOps with a ControlFusionFn):
//   - findMixedReductionGroups: the groups of a function and, for each,
//     whether it would fuse and why not; the IR is left as it was;
//   - fuseMixedReductions: fuses the groups a control callback accepts
//     (every group without one) and returns the fused ops.
// The pass is a thin driver over fuseMixedReductions.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_TRANSFORMS_MIXEDREDUCTIONS_H
#define NORM_TRANSFORMS_MIXEDREDUCTIONS_H

#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir::norm {

/// Which multi-axis groups fuse (the pass option multi-axis=true / false /
/// batched).
enum class MultiAxisGroups {
  None,        // none: reported and left unfused
  BatchedRows, // batched rows only (adaLN's [B, S, N])
  Gpu,         // the ones the GPU lowering takes: batched rows and slab
               // domains (GroupNorm, NCHW and channels last)
  All,
};
/// The option's word ("true", "false", "batched", "gpu"); nullopt for
/// others.
std::optional<MultiAxisGroups> parseMultiAxisGroups(StringRef word);

/// The options of --norm-fuse-mixed-reductions.
struct MixedReductionOptions {
  /// A remark on every reduction: fused, or why not.
  bool remarks = false;
  /// Groups with row reductions and no column reduction fuse too.
  bool rowOnly = false;
  /// Which multi-axis groups fuse (GroupNorm, adaLN: row sums and column
  /// sums over several dims); the others are reported and left unfused.
  MultiAxisGroups multiAxis = MultiAxisGroups::All;
};

/// One group the recognition formed over a domain [rows..., N].
struct MixedReductionGroup {
  /// Extents of the domain's dims (ShapedType::kDynamic where dynamic), and
  /// which one is N (2-D groups; rowSumDims = colDims = {nDim}).
  SmallVector<int64_t> domain;
  unsigned nDim = 0;
  /// The dims the row reductions sum over and the dims the column
  /// reductions keep (a multi-axis group when they are not one same dim).
  SmallVector<unsigned> rowSumDims, colDims;
  /// The group's reductions and every op the fused op would replace
  /// (elementwise ops included), in block order.
  SmallVector<Operation *> rowReductions, columnReductions, members;
  /// Empty when the group would fuse; else why not (the remark's text).
  std::string whyNot;

  bool wouldFuse() const { return whyNot.empty(); }
};

/// Whether to fuse `group` (which would fuse): a host compiler's choice.
using ControlMixedReductionFn =
    std::function<bool(const MixedReductionGroup &group)>;

/// The groups of `func`, each with whether it would fuse; changes nothing
/// (remarks, when asked, say what fusing would do). Groups are reported as
/// if each were the first fused: fusing one does not change another's
/// members. A domain is tried in several pairings (2-D, then multi-axis);
/// a group that does not fuse in one is reported only when no later
/// pairing takes its reductions.
std::vector<MixedReductionGroup>
findMixedReductionGroups(func::FuncOp func,
                         const MixedReductionOptions &options = {});

/// Fuses every group of `func` that would fuse and that `control` accepts
/// (all of them when `control` is empty) into one norm.mixed_reduction
/// each; a group declined by `control` stays exactly as it was, with a
/// remark when remarks are on. Returns the fused ops in the order made.
SmallVector<MixedReductionOp>
fuseMixedReductions(func::FuncOp func,
                    const MixedReductionOptions &options = {},
                    const ControlMixedReductionFn &control = nullptr);

} // namespace mlir::norm

#endif // NORM_TRANSFORMS_MIXEDREDUCTIONS_H
