//===- MergeNestedSums.cpp - sums of linear maps of sums as one sum --------===//
//
// Part of norm-opt.
//
// --norm-merge-nested-sums: torch's GroupNorm backward (and Inductor's
// decomposition of it) sums x * dy and dy over H*W first, per channel
// ([N, C]), and reduces those per-channel sums again: over the group's
// channels for dx's two statistics ([N, G]), over N for dweight and dbias
// ([C]). Every second-level value is linear in the first-level sums, so
//   sum_D2 L(sum_D1 f) = sum_(D1 u D2) L(f)
// and each becomes one reduction over the whole domain, the form the
// recognition pass fuses (row sums over the slab, column sums over N and
// H*W). Steps, per consumer C of one or more first-level sums T_i:
//   1. matchSum: each T_i is a sum (`out + f`, f not reading out, into a
//      zero fill) whose result is indexed by all its parallel loops;
//   2. isLinearIn: C's payload is homogeneous linear in the T_i (add, sub,
//      neg, and mul / div by values that do not read them), yielded
//      directly (C parallel) or added into C's output (C a sum itself);
//   3. planDomain: the merged loops are T_1's producer's, with C's loops in
//      place of its parallel ones; every T_i's producer maps onto them;
//   4. buildMerged: one generic reading the producers' inputs and C's
//      other inputs, computing each f_i then C's payload on them.
// Float sums are reassociated (as the fused kernels do anyway).
//
//===----------------------------------------------------------------------===//

#include "norm/Transforms/Passes.h"
#include "norm/Utils/IndexingMaps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::norm {
#define GEN_PASS_DEF_NORMMERGENESTEDSUMS
#include "norm/Transforms/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

namespace {

bool hasSimpleMaps(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || !op.getBody()->getOps<linalg::IndexOp>().empty())
    return false;
  for (AffineMap map : op.getIndexingMapsArray())
    if (!isDimsOrZeros(map))
      return false;
  for (Operation &inner : op.getBody()->without_terminator())
    if (!isPure(&inner))
      return false;
  return true;
}

bool isZeroFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  auto zero = fill.value().getDefiningOp<arith::ConstantOp>();
  auto attr = zero ? dyn_cast<FloatAttr>(zero.getValue()) : FloatAttr();
  return attr && attr.getValue().isZero();
}

/// The summand of a yield `out + f` (either order), f not reading out.
Value summandOf(linalg::GenericOp op) {
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  if (yield.getNumOperands() != 1)
    return {};
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != op.getBody())
    return {};
  BlockArgument out = op.getBody()->getArguments().back();
  Value f = add.getLhs() == out ? add.getRhs()
                                : (add.getRhs() == out ? add.getLhs() : Value());
  if (!f || !out.hasOneUse())
    return {};
  return f;
}

/// Step 1: a first-level sum, or null.
linalg::GenericOp matchSum(Value value) {
  auto op = value.getDefiningOp<linalg::GenericOp>();
  if (!op || op->getNumResults() != 1 || !hasSimpleMaps(op) ||
      op.getNumReductionLoops() == 0 || !isZeroFill(op.getDpsInits()[0]) ||
      !summandOf(op))
    return {};
  AffineMap out = op.getIndexingMapsArray().back();
  if (out.getNumResults() != op.getNumParallelLoops() ||
      !out.isProjectedPermutation(/*allowZeroInResults=*/false))
    return {};
  return op;
}

/// Step 2: whether `v` is homogeneous linear in `vars` (every term has
/// exactly one factor from them); `reads` says whether a value reads any.
bool isLinearIn(Value v, const llvm::SmallPtrSetImpl<Value> &vars,
                llvm::function_ref<bool(Value)> reads) {
  if (vars.contains(v))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  auto lin = [&](Value x) { return isLinearIn(x, vars, reads); };
  if (isa<arith::AddFOp, arith::SubFOp>(def))
    return lin(def->getOperand(0)) && lin(def->getOperand(1));
  if (isa<arith::NegFOp>(def))
    return lin(def->getOperand(0));
  if (isa<arith::MulFOp>(def)) {
    Value a = def->getOperand(0), b = def->getOperand(1);
    return (lin(a) && !reads(b)) || (lin(b) && !reads(a));
  }
  if (isa<arith::DivFOp>(def))
    return lin(def->getOperand(0)) && !reads(def->getOperand(1));
  return false;
}

