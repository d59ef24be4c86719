//===- PropagateReshapes.cpp - generics onto their reshapes' finest dims ---===//
//
// Part of norm-opt.
//
// --norm-propagate-reshapes: front ends spell GroupNorm's backward with
// reshapes between its steps (torch's decomposition views x [N, C, H, W] as
// [N, G, C/G, H*W], its per-channel sums [N, C] as [N, G, C/G]). Each
// generic next to a tensor.expand_shape / tensor.collapse_shape is
// rewritten over the finer iteration space, so that all the steps of one
// norm share one domain ([N, G, C/G, H, W]) and the recognition pass sees
// them as one group. Steps:
//   1. planExpansion*: from a reshape next to a generic, the loops of the
//      generic that split and the sizes they split into;
//   2. expandGeneric: the generic over the split loops; its other operands
//      through tensor.expand_shape, its results collapsed back for the
//      users that read the coarse form;
//   3. upstream's reshape folds (expand of collapse, fill and empty through
//      reshapes) clean up, and the patterns run to a fixpoint (every step
//      makes a generic finer, so it ends); reshapes that are alike are
//      merged (mergeAlikeReshapes).
// Upstream's fusion by expansion does the same for parallel generics only;
// here reduction loops split too (a sum over H*W becomes one over H and W).
//
//===----------------------------------------------------------------------===//

#include "norm/Transforms/Passes.h"
#include "norm/Utils/IndexingMaps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::norm {
#define GEN_PASS_DEF_NORMPROPAGATERESHAPES
#include "norm/Transforms/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

namespace {

/// Per loop of a generic, the sizes it splits into (one entry: unsplit).
using LoopSplit = SmallVector<SmallVector<OpFoldResult>>;

/// Generics this pass rewrites: on tensors, every map a projected
/// permutation (constant 0 for a unit dim: a keepdim statistic), no
/// linalg.index in the payload.
bool isExpandable(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() == 0)
    return false;
  for (AffineMap map : op.getIndexingMapsArray())
    if (!isDimsOrZeros(map))
      return false;
  return op.getBody()->getOps<linalg::IndexOp>().empty();
}

/// Step 1: the split a reshape asks of `op` through `operand`, whose tensor
/// dim t becomes the dims `groups[t]` of `fine` (the reshape's finer side,
/// as mixed sizes). None where a loop would split twice.
std::optional<LoopSplit>
planExpansion(linalg::GenericOp op, OpOperand &operand,
              ArrayRef<ReassociationIndices> groups,
              ArrayRef<OpFoldResult> fine) {
  AffineMap map = op.getMatchingIndexingMap(&operand);
  if (map.getNumResults() != groups.size())
    return std::nullopt;
  Builder b(op.getContext());
  LoopSplit split(op.getNumLoops(), SmallVector<OpFoldResult>{});
  bool splits = false;
  for (auto [t, group] : llvm::enumerate(groups)) {
    auto dim = dyn_cast<AffineDimExpr>(map.getResult(t));
    if (!dim) { // a unit dim read at 0
      if (group.size() > 1)
        return std::nullopt;
      continue;
    }
    unsigned loop = dim.getPosition();
    if (!split[loop].empty())
      return std::nullopt; // a loop read twice by one operand
    for (int64_t d : group)
      split[loop].push_back(fine[d]);
    splits |= group.size() > 1;
  }
  if (!splits)
    return std::nullopt;
  for (auto &sizes : split)
    if (sizes.empty())
      sizes.push_back(b.getIndexAttr(ShapedType::kDynamic)); // unsplit
  return split;
}

/// The tensor `value` (read through `map`) with the split loops' dims
/// expanded; `groups` gets its reassociation. Returns `value` unchanged
/// where none of its dims split.
Value expandOperand(RewriterBase &rewriter, Location loc, Value value,
                    AffineMap map, const LoopSplit &split,
                    SmallVectorImpl<ReassociationIndices> &groups) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<OpFoldResult> sizes;
  bool changed = false;
  for (auto [t, expr] : llvm::enumerate(map.getResults())) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    ReassociationIndices group;
    if (!dim || split[dim.getPosition()].size() == 1) {
      group.push_back(sizes.size());
      sizes.push_back(tensor::getMixedSize(rewriter, loc, value, t));
    } else {
      changed = true;
      for (OpFoldResult size : split[dim.getPosition()]) {
        group.push_back(sizes.size());
        sizes.push_back(size);
      }
    }
    groups.push_back(group);
  }
  if (!changed)
    return value;
  SmallVector<int64_t> shape;
  for (OpFoldResult size : sizes)
    shape.push_back(getConstantIntValue(size).value_or(ShapedType::kDynamic));
  auto fineType = RankedTensorType::get(shape, type.getElementType());
  return tensor::ExpandShapeOp::create(rewriter, loc, fineType, value, groups,
                                       sizes);
}