/// The merged iteration domain: its iterators, and per original loop of C
/// and of each sum, its loop in the merged domain.
struct MergedDomain {
  SmallVector<utils::IteratorType> iterators;
  SmallVector<unsigned> ofConsumer;
  SmallVector<SmallVector<unsigned>> ofSum;
};

/// Step 3. `sums[i]` is read by C as operand `reads[i]`.
std::optional<MergedDomain> planDomain(linalg::GenericOp consumer,
                                       ArrayRef<linalg::GenericOp> sums,
                                       ArrayRef<OpOperand *> reads) {
  MergedDomain domain;
  linalg::GenericOp lead = sums.front();
  domain.iterators = lead.getIteratorTypesArray();
  domain.ofConsumer.assign(consumer.getNumLoops(), ~0u);
  SmallVector<int64_t> leadRanges = lead.getStaticLoopRanges();
  SmallVector<unsigned> leadReductions;
  for (auto [j, it] : llvm::enumerate(lead.getIteratorTypesArray()))
    if (it == utils::IteratorType::reduction)
      leadReductions.push_back(j);
  for (auto [sumRef, read] : llvm::zip_equal(sums, reads)) {
    linalg::GenericOp sum = sumRef;
    AffineMap inConsumer = consumer.getMatchingIndexingMap(read);
    AffineMap out = sum.getIndexingMapsArray().back();
    if (inConsumer.getNumResults() != consumer.getNumLoops() ||
        out.getNumResults() != inConsumer.getNumResults() ||
        !inConsumer.isPermutation())
      return std::nullopt; // C must read every dim of T over all its loops
    SmallVector<unsigned> ofSum(sum.getNumLoops(), ~0u);
    // T's dim k: loop out[k] of the sum, loop inConsumer[k] of C.
    for (unsigned k = 0; k < out.getNumResults(); ++k) {
      unsigned sumLoop = out.getDimPosition(k);
      unsigned cLoop = inConsumer.getDimPosition(k);
      if (sum == lead) {
        ofSum[sumLoop] = sumLoop;
        domain.ofConsumer[cLoop] = sumLoop;
        domain.iterators[sumLoop] = consumer.getIteratorTypesArray()[cLoop];
      } else {
        if (domain.ofConsumer[cLoop] == ~0u)
          return std::nullopt;
        ofSum[sumLoop] = domain.ofConsumer[cLoop];
      }
    }
    // The reduction loops, in order, onto the lead's; equal static extents.
    SmallVector<int64_t> ranges = sum.getStaticLoopRanges();
    unsigned r = 0;
    for (auto [j, it] : llvm::enumerate(sum.getIteratorTypesArray())) {
      if (it != utils::IteratorType::reduction)
        continue;
      if (r == leadReductions.size())
        return std::nullopt;
      unsigned target = leadReductions[r++];
      if (sum != lead && (ranges[j] != leadRanges[target] ||
                          ShapedType::isDynamic(ranges[j])))
        return std::nullopt;
      ofSum[j] = target;
    }
    if (r != leadReductions.size())
      return std::nullopt;
    domain.ofSum.push_back(ofSum);
  }
  if (llvm::is_contained(domain.ofConsumer, ~0u))
    return std::nullopt;
  return domain;
}

AffineMap remap(AffineMap map, ArrayRef<unsigned> loops, unsigned numLoops) {
  SmallVector<AffineExpr> exprs;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    exprs.push_back(dim ? getAffineDimExpr(loops[dim.getPosition()],
                                           map.getContext())
                        : expr); // a unit dim read at 0
  }
  return AffineMap::get(numLoops, 0, exprs, map.getContext());
}