/// Step 2: `op` over the split loops. Returns the new generic; the old
/// one's results are replaced (collapsed back where their type changed).
linalg::GenericOp expandGeneric(RewriterBase &rewriter, linalg::GenericOp op,
                                const LoopSplit &split) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  // Loop j becomes the loops [first[j], first[j] + split[j].size()).
  SmallVector<unsigned> first;
  SmallVector<utils::IteratorType> iterators;
  for (auto [j, sizes] : llvm::enumerate(split)) {
    first.push_back(iterators.size());
    iterators.append(sizes.size(), op.getIteratorTypesArray()[j]);
  }
  auto fineMap = [&](AffineMap map) {
    SmallVector<AffineExpr> exprs;
    for (AffineExpr expr : map.getResults()) {
      auto dim = dyn_cast<AffineDimExpr>(expr);
      if (!dim) {
        exprs.push_back(expr);
        continue;
      }
      unsigned loop = dim.getPosition();
      for (unsigned k = 0; k < split[loop].size(); ++k)
        exprs.push_back(getAffineDimExpr(first[loop] + k, ctx));
    }
    return AffineMap::get(iterators.size(), 0, exprs, ctx);
  };
  rewriter.setInsertionPoint(op);
  SmallVector<Value> inputs, inits;
  SmallVector<AffineMap> maps;
  SmallVector<SmallVector<ReassociationIndices>> initGroups;
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    SmallVector<ReassociationIndices> groups;
    Value fine = expandOperand(rewriter, loc, operand.get(), map, split, groups);
    maps.push_back(fineMap(map));
    if (op.isDpsInit(&operand)) {
      inits.push_back(fine);
      initGroups.push_back(groups);
    } else {
      inputs.push_back(fine);
    }
  }
  auto fine = linalg::GenericOp::create(
      rewriter, loc, TypeRange(ValueRange(inits)), inputs, inits, maps,
      iterators);
  rewriter.inlineRegionBefore(op.getRegion(), fine.getRegion(),
                              fine.getRegion().begin());
  SmallVector<Value> results;
  for (auto [old, value, groups] :
       llvm::zip_equal(op->getResults(), fine->getResults(), initGroups)) {
    results.push_back(value.getType() == old.getType()
                          ? Value(value)
                          : tensor::CollapseShapeOp::create(
                                rewriter, loc, old.getType(), value, groups)
                                .getResult());
  }
  rewriter.replaceOp(op, results);
  return fine;
}

/// A generic reading a collapsed tensor runs over the collapse's source.
struct ExpandThroughCollapsedInput : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!isExpandable(op))
      return failure();
    for (OpOperand &operand : op->getOpOperands()) {
      auto collapse = operand.get().getDefiningOp<tensor::CollapseShapeOp>();
      if (!collapse)
        continue;
      Value src = collapse.getSrc();
      SmallVector<OpFoldResult> fine =
          tensor::getMixedSizes(rewriter, collapse.getLoc(), src);
      std::optional<LoopSplit> split = planExpansion(
          op, operand, collapse.getReassociationIndices(), fine);
      if (!split)
        continue;
      expandGeneric(rewriter, op, *split);
      return success();
    }
    return rewriter.notifyMatchFailure(op, "no collapsed input splits a loop");
  }
};