struct MergeNestedSum : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    if (consumer->getNumResults() != 1 || !hasSimpleMaps(consumer))
      return failure();
    SmallVector<linalg::GenericOp> sums;
    SmallVector<OpOperand *> reads;
    // Inputs of C that read a sum C already reads (same map): (this, first).
    SmallVector<std::pair<OpOperand *, OpOperand *>> twice;
    llvm::SmallPtrSet<Value, 4> vars;
    for (OpOperand *in : consumer.getDpsInputOperands()) {
      linalg::GenericOp sum = matchSum(in->get());
      if (!sum)
        continue;
      vars.insert(consumer.getMatchingBlockArgument(in));
      auto *seen = llvm::find(sums, sum);
      if (seen != sums.end()) { // one sum read twice: through the same map
        OpOperand *first = reads[seen - sums.begin()];
        if (consumer.getMatchingIndexingMap(first) !=
            consumer.getMatchingIndexingMap(in))
          return failure();
        twice.push_back({in, first});
        continue;
      }
      sums.push_back(sum);
      reads.push_back(in);
    }
    if (sums.empty())
      return failure();
    // An elementwise consumer becomes a sum only where its values end in
    // sums (dW's (sum(dy x) - sum(dy) mean) rstd); one that dx reads (dx's
    // coefficients from the group statistics) stays.
    if (consumer.getNumReductionLoops() == 0 && !flowsOnlyIntoSums(consumer))
      return failure();
    // Step 2: the value C's payload sums or yields is linear in the T_i.
    Block *body = consumer.getBody();
    BlockArgument out = body->getArguments().back();
    bool reduces = consumer.getNumReductionLoops() > 0;
    Value linear;
    if (reduces) {
      linear = summandOf(consumer);
    } else if (out.use_empty()) {
      linear = body->getTerminator()->getOperand(0);
    }
    if (!linear)
      return failure();
    llvm::DenseMap<Value, bool> readsMemo;
    std::function<bool(Value)> reads_ = [&](Value v) -> bool {
      if (vars.contains(v))
        return true;
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != body)
        return false;
      auto [it, inserted] = readsMemo.try_emplace(v, false);
      if (!inserted)
        return it->second;
      bool r = llvm::any_of(def->getOperands(), reads_);
      readsMemo[v] = r;
      return r;
    };
    if (!isLinearIn(linear, vars, reads_))
      return failure();
    Type elementType = getElementTypeOrSelf(consumer->getResult(0).getType());
    for (linalg::GenericOp sum : sums)
      if (getElementTypeOrSelf(sum->getResult(0).getType()) != elementType)
        return failure();
    std::optional<MergedDomain> domain = planDomain(consumer, sums, reads);
    if (!domain)
      return failure();
    buildMerged(rewriter, consumer, sums, reads, twice, *domain, linear);
    return success();
  }

  /// Whether every value of the all-parallel `op` ends in a reduction:
  /// every user a generic that reduces, or is all-parallel and does too.
  static bool flowsOnlyIntoSums(linalg::GenericOp op, unsigned depth = 0) {
    if (depth > 8)
      return false;
    for (Operation *user : op->getUsers()) {
      auto generic = dyn_cast<linalg::GenericOp>(user);
      if (!generic)
        return false;
      if (generic.getNumReductionLoops() == 0 &&
          !flowsOnlyIntoSums(generic, depth + 1))
        return false;
    }
    return !op->use_empty();
  }

  /// Step 4.
  void buildMerged(PatternRewriter &rewriter, linalg::GenericOp consumer,
                   ArrayRef<linalg::GenericOp> sums, ArrayRef<OpOperand *> reads,
                   ArrayRef<std::pair<OpOperand *, OpOperand *>> twice,
                   const MergedDomain &domain, Value linear) const {
    Location loc = consumer.getLoc();
    unsigned numLoops = domain.iterators.size();
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    for (auto [sumRef, loops] : llvm::zip_equal(sums, domain.ofSum)) {
      linalg::GenericOp sum = sumRef;
      for (OpOperand *in : sum.getDpsInputOperands()) {
        inputs.push_back(in->get());
        maps.push_back(remap(sum.getMatchingIndexingMap(in), loops, numLoops));
      }
    }
    auto readsTwice = [&](OpOperand *in) {
      return llvm::any_of(twice, [&](auto &p) { return p.first == in; });
    };
    SmallVector<OpOperand *> others;
    for (OpOperand *in : consumer.getDpsInputOperands())
      if (!llvm::is_contained(reads, in) && !readsTwice(in)) {
        others.push_back(in);
        inputs.push_back(in->get());
        maps.push_back(remap(consumer.getMatchingIndexingMap(in),
                             domain.ofConsumer, numLoops));
      }
    OpOperand &initOperand = consumer.getDpsInitsMutable()[0];
    maps.push_back(remap(consumer.getMatchingIndexingMap(&initOperand),
                         domain.ofConsumer, numLoops));
    rewriter.setInsertionPoint(consumer);
    Value init = initOperand.get();
    Type elementType = getElementTypeOrSelf(init.getType());
    bool reduces = consumer.getNumReductionLoops() > 0;
    if (!reduces) { // C's value becomes a sum: into zeros
      Value zero = arith::ConstantOp::create(
          rewriter, loc, rewriter.getFloatAttr(elementType, 0.0));
      init = linalg::FillOp::create(rewriter, loc, zero, init).getResult(0);
    }
    SmallVector<Location> locs{consumer.getLoc()};
    for (linalg::GenericOp sum : sums)
      locs.push_back(sum.getLoc());
    auto merged = linalg::GenericOp::create(
        rewriter, rewriter.getFusedLoc(locs), init.getType(), inputs, init,
        maps, domain.iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          IRMapping map;
          unsigned next = 0;
          for (auto [sumRef, read] : llvm::zip_equal(sums, reads)) {
            linalg::GenericOp sum = sumRef;
            Block *sumBody = sum.getBody();
            for (unsigned k = 0; k < sum.getNumDpsInputs(); ++k)
              map.map(sumBody->getArgument(k), args[next++]);
            Operation *combiner =
                sumBody->getTerminator()->getOperand(0).getDefiningOp();
            for (Operation &inner : sumBody->without_terminator())
              if (&inner != combiner)
                b.clone(inner, map);
            map.map(consumer.getMatchingBlockArgument(read),
                    map.lookup(summandOf(sum)));
          }
          for (auto [again, first] : twice)
            map.map(consumer.getMatchingBlockArgument(again),
                    map.lookup(consumer.getMatchingBlockArgument(first)));
          for (OpOperand *in : others)
            map.map(consumer.getMatchingBlockArgument(in), args[next++]);
          Block *body = consumer.getBody();
          map.map(body->getArguments().back(), args.back());
          for (Operation &inner : body->without_terminator())
            b.clone(inner, map);
          if (reduces) {
            Value yielded = map.lookup(body->getTerminator()->getOperand(0));
            linalg::YieldOp::create(b, l, yielded);
          } else {
            Value sum = arith::AddFOp::create(b, l, args.back(),
                                              map.lookup(linear));
            linalg::YieldOp::create(b, l, sum);
          }
        });
    rewriter.replaceOp(consumer, merged->getResults());
  }
};

struct NormMergeNestedSumsPass
    : norm::impl::NormMergeNestedSumsBase<NormMergeNestedSumsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateNormMergeNestedSumsPatterns(patterns);
    (void)applyPatternsGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace

void mlir::norm::populateNormMergeNestedSumsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<MergeNestedSum>(patterns.getContext());
}