/// A generic whose result is expanded computes the expanded form.
struct ExpandIntoExpandedResult : OpRewritePattern<tensor::ExpandShapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExpandShapeOp expand,
                                PatternRewriter &rewriter) const override {
    auto result = dyn_cast<OpResult>(expand.getSrc());
    auto op = result ? dyn_cast<linalg::GenericOp>(result.getOwner())
                     : linalg::GenericOp();
    if (!op || !isExpandable(op))
      return failure();
    OpOperand &init = op.getDpsInitsMutable()[result.getResultNumber()];
    // The generic moves nowhere: its new sizes must be there before it. An
    // unsplit dim's is the init's; a split one's the expand's (often taken
    // after the generic: then it stays).
    rewriter.setInsertionPoint(op);
    DominanceInfo dominance(op->getParentOp());
    SmallVector<OpFoldResult> sizes = expand.getMixedOutputShape();
    for (auto [t, group] : llvm::enumerate(expand.getReassociationIndices())) {
      if (group.size() == 1) {
        sizes[group.front()] =
            tensor::getMixedSize(rewriter, expand.getLoc(), init.get(), t);
        continue;
      }
      for (int64_t d : group)
        if (auto size = dyn_cast<Value>(sizes[d]);
            size && !dominance.properlyDominates(size, op))
          return rewriter.notifyMatchFailure(expand, "a size comes later");
    }
    std::optional<LoopSplit> split = planExpansion(
        op, init, expand.getReassociationIndices(), sizes);
    if (!split)
      return failure();
    unsigned number = result.getResultNumber(); // op is gone after this
    linalg::GenericOp fine = expandGeneric(rewriter, op, *split);
    Value value = fine->getResult(number);
    if (value.getType() != expand.getType())
      return failure(); // cannot happen: the split is the expand's own
    rewriter.replaceOp(expand, value);
    return success();
  }
};

/// Two expand_shapes of one tensor into one type by one reassociation,
/// with at most one run-time size per group: the same value, whatever
/// tensor.dim their run-time sizes were taken from.
bool sameExpansion(Operation *a, Operation *b) {
  auto x = dyn_cast<tensor::ExpandShapeOp>(a);
  auto y = dyn_cast<tensor::ExpandShapeOp>(b);
  if (!x || !y || x.getSrc() != y.getSrc() || x.getType() != y.getType() ||
      x.getReassociationIndices() != y.getReassociationIndices())
    return false;
  return llvm::all_of(x.getReassociationIndices(), [&](const auto &group) {
    return llvm::count_if(group, [&](int64_t d) {
             return x.getType().isDynamicDim(d);
           }) <= 1;
  });
}

struct NormPropagateReshapesPass
    : norm::impl::NormPropagateReshapesBase<NormPropagateReshapesPass> {
  void runOnOperation() override {
    // Nothing to propagate: the IR stays exactly as it was.
    if (!getOperation()
             ->walk([](Operation *op) {
               return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op)
                          ? WalkResult::interrupt()
                          : WalkResult::advance();
             })
             .wasInterrupted())
      return;
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    populateNormPropagateReshapesPatterns(patterns);
    // Not converging leaves valid IR, only coarser than it could be.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns));
    mergeAlikeReshapes();
  }

  /// One tensor reshaped alike for several generics is one value again
  /// (otherwise a group would read it once per copy), with the sizes they
  /// take (tensor.dim, index constants). Only these: a
  /// general CSE would also merge ops two norms share (adaLN's chain's
  /// `1 + scale`), and with them the two groups.
  void mergeAlikeReshapes() {
    DominanceInfo dominance(getOperation());
    SmallVector<Operation *> seen;
    SmallVector<Operation *> dead;
    getOperation()->walk([&](Operation *op) {
      // The sizes first (they come before the reshapes that read them).
      if (!isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::DimOp,
               arith::ConstantIndexOp>(op))
        return;
      for (Operation *earlier : seen)
        if ((OperationEquivalence::isEquivalentTo(
                 earlier, op, OperationEquivalence::IgnoreLocations) ||
             sameExpansion(earlier, op)) &&
            dominance.properlyDominates(earlier, op)) {
          op->replaceAllUsesWith(earlier);
          dead.push_back(op);
          return;
        }
      seen.push_back(op);
    });
    for (Operation *op : dead)
      op->erase();
  }
};

} // namespace

void mlir::norm::populateNormPropagateReshapesPatterns(
    RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<ExpandThroughCollapsedInput, ExpandIntoExpandedResult>(ctx);
  // Step 3: the reshapes left between two generics, and those of inits.
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
  linalg::FillOp::getCanonicalizationPatterns(patterns, ctx);
  tensor::populateFoldTensorEmptyPatterns(patterns);
  tensor::DimOp::getCanonicalizationPatterns(patterns, ctx);
}
