//===- FuseMixedReductions.cpp - Find and fuse mixed-order reductions -----===//
//
// Part of norm-opt.
//
// A structural match over linalg on tensors. Every linalg op is viewed as a
// linalg.generic (named ops through a scratch generalisation that leaves the
// input untouched) and classified by iterator types and indexing maps:
// elementwise, row reduction (reduce the trailing dim) or column reduction
// (reduce all leading dims). Each reduction, and each elementwise op that
// consumes a row reduction, walks its backward slice through elementwise
// producers, fills, splat constants and unit-dim reshapes down to the values
// it reads from outside. Candidates that share a full-domain input or an
// intermediate, or that chain through row results, form one group. A group
// with at least one row and one column reduction becomes one
// norm.mixed_reduction whose regions hold the cloned scalar payloads.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormOps.h"
#include "norm/Transforms/Passes.h"
#include "norm/Utils/DeadOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"

namespace mlir::norm {
#define GEN_PASS_DEF_NORMFUSEMIXEDREDUCTIONS
#include "norm/Transforms/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

namespace {

using utils::IteratorType;
/// Domain dims that index a value, ascending. For a domain [rows..., N]:
/// all dims = full, the leading ones = a row value, {last} = a column value.
using Dims = SmallVector<unsigned, 4>;

/// In a loop-to-domain mapping: a loop of extent 1 that no domain dim
/// drives (a keepdim unit dim).
constexpr unsigned kUnitDim = ~0u;

unsigned dimsKey(ArrayRef<unsigned> dims) {
  unsigned key = 0;
  for (unsigned d : dims)
    // A unit dim (kUnitDim) takes the top bit: `1u << ~0u` is undefined
    // (UBSan, found by the sanitizer job; x86 happened to give 1u << 31).
    key |= d == kUnitDim ? 1u << 31 : 1u << d;
  return key;
}

enum class Kind { Elementwise, RowReduce, ColReduce, Other };

/// A linalg op seen as a linalg.generic. For named ops, `generic` is a
/// generalised clone in a scratch module whose operands are placeholders:
/// operand i of `generic` stands for operand i of `op`.
struct View {
  Operation *op = nullptr;
  linalg::GenericOp generic;
  Kind kind = Kind::Other;
  SmallVector<int64_t> loops; // static loop ranges (kDynamic allowed)
  unsigned nDim = 0;          // reductions: the loop that is N
  std::string whyOther;       // for remarks on reductions we cannot take
};

/// How an operand is read: `base` indexed by domain dims `dims` after
/// dropping the unit dims `unitDims` of the original value.
struct Access {
  Value base;
  Dims dims;
  SmallVector<int64_t> unitDims; // positions in `base` to collapse away
  /// Domain dims of extent 1 that `dims` leaves out, read as index 0:
  /// inserted as unit dims when the input is materialised.
  Dims insertedUnitDims;
};

/// What defines a value requested at some domain dims.
struct Def {
  enum { Fill, Splat, Elementwise, RowResult, ColResult, External, Bad } kind;
  const View *view = nullptr;
  unsigned resultIndex = 0;
  Dims loopToDomain; // Elementwise: domain dim of each loop of the view
  Value fillValue;
  Attribute splat;
  Access access; // External
  std::string why;
};

bool isZeroFill(Value v) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  auto cst = fill.value().getDefiningOp<arith::ConstantOp>();
  if (!cst)
    return false;
  auto attr = dyn_cast<FloatAttr>(cst.getValue());
  return attr && attr.getValue().isZero();
}

/// The final `arith.addf %out, %x` of a reduction output, or null when the
/// combiner is not an additive fold of that output.
Operation *additiveCombiner(linalg::GenericOp g, unsigned output) {
  Block &body = g.getRegion().front();
  BlockArgument out = g.getRegionOutputArgs()[output];
  Value yielded = body.getTerminator()->getOperand(output);
  auto add = yielded.getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body || !out.hasOneUse())
    return nullptr;
  if (add.getLhs() != out && add.getRhs() != out)
    return nullptr;
  return add;
}

/// Describes a non-additive combiner for a remark.
std::string combinerName(linalg::GenericOp g, unsigned output) {
  Value yielded = g.getRegion().front().getTerminator()->getOperand(output);
  if (Operation *def = yielded.getDefiningOp())
    return def->getName().getStringRef().str();
  return "a block argument";
}

/// Why a reduction is an opaque neighbour of any group (a convolution, or
/// a contraction such as a matmul, where no input spans all the loops),
/// or nothing when it may be a row or column reduction.
std::optional<std::string> opaqueReduction(linalg::LinalgOp op,
                                           linalg::GenericOp g) {
  if (linalg::isaConvolutionOpInterface(op))
    return std::string("a convolution: it stays as it is, an opaque producer "
                       "or consumer of any group");
  unsigned rank = g.getNumLoops();
  bool anySpansAll = llvm::any_of(g.getDpsInputOperands(), [&](OpOperand *in) {
    llvm::SmallBitVector seen(rank);
    for (AffineExpr e : g.getMatchingIndexingMap(in).getResults())
      if (auto d = dyn_cast<AffineDimExpr>(e))
        seen.set(d.getPosition());
    return seen.all();
  });
  if (!anySpansAll)
    return std::string("a contraction (no input spans all its loops, as in a "
                       "matmul): it stays as it is, an opaque producer or "
                       "consumer of any group");
  return std::nullopt;
}

class Analysis {
public:
  Analysis(func::FuncOp func, bool remarks, bool rowOnly)
      : func(func), remarks(remarks), rowOnly(rowOnly) {}

  void run();

  // Classification, shared with the region emitter.
  std::optional<Access> resolve(Value v, AffineMap map,
                                ArrayRef<unsigned> loopToDomain,
                                std::string &why) const;
  Def classify(const Access &access) const;

private:
  // Views.
  void buildViews();
  void classifyLoops(View &view) const;
  /// The classes of full-domain values that linalg makes one shape at run
  /// time: the operands an op reads over all its loops, and its results.
  void buildExtents();
  /// A value the view reads (or writes) over all its loops, or null.
  Value fullValueOf(const View &view) const;
  /// Whether `view`, whose static loop ranges equal the domain's, runs over
  /// the same extents as the candidate or group being processed: always
  /// for a static domain; for a dynamic one, when linalg ties its tensors
  /// to the candidate's (a row sum over another [?, ?] tensor is a
  /// neighbour, not part of the group).
  bool sameExtents(const View &view) const;
  const View *viewOf(Operation *op) const {
    auto it = views.find(op);
    return it == views.end() ? nullptr : &it->second;
  }

  // Slices and groups.
  struct Slice {
    llvm::SetVector<Operation *> fullOps; // elementwise ops over the domain
    llvm::SetVector<Value> fullLeaves;    // external full-domain inputs
    llvm::SetVector<Operation *> rowReductions, colReductions;
    llvm::MapVector<std::pair<Value, unsigned>, Access> externals;
    // Every elementwise op whose payload the fused op clones (full-domain
    // and per-row ones).
    llvm::SetVector<Operation *> clonedPayloads;
    std::string failure;
  };
  void walkSlice(const Access &access, Slice &slice,
                 DenseSet<std::pair<Value, unsigned>> &seen) const;
  void walkOperands(const View &view, ArrayRef<unsigned> loopToDomain,
                    Slice &slice,
                    DenseSet<std::pair<Value, unsigned>> &seen) const;
  Slice sliceOf(const View &candidate) const;

  struct Group {
    SmallVector<Operation *> candidates; // in block order
    llvm::SetVector<Operation *> members;
    SmallVector<Operation *> rowReductions, colReductions;
  };
  LogicalResult validate(Group &group, std::string &why);
  /// No input of the group may depend on the group's own results.
  LogicalResult checkNoCycle(const Group &group, std::string &why) const;
  /// What fuse() works out before it builds anything, and what the
  /// region emitters share.
  struct FusionPlan {
    // Row stages: a row reduction's stage, the row results before each.
    DenseMap<Operation *, unsigned> stageOf;
    unsigned numStages = 0;
    DenseMap<std::pair<Operation *, unsigned>, unsigned> rowResults;
    SmallVector<unsigned> rowResultsBefore;
    // Inputs by how the domain indexes them.
    SmallVector<Access> full, row, col, scalar;
    // Results that leave the group, the group's last op, the users that
    // move after the fused op (in block order).
    SmallVector<Value> fullOuts, colOuts, colInits;
    // The fused op's column results: [N], also where the group's were
    // keepdim ([1, ..., N]: replaceGroup expands them back).
    SmallVector<Type> colTypes;
    Operation *last = nullptr;
    SmallVector<Operation *> toMove;
    // The fused op's block arguments and the values read above it.
    DenseMap<std::pair<Value, unsigned>, unsigned> inputIndex;
    unsigned numInputs = 0;
    SmallVector<Type> inputTypes, rowResultTypes;
    DenseMap<Value, Value> scalarValues;
  };
  /// The steps of fuse(): plan the row stages, the inputs, the outputs (and
  /// the users to move), create the op, build its regions, then remark and
  /// replace the group.
  LogicalResult fuse(Group &group, std::string &why);
  void planStages(const Group &group, FusionPlan &plan);
  LogicalResult planInputs(const Group &group, FusionPlan &plan,
                           std::string &why);
  LogicalResult planOutputs(const Group &group, FusionPlan &plan,
                            std::string &why);
  LogicalResult planUsersToMove(const Group &group, FusionPlan &plan,
                                std::string &why);
  MixedReductionOp createFusedOp(const Group &group, FusionPlan &plan,
                                 OpBuilder &b);
  LogicalResult buildRegions(const Group &group, const FusionPlan &plan,
                             OpBuilder &b, MixedReductionOp fused);
  LogicalResult
  buildRegion(const FusionPlan &plan, OpBuilder &b, Region &region,
              unsigned numRowResults,
              function_ref<FailureOr<SmallVector<Value>>(class RegionEmitter &)>
                  body);
  void remarkFused(const Group &group, unsigned numStages);
  /// Groups the candidates of one domain whose N is dim `n`, and fuses each.
  void fuseDomain(ArrayRef<int64_t> loops, unsigned n,
                  ArrayRef<Operation *> ops);
  void replaceGroup(Group &group, const FusionPlan &plan,
                    MixedReductionOp fused);

  void remark(Operation *op, const Twine &message) {
    if (remarks)
      op->emitRemark(message);
  }

  func::FuncOp func;
  bool remarks;
  bool rowOnly; // groups without a column reduction fuse too
  OwningOpRef<ModuleOp> scratch;
  DenseMap<Operation *, View> views;
  SmallVector<int64_t> domain; // of the group being processed
  unsigned nDim = 0;           // the dim of `domain` that is N
  /// The domain dims of a row value: all but N.
  Access withUnitDomainDims(const Access &access,
                            ArrayRef<unsigned> within) const;
  Dims rowDims(unsigned rank) const {
    Dims dims;
    for (unsigned d = 0; d < rank; ++d)
      if (d != nDim)
        dims.push_back(d);
    return dims;
  }
  llvm::EquivalenceClasses<Value> extents;
  Value extentLeader; // a full-domain value of the candidate or group
  DenseMap<Operation *, Slice> slices;
  DenseMap<Operation *, unsigned> position; // walk order
  DenseSet<Operation *> erased;             // by fusing an earlier group
};

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

/// The view's kind from its iterators and output maps: elementwise, a row
/// reduction, a column reduction (with N's loop), or other (and why).
void Analysis::classifyLoops(View &view) const {
  linalg::GenericOp g = view.generic;
  SmallVector<IteratorType> its = g.getIteratorTypesArray();
  unsigned rank = its.size();
  unsigned numReduction = llvm::count(its, IteratorType::reduction);
  bool allOutputsIdentity = llvm::all_of(
      g.getDpsInitsMutable(), [&](OpOperand &init) {
        return g.getMatchingIndexingMap(&init).isIdentity();
      });
  // N is the one reduced loop of a row reduction, the one parallel loop
  // of a column reduction: the last for rows that are contiguous, another
  // for a channels-first norm ([B, C, S] reduced over C, then over B and
  // S). At rank 2 one reduced loop could be either; N is the last there.
  unsigned firstReduced = llvm::find(its, IteratorType::reduction) - its.begin();
  unsigned firstParallel = llvm::find(its, IteratorType::parallel) - its.begin();
  if (numReduction == 0) {
    view.kind = allOutputsIdentity ? Kind::Elementwise : Kind::Other;
  } else if (rank >= 2 && numReduction == 1 &&
             (rank > 2 || its.back() == IteratorType::reduction)) {
    view.kind = Kind::RowReduce;
    view.nDim = firstReduced;
  } else if (rank >= 2 && numReduction == rank - 1 &&
             (rank > 2 || its.back() == IteratorType::parallel)) {
    view.kind = Kind::ColReduce;
    view.nDim = firstParallel;
  }
  if (view.kind == Kind::RowReduce || view.kind == Kind::ColReduce) {
    // The output keeps the parallel dims in order (a dropped dim may stay
    // as a constant-0 unit dim).
    bool outputsOk = llvm::all_of(g.getDpsInitsMutable(), [&](OpOperand &init) {
      unsigned next = 0;
      for (AffineExpr e : g.getMatchingIndexingMap(&init).getResults()) {
        while (next < rank && its[next] == IteratorType::reduction)
          ++next;
        if (auto d = dyn_cast<AffineDimExpr>(e)) {
          if (d.getPosition() != next++)
            return false;
        } else if (!isa<AffineConstantExpr>(e)) {
          return false;
        }
      }
      while (next < rank && its[next] == IteratorType::reduction)
        ++next;
      return next == rank;
    });
    if (!outputsOk) {
      view.kind = Kind::Other;
      view.whyOther = "the reduction writes its result through a "
                      "transposing or broadcasting map";
    }
  } else if (numReduction > 0) {
    view.whyOther =
        numReduction == rank
            ? "it reduces every dim (a total sum, not a row or column "
              "reduction)"
            : "it reduces neither one dim (a row reduction over N) nor "
              "all dims but one (a column reduction over the rows)";
  }
}

void Analysis::buildViews() {
  MLIRContext *ctx = func.getContext();
  OpBuilder b(ctx);
  scratch = ModuleOp::create(b, func.getLoc());
  IRRewriter rewriter(ctx);

  func.walk([&](linalg::LinalgOp op) {
    View view;
    view.op = op;
    if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation())) {
      view.generic = generic;
    } else {
      // Generalise a clone whose operands are placeholders, so the input IR
      // and its use lists stay exactly as they are.
      rewriter.setInsertionPointToEnd(scratch->getBody());
      IRMapping mapping;
      for (Value operand : op->getOperands())
        mapping.map(operand, UnrealizedConversionCastOp::create(
                                 rewriter, op.getLoc(), operand.getType(),
                                 ValueRange{})
                                 .getResult(0));
      auto clone = cast<linalg::LinalgOp>(rewriter.clone(*op, mapping));
      FailureOr<linalg::GenericOp> generalized =
          linalg::generalizeNamedOp(rewriter, clone);
      if (failed(generalized)) {
        rewriter.eraseOp(clone);
        if (op.getNumReductionLoops() > 0)
          remark(op, "not fused: it has no linalg.generic form");
        return;
      }
      view.generic = *generalized;
    }
    linalg::GenericOp g = view.generic;
    if (g.getNumDpsInits() == 0 || !g.hasPureTensorSemantics()) {
      if (op.getNumReductionLoops() > 0)
        remark(op, "not fused: it works on buffers (the pass takes linalg "
                   "on tensors)");
      return;
    }
    view.loops = g.getStaticLoopRanges();
    SmallVector<IteratorType> its = g.getIteratorTypesArray();
    unsigned numReduction = llvm::count(its, IteratorType::reduction);
    if (numReduction > 0) {
      // Contractions and convolutions are opaque neighbours: their results
      // are inputs of a group, never part of one.
      if (std::optional<std::string> neighbour = opaqueReduction(op, g)) {
        view.whyOther = *neighbour;
        views[op] = std::move(view);
        return;
      }
    }
    classifyLoops(view);
    if (view.kind == Kind::RowReduce || view.kind == Kind::ColReduce) {
      for (unsigned i = 0, e = g.getNumDpsInits(); i < e; ++i) {
        if (!additiveCombiner(g, i)) {
          view.whyOther = "the reduction is not additive (its combiner is " +
                          combinerName(g, i) + ")";
          view.kind = Kind::Other;
          break;
        }
      }
    }
    views[op] = std::move(view);
  });
}

/// Whether `map` reads a value over all `rank` loops (each once).
static bool coversAllLoops(AffineMap map, unsigned rank) {
  return map.getNumResults() == rank && map.isPermutation();
}

void Analysis::buildExtents() {
  for (auto &[op, view] : views) {
    linalg::GenericOp g = view.generic;
    unsigned rank = g.getNumLoops();
    Value first;
    auto tie = [&](Value v) {
      extents.insert(v);
      if (first)
        extents.unionSets(first, v);
      else
        first = v;
    };
    for (OpOperand &operand : op->getOpOperands()) {
      OpOperand &gOperand = g->getOpOperand(operand.getOperandNumber());
      if (coversAllLoops(g.getMatchingIndexingMap(&gOperand), rank))
        tie(operand.get());
    }
    for (OpResult r : op->getResults())
      if (coversAllLoops(
              g.getIndexingMapMatchingResult(
                  cast<OpResult>(g->getResult(r.getResultNumber()))),
              rank))
        tie(r);
  }
}

Value Analysis::fullValueOf(const View &view) const {
  linalg::GenericOp g = view.generic;
  unsigned rank = g.getNumLoops();
  for (OpOperand &operand : view.op->getOpOperands()) {
    OpOperand &gOperand = g->getOpOperand(operand.getOperandNumber());
    if (coversAllLoops(g.getMatchingIndexingMap(&gOperand), rank))
      return operand.get();
  }
  return {};
}

bool Analysis::sameExtents(const View &view) const {
  if (llvm::none_of(domain, ShapedType::isDynamic))
    return true;
  Value full = fullValueOf(view);
  return full && extentLeader && extents.contains(full) &&
         extents.contains(extentLeader) &&
         extents.isEquivalent(full, extentLeader);
}

/// Resolves operand `v` read through `map` by an op whose loop i is domain
/// dim loopToDomain[i]. Unit dims read with a constant 0 are dropped,
/// looking through a tensor.expand_shape that only added them.
std::optional<Access> Analysis::resolve(Value v, AffineMap map,
                                        ArrayRef<unsigned> loopToDomain,
                                        std::string &why) const {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type) {
    why = "an operand is not a ranked tensor";
    return std::nullopt;
  }
  Access access;
  access.base = v;
  for (auto [pos, expr] : llvm::enumerate(map.getResults())) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (dim && loopToDomain[dim.getPosition()] != kUnitDim) {
      unsigned d = loopToDomain[dim.getPosition()];
      if (!access.dims.empty() && access.dims.back() >= d) {
        why = "an operand is read through a transposing indexing map";
        return std::nullopt;
      }
      access.dims.push_back(d);
      continue;
    }
    auto cst = dyn_cast<AffineConstantExpr>(expr);
    if ((!dim && (!cst || cst.getValue() != 0)) || type.getDimSize(pos) != 1) {
      why = "an operand is read through an unsupported indexing map";
      return std::nullopt;
    }
    access.unitDims.push_back(pos);
  }
  // tensor.expand_shape that only inserted the unit dims: read its source.
  if (!access.unitDims.empty()) {
    if (auto expand = v.getDefiningOp<tensor::ExpandShapeOp>()) {
      if (expand.getSrcType().getRank() ==
          type.getRank() - int64_t(access.unitDims.size())) {
        access.base = expand.getSrc();
        access.unitDims.clear();
      }
    }
  }
  return access;
}

Def Analysis::classify(const Access &access) const {
  Value v = access.base;
  const Dims &dims = access.dims;
  Def def;
  if (auto fill = v.getDefiningOp<linalg::FillOp>()) {
    def.kind = Def::Fill;
    def.fillValue = fill.value();
    return def;
  }
  if (auto cst = v.getDefiningOp<arith::ConstantOp>()) {
    if (auto dense = dyn_cast<SplatElementsAttr>(cst.getValue())) {
      def.kind = Def::Splat;
      def.splat = dense.getSplatValue<Attribute>();
      return def;
    }
  }
  if (auto result = dyn_cast<OpResult>(v)) {
    if (const View *view = viewOf(result.getOwner())) {
      def.view = view;
      def.resultIndex = result.getResultNumber();
      unsigned rank = domain.size();
      switch (view->kind) {
      case Kind::Elementwise: {
        // Output dims read as unit dims (keepdim) are loops of extent 1.
        if (view->loops.size() != dims.size() + access.unitDims.size())
          break;
        auto dim = dims.begin();
        for (auto [loop, extent] : llvm::enumerate(view->loops)) {
          if (llvm::is_contained(access.unitDims, int64_t(loop))) {
            def.loopToDomain.push_back(kUnitDim);
            continue;
          }
          unsigned d = *dim++;
          if (extent != domain[d] && extent != ShapedType::kDynamic &&
              domain[d] != ShapedType::kDynamic) {
            def.kind = Def::Bad;
            def.why = "an elementwise producer runs over a different domain";
            return def;
          }
          def.loopToDomain.push_back(d);
        }
        def.kind = Def::Elementwise;
        return def;
      }
      case Kind::RowReduce:
      case Kind::ColReduce: {
        // A reduction over another domain (a softmax's row sum, a loss's
        // column sum elsewhere, or the same static shape over other
        // run-time extents) is a neighbour: its result is an input.
        // A reduction of the same domain over another N is one too.
        if (view->loops != ArrayRef<int64_t>(domain) || !sameExtents(*view) ||
            view->nDim != nDim)
          break;
        bool row = view->kind == Kind::RowReduce;
        Dims expected = row ? rowDims(rank) : Dims{nDim};
        if (dims != expected) {
          def.kind = Def::Bad;
          def.why = "a reduction result is read over other dims than it has";
          return def;
        }
        def.kind = row ? Def::RowResult : Def::ColResult;
        return def;
      }
      case Kind::Other:
        break;
      }
    }
  }
  def.kind = Def::External;
  def.access.base = v;
  def.access.dims = dims;
  return def;
}

//===----------------------------------------------------------------------===//
// Slices
//===----------------------------------------------------------------------===//

void Analysis::walkOperands(const View &view, ArrayRef<unsigned> loopToDomain,
                            Slice &slice,
                            DenseSet<std::pair<Value, unsigned>> &seen) const {
  linalg::GenericOp g = view.generic;
  for (OpOperand &operand : view.op->getOpOperands()) {
    OpOperand &gOperand = g->getOpOperand(operand.getOperandNumber());
    bool isInit = g.isDpsInit(&gOperand);
    // Inits of elementwise ops matter only when the payload reads them;
    // reduction inits are checked by the caller.
    if (isInit && (view.kind != Kind::Elementwise ||
                   g.getMatchingBlockArgument(&gOperand).use_empty()))
      continue;
    std::string why;
    std::optional<Access> access =
        resolve(operand.get(), g.getMatchingIndexingMap(&gOperand),
                loopToDomain, why);
    if (!access) {
      slice.failure = why;
      return;
    }
    walkSlice(*access, slice, seen);
    if (!slice.failure.empty())
      return;
  }
}

void Analysis::walkSlice(const Access &access, Slice &slice,
                         DenseSet<std::pair<Value, unsigned>> &seen) const {
  if (!seen.insert({access.base, dimsKey(access.dims)}).second)
    return;
  const Dims &dims = access.dims;
  Def def = classify(access);
  switch (def.kind) {
  case Def::Fill:
  case Def::Splat:
    return;
  case Def::Bad:
    slice.failure = def.why;
    return;
  case Def::RowResult:
    slice.rowReductions.insert(def.view->op);
    return;
  case Def::ColResult:
    slice.colReductions.insert(def.view->op);
    return;
  case Def::External:
    if (dims.size() == domain.size())
      slice.fullLeaves.insert(access.base);
    slice.externals.insert({{access.base, dimsKey(dims)}, access});
    return;
  case Def::Elementwise:
    if (dims.size() == domain.size())
      slice.fullOps.insert(def.view->op);
    slice.clonedPayloads.insert(def.view->op);
    walkOperands(*def.view, def.loopToDomain, slice, seen);
    return;
  }
}

Analysis::Slice Analysis::sliceOf(const View &candidate) const {
  Slice slice;
  DenseSet<std::pair<Value, unsigned>> seen;
  Dims all;
  for (unsigned d = 0; d < domain.size(); ++d)
    all.push_back(d);
  if (candidate.kind == Kind::RowReduce) {
    for (Value init : cast<DestinationStyleOpInterface>(candidate.op)
                          .getDpsInits())
      if (!isZeroFill(init)) {
        slice.failure = "the row reduction starts from a value other than a "
                        "zero fill";
        return slice;
      }
  }
  if (candidate.kind == Kind::Elementwise)
    slice.fullOps.insert(candidate.op);
  walkOperands(candidate, all, slice, seen);
  return slice;
}

//===----------------------------------------------------------------------===//
// Groups
//===----------------------------------------------------------------------===//

LogicalResult Analysis::validate(Group &group, std::string &why) {
  Block *block = group.candidates.front()->getBlock();
  for (Operation *op : group.candidates) {
    const Slice &slice = slices[op];
    group.members.insert(op);
    group.members.insert(slice.fullOps.begin(), slice.fullOps.end());
    for (Operation *row : slice.rowReductions) {
      if (!llvm::is_contained(group.candidates, row)) {
        why = "it depends on a row reduction that cannot be fused";
        return failure();
      }
    }
    for (Operation *col : slice.colReductions) {
      if (llvm::is_contained(group.candidates, col)) {
        why = "a column reduction result feeds the row computation, so one "
              "pass over the rows cannot compute it";
        return failure();
      }
    }
  }
  for (Operation *op : group.members) {
    if (op->getBlock() != block) {
      why = "its ops are in different blocks";
      return failure();
    }
    switch (viewOf(op)->kind) {
    case Kind::RowReduce:
      group.rowReductions.push_back(op);
      break;
    case Kind::ColReduce:
      group.colReductions.push_back(op);
      break;
    default:
      break;
    }
  }
  if (failed(checkNoCycle(group, why)))
    return failure();
  auto byOrder = [&](Operation *a, Operation *b) {
    return position[a] < position[b];
  };
  llvm::sort(group.rowReductions, byOrder);
  llvm::sort(group.colReductions, byOrder);
  if (group.rowReductions.empty()) {
    why = "no row reduction (over N) shares its inputs";
    return failure();
  }
  if (group.colReductions.empty() && !rowOnly) {
    why = "no additive column reduction (over the rows) shares its inputs "
          "(row-only groups: row-only=true)";
    return failure();
  }
  return success();
}


LogicalResult Analysis::checkNoCycle(const Group &group,
                                     std::string &why) const {
  // The ops of the block that use a member's result, directly or not.
  Block *block = group.candidates.front()->getBlock();
  DenseSet<Operation *> downstream;
  SmallVector<Operation *> worklist(group.members.begin(),
                                    group.members.end());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Operation *user : op->getUsers()) {
      user = block->findAncestorOpInBlock(*user);
      if (user && !group.members.contains(user) &&
          downstream.insert(user).second)
        worklist.push_back(user);
    }
  }
  // The fused op reads its inputs (and the values its payloads capture)
  // before it produces its results: none may be computed from them.
  auto fromResults = [&](Value v) -> Operation * {
    Operation *def = v.getDefiningOp();
    def = def ? block->findAncestorOpInBlock(*def) : nullptr;
    return def && downstream.contains(def) ? def : nullptr;
  };
  auto report = [&](Operation *def) {
    why = "an input of the group ('" + def->getName().getStringRef().str() +
          "') is computed from one of its results (fusing would make a "
          "use-def cycle)";
    return failure();
  };
  // Values a cloned payload uses from above (its operands are resolved
  // through the slice, as inputs or cloned payloads).
  auto capturedFromResults = [&](Operation *op) -> Operation * {
    Operation *def = nullptr;
    for (Region &region : op->getRegions())
      region.walk([&](Operation *inner) {
        for (Value operand : inner->getOperands())
          if (!op->isAncestor(operand.getParentBlock()->getParentOp()) &&
              (def = fromResults(operand)))
            return WalkResult::interrupt();
        return WalkResult::advance();
      });
    return def;
  };
  for (Operation *candidate : group.candidates) {
    const Slice &slice = slices.find(candidate)->second;
    for (auto &entry : slice.externals)
      if (Operation *def = fromResults(entry.second.base))
        return report(def);
    for (Operation *op : llvm::concat<Operation *const>(
             ArrayRef<Operation *>(candidate), slice.clonedPayloads.getArrayRef()))
      if (Operation *def = capturedFromResults(op))
        return report(def);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Emission
//===----------------------------------------------------------------------===//

/// Clones the scalar payloads a region needs, memoised per region.
class RegionEmitter {
public:
  RegionEmitter(const Analysis &analysis, OpBuilder &b,
                const DenseMap<std::pair<Value, unsigned>, unsigned> &inputs,
                const DenseMap<Value, Value> &scalars,
                const DenseMap<std::pair<Operation *, unsigned>, unsigned>
                    &rowResults,
                Block *block, unsigned numInputs, unsigned numRowResults)
      : analysis(analysis), b(b), inputs(inputs), scalars(scalars),
        rowResults(rowResults), block(block), numInputs(numInputs),
        numRowResults(numRowResults) {}

  FailureOr<Value> emit(const Access &access);
  /// The payload of `view` run at `loopToDomain`: the yielded values, or for
  /// a reduction the contribution each output adds.
  FailureOr<SmallVector<Value>> payload(const View &view,
                                        ArrayRef<unsigned> loopToDomain);

private:
  const Analysis &analysis;
  OpBuilder &b;
  const DenseMap<std::pair<Value, unsigned>, unsigned> &inputs;
  const DenseMap<Value, Value> &scalars; // extracted above the fused op
  const DenseMap<std::pair<Operation *, unsigned>, unsigned> &rowResults;
  Block *block;
  unsigned numInputs, numRowResults;
  DenseMap<std::pair<Value, unsigned>, Value> values;
  DenseMap<std::pair<Operation *, unsigned>, SmallVector<Value>> payloads;
};

FailureOr<Value> RegionEmitter::emit(const Access &access) {
  auto key = std::make_pair(access.base, dimsKey(access.dims));
  if (Value v = values.lookup(key))
    return v;
  Def def = analysis.classify(access);
  Value result;
  switch (def.kind) {
  case Def::Fill:
    result = def.fillValue;
    break;
  case Def::Splat:
    result = arith::ConstantOp::create(b, access.base.getLoc(),
                                       cast<TypedAttr>(def.splat));
    break;
  case Def::RowResult: {
    unsigned index = rowResults.lookup({def.view->op, def.resultIndex});
    if (index >= numRowResults)
      return failure();
    result = block->getArgument(numInputs + index);
    break;
  }
  case Def::Elementwise: {
    FailureOr<SmallVector<Value>> yielded =
        payload(*def.view, def.loopToDomain);
    if (failed(yielded))
      return failure();
    result = (*yielded)[def.resultIndex];
    break;
  }
  case Def::External: {
    if (access.dims.empty()) {
      result = scalars.lookup(access.base);
    } else {
      auto it = inputs.find(key);
      if (it != inputs.end())
        result = block->getArgument(it->second);
    }
    if (!result)
      return failure();
    break;
  }
  case Def::ColResult:
  case Def::Bad:
    return failure();
  }
  values[key] = result;
  return result;
}

FailureOr<SmallVector<Value>>
RegionEmitter::payload(const View &view, ArrayRef<unsigned> loopToDomain) {
  auto key = std::make_pair(view.op, dimsKey(loopToDomain));
  auto cached = payloads.find(key);
  if (cached != payloads.end())
    return cached->second;

  linalg::GenericOp g = view.generic;
  Block &body = g.getRegion().front();
  IRMapping mapping;
  for (OpOperand &operand : view.op->getOpOperands()) {
    OpOperand &gOperand = g->getOpOperand(operand.getOperandNumber());
    BlockArgument arg = g.getMatchingBlockArgument(&gOperand);
    if (arg.use_empty() || (g.isDpsInit(&gOperand) &&
                            view.kind != Kind::Elementwise))
      continue;
    std::string why;
    std::optional<Access> access = analysis.resolve(
        operand.get(), g.getMatchingIndexingMap(&gOperand), loopToDomain,
        why);
    if (!access)
      return failure();
    FailureOr<Value> value = emit(*access);
    if (failed(value))
      return failure();
    mapping.map(arg, *value);
  }

  SmallVector<Operation *> combiners;
  if (view.kind != Kind::Elementwise)
    for (unsigned i = 0, e = g.getNumDpsInits(); i < e; ++i)
      combiners.push_back(additiveCombiner(g, i));
  for (Operation &op : body.without_terminator())
    if (!llvm::is_contained(combiners, &op))
      b.clone(op, mapping);

  SmallVector<Value> results;
  if (view.kind == Kind::Elementwise) {
    for (Value v : body.getTerminator()->getOperands())
      results.push_back(mapping.lookupOrDefault(v));
  } else {
    for (auto [i, combiner] : llvm::enumerate(combiners)) {
      BlockArgument out = g.getRegionOutputArgs()[i];
      Value contribution = combiner->getOperand(0) == out
                               ? combiner->getOperand(1)
                               : combiner->getOperand(0);
      results.push_back(mapping.lookupOrDefault(contribution));
    }
  }
  payloads[key] = results;
  return results;
}

/// Materialises an external access as an operand of the fused op: unit
/// dims collapsed away, a value with no domain dims extracted as a scalar.
Value collapseUnitDims(OpBuilder &b, Location loc, const Access &access);

/// `access` with the domain's extent-1 dims among `within` that it leaves
/// out added to its dims (a [32, 768] view of a [32, 1, 1, 768] domain, a
/// ConvNeXt head's pooled rows): index 0 either way.
Access Analysis::withUnitDomainDims(const Access &access,
                                    ArrayRef<unsigned> within) const {
  Access padded = access;
  padded.insertedUnitDims.clear();
  Dims dims;
  for (unsigned d = 0; d < domain.size(); ++d) {
    if (llvm::is_contained(access.dims, d))
      dims.push_back(d);
    else if (domain[d] == 1 && llvm::is_contained(within, d)) {
      dims.push_back(d);
      padded.insertedUnitDims.push_back(d);
    }
  }
  padded.dims = dims;
  return padded;
}

Value materialize(OpBuilder &b, Location loc, const Access &access) {
  Value v = collapseUnitDims(b, loc, access);
  if (access.insertedUnitDims.empty())
    return v;
  // Insert the unit dims: each joins the reassociation group of the next
  // real dim (the last real dim's group takes trailing ones).
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  SmallVector<ReassociationIndices> reassociation;
  ReassociationIndices pending;
  unsigned next = 0;
  for (unsigned d : access.dims) {
    pending.push_back(shape.size());
    if (llvm::is_contained(access.insertedUnitDims, d)) {
      shape.push_back(1);
      continue;
    }
    shape.push_back(type.getDimSize(next++));
    reassociation.push_back(pending);
    pending.clear();
  }
  if (!pending.empty()) {
    if (reassociation.empty())
      return v; // no real dim: a scalar, read above the op
    llvm::append_range(reassociation.back(), pending);
  }
  auto result = RankedTensorType::get(shape, type.getElementType());
  return tensor::ExpandShapeOp::create(b, loc, result, v, reassociation);
}

Value collapseUnitDims(OpBuilder &b, Location loc, const Access &access) {
  Value v = access.base;
  if (access.unitDims.empty())
    return v;
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<ReassociationIndices> reassociation;
  ReassociationIndices pending;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    pending.push_back(d);
    if (!llvm::is_contained(access.unitDims, d)) {
      reassociation.push_back(pending);
      pending.clear();
    }
  }
  if (!pending.empty() && !reassociation.empty())
    llvm::append_range(reassociation.back(), pending);
  return tensor::CollapseShapeOp::create(b, loc, v, reassociation);
}

/// Element types the fused op computes in (f32) and stores.
static bool computesInF32(Type t) {
  t = getElementTypeOrSelf(t);
  return t.isF32() || t.isF16() || t.isBF16();
}

/// Input element types: also integers and booleans (masks, ids) that the
/// payloads convert.
static bool readableInput(Type t) {
  Type e = getElementTypeOrSelf(t);
  return computesInF32(t) || e.isInteger(1) || e.isInteger(8) ||
         e.isInteger(16) || e.isInteger(32);
}

static std::string elementTypeName(Type t) {
  std::string name;
  llvm::raw_string_ostream(name) << getElementTypeOrSelf(t);
  return name;
}

void Analysis::planStages(const Group &group, FusionPlan &plan) {
  // A row reduction runs after those whose results it reads.
  for (Operation *op : group.rowReductions) {
    unsigned stage = 0;
    for (Operation *dep : slices[op].rowReductions)
      stage = std::max(stage, plan.stageOf[dep] + 1);
    plan.stageOf[op] = stage;
    plan.numStages = std::max(plan.numStages, stage + 1);
  }
  plan.rowResultsBefore.assign(plan.numStages + 1, 0);
  for (unsigned stage = 0; stage < plan.numStages; ++stage) {
    plan.rowResultsBefore[stage + 1] = plan.rowResultsBefore[stage];
    for (Operation *op : group.rowReductions)
      if (plan.stageOf[op] == stage)
        for (unsigned i = 0; i < op->getNumResults(); ++i)
          plan.rowResults[{op, i}] = plan.rowResultsBefore[stage + 1]++;
  }
}

LogicalResult Analysis::planInputs(const Group &group, FusionPlan &plan,
                                   std::string &why) {
  unsigned rank = domain.size();
  Dims rows = rowDims(rank), colDims = {nDim}, allDims;
  for (unsigned d = 0; d < rank; ++d)
    allDims.push_back(d);
  DenseSet<std::pair<Value, unsigned>> seen;
  for (Operation *op : group.candidates) {
    for (auto &[key, access] : slices[op].externals) {
      if (!seen.insert(key).second)
        continue;
      Access asFull = withUnitDomainDims(access, allDims);
      Access asRow = withUnitDomainDims(access, rows);
      if (access.dims.size() == rank)
        plan.full.push_back(access);
      else if (access.dims == rows)
        plan.row.push_back(access);
      else if (asFull.dims.size() == rank)
        plan.full.push_back(asFull);
      else if (!access.dims.empty() && asRow.dims == rows)
        plan.row.push_back(asRow);
      else if (access.dims == colDims)
        plan.col.push_back(access);
      else if (access.dims.empty())
        plan.scalar.push_back(access);
      else {
        why = "an input is indexed by only some of the row dims";
        return failure();
      }
    }
  }
  if (plan.full.empty()) {
    why = "no input spans the whole [rows..., N] domain";
    return failure();
  }
  // f64 would lose precision in the f32 the op computes in.
  for (const Access &access :
       llvm::concat<const Access>(plan.full, plan.row, plan.col)) {
    if (!readableInput(access.base.getType())) {
      why = "an input has element type " +
            elementTypeName(access.base.getType()) +
            " (the fused op reads bf16, f16, f32 and i1-i32)";
      return failure();
    }
  }
  return success();
}

LogicalResult Analysis::planOutputs(const Group &group, FusionPlan &plan,
                                    std::string &why) {
  plan.last = group.members.front();
  for (Operation *op : group.members)
    if (position[op] > position[plan.last])
      plan.last = op;
  auto leaves = [&](Value v) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      return !group.members.contains(user);
    });
  };
  for (Operation *op : group.members) {
    Kind kind = viewOf(op)->kind;
    for (OpResult r : op->getResults()) {
      if (kind == Kind::ColReduce) {
        plan.colOuts.push_back(r);
        plan.colInits.push_back(cast<DestinationStyleOpInterface>(op)
                                    .getDpsInits()[r.getResultNumber()]);
      } else if (kind == Kind::Elementwise && leaves(r)) {
        plan.fullOuts.push_back(r);
      }
    }
  }
  // What leaves the group is floating point (intermediates inside it, a
  // mask's i1 compare, say, are scalars of the payloads).
  for (Value v : llvm::concat<Value>(plan.fullOuts, plan.colOuts)) {
    if (!computesInF32(v.getType())) {
      why = "a result has element type " + elementTypeName(v.getType()) +
            " (the fused op computes in f32: bf16, f16 and f32 only)";
      return failure();
    }
  }
  return planUsersToMove(group, plan, why);
}

LogicalResult Analysis::planUsersToMove(const Group &group, FusionPlan &plan,
                                        std::string &why) {
  // Users of the results that sit before the group's last op (a reshape of
  // dW between the dW and dB reductions) move after the fused op, with
  // their own users, when they have no side effects.
  Operation *last = plan.last;
  llvm::SetVector<Operation *> toMove;
  SmallVector<Operation *> pending;
  for (Value v : llvm::concat<Value>(plan.fullOuts, plan.colOuts))
    for (Operation *user : v.getUsers())
      if (!group.members.contains(user))
        pending.push_back(user);
  while (!pending.empty()) {
    Operation *user = pending.pop_back_val();
    while (user->getBlock() != last->getBlock() && user->getParentOp())
      user = user->getParentOp();
    if (user->getBlock() != last->getBlock()) {
      why = "a result of the group is used outside its block";
      return failure();
    }
    if (!user->isBeforeInBlock(last) || group.members.contains(user) ||
        !toMove.insert(user))
      continue;
    if (!isMemoryEffectFree(user)) {
      why = "a result of the group is used, before the group's last op, by "
            "an op with side effects";
      return failure();
    }
    for (Operation *next : user->getUsers())
      pending.push_back(next);
  }
  plan.toMove.assign(toMove.begin(), toMove.end());
  llvm::sort(plan.toMove, [&](Operation *a, Operation *c) {
    return a->isBeforeInBlock(c);
  });
  return success();
}

/// Whether a column reduction's result type is [1, ..., 1, N] or another
/// shape with one dim that is not a unit dim (keepdim over the row dims).
static bool isKeepdimColumn(RankedTensorType type) {
  return llvm::count_if(type.getShape(),
                        [](int64_t d) { return d != 1; }) <= 1;
}

MixedReductionOp Analysis::createFusedOp(const Group &group, FusionPlan &plan,
                                         OpBuilder &b) {
  Location loc = group.rowReductions.front()->getLoc();
  SmallVector<Value> fullValues, rowValues, colValues;
  for (auto [accesses, values] :
       {std::make_pair(&plan.full, &fullValues),
        std::make_pair(&plan.row, &rowValues),
        std::make_pair(&plan.col, &colValues)}) {
    for (const Access &access : *accesses) {
      values->push_back(materialize(b, loc, access));
      // The payload finds an input by the dims it reads it at.
      Dims read;
      for (unsigned d : access.dims)
        if (!llvm::is_contained(access.insertedUnitDims, d))
          read.push_back(d);
      plan.inputIndex[{access.base, dimsKey(read)}] = plan.numInputs++;
    }
  }
  // Scalars (0-d tensors, all-unit-dim tensors) are read once, above the op.
  for (const Access &access : plan.scalar) {
    auto type = cast<RankedTensorType>(access.base.getType());
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    SmallVector<Value> indices(type.getRank(), zero);
    plan.scalarValues[access.base] =
        tensor::ExtractOp::create(b, loc, access.base, indices);
  }
  for (Value v : llvm::concat<Value>(fullValues, rowValues, colValues))
    plan.inputTypes.push_back(
        cast<RankedTensorType>(v.getType()).getElementType());
  // Keepdim column results (torch's sum over the rows with keepdim=True,
  // [1, ..., 1, N]) accumulate into their init collapsed to [N].
  for (Value &init : plan.colInits) {
    auto type = cast<RankedTensorType>(init.getType());
    if (type.getRank() > 1 && isKeepdimColumn(type)) {
      ReassociationIndices all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      init = tensor::CollapseShapeOp::create(
          b, loc, init, ArrayRef<ReassociationIndices>{all});
    }
    plan.colTypes.push_back(init.getType());
  }
  plan.rowResultTypes.assign(plan.rowResultsBefore.back(), Type());
  for (auto &[key, index] : plan.rowResults)
    plan.rowResultTypes[index] =
        getElementTypeOrSelf(key.first->getResult(key.second).getType());
  // The fused op's location names every member's (upstream fusion does the
  // same): a host compiler reads which of its ops a group took from it.
  SmallVector<Operation *> members(group.members.begin(),
                                   group.members.end());
  llvm::sort(members, [&](Operation *a, Operation *c) {
    return position.lookup(a) < position.lookup(c);
  });
  SmallVector<Location> memberLocs;
  for (Operation *op : members)
    memberLocs.push_back(op->getLoc());
  return MixedReductionOp::create(
      b, b.getFusedLoc(memberLocs), ValueRange(plan.fullOuts).getTypes(),
      plan.colTypes,
      fullValues, rowValues, colValues,
      plan.colInits,
      nDim + 1 == domain.size() ? IntegerAttr() : b.getI64IntegerAttr(nDim),
      plan.numStages);
}

LogicalResult Analysis::buildRegion(
    const FusionPlan &plan, OpBuilder &b, Region &region,
    unsigned numRowResults,
    function_ref<FailureOr<SmallVector<Value>>(RegionEmitter &)> body) {
  Location loc = region.getParentOp()->getLoc();
  SmallVector<Type> argTypes(plan.inputTypes);
  argTypes.append(plan.rowResultTypes.begin(),
                  plan.rowResultTypes.begin() + numRowResults);
  Block *block = b.createBlock(&region, {}, argTypes,
                               SmallVector<Location>(argTypes.size(), loc));
  RegionEmitter emitter(*this, b, plan.inputIndex, plan.scalarValues,
                        plan.rowResults, block, plan.numInputs,
                        numRowResults);
  FailureOr<SmallVector<Value>> yielded = body(emitter);
  if (failed(yielded))
    return failure();
  YieldOp::create(b, loc, *yielded);
  return success();
}

LogicalResult Analysis::buildRegions(const Group &group,
                                     const FusionPlan &plan, OpBuilder &b,
                                     MixedReductionOp fused) {
  Dims allDims;
  for (unsigned d = 0; d < domain.size(); ++d)
    allDims.push_back(d);
  // What `ops` add per point of the domain (row sums, column sums).
  auto contributions = [&](ArrayRef<Operation *> ops) {
    return [&, ops](RegionEmitter &emitter) -> FailureOr<SmallVector<Value>> {
      SmallVector<Value> all;
      for (Operation *op : ops) {
        FailureOr<SmallVector<Value>> c = emitter.payload(*viewOf(op), allDims);
        if (failed(c))
          return failure();
        llvm::append_range(all, *c);
      }
      return all;
    };
  };
  for (unsigned stage = 0; stage < plan.numStages; ++stage) {
    SmallVector<Operation *> ops;
    for (Operation *op : group.rowReductions)
      if (plan.stageOf.lookup(op) == stage)
        ops.push_back(op);
    if (failed(buildRegion(plan, b, fused.getRowStages()[stage],
                           plan.rowResultsBefore[stage], contributions(ops))))
      return failure();
  }
  auto fullResults = [&](RegionEmitter &emitter)
      -> FailureOr<SmallVector<Value>> {
    SmallVector<Value> yielded;
    for (Value v : plan.fullOuts) {
      FailureOr<Value> e = emitter.emit(Access{v, allDims, {}});
      if (failed(e))
        return failure();
      yielded.push_back(*e);
    }
    return yielded;
  };
  if (failed(buildRegion(plan, b, fused.getElementwise(),
                         plan.rowResultsBefore.back(), fullResults)))
    return failure();
  return buildRegion(plan, b, fused.getColumns(), plan.rowResultsBefore.back(),
                     contributions(group.colReductions));
}

void Analysis::remarkFused(const Group &group, unsigned numStages) {
  remark(group.rowReductions.front(),
         "fused a mixed-order reduction group of " +
             Twine(group.members.size()) + " ops: " +
             Twine(group.rowReductions.size()) + " row reduction(s) in " +
             Twine(numStages) + " stage(s), " +
             Twine(group.colReductions.size()) + " column reduction(s), " +
             Twine(group.members.size() - group.rowReductions.size() -
                   group.colReductions.size()) +
             " elementwise op(s)");
  // One remark per reduction: the others name their place in the group.
  auto placeRemarks = [&](ArrayRef<Operation *> ops, StringRef what) {
    for (auto [i, op] : llvm::enumerate(ops))
      if (op != group.rowReductions.front())
        remark(op, "fused: " + what + " reduction " + Twine(i + 1) + " of " +
                       Twine(ops.size()) +
                       " of the group reported on its first row reduction");
  };
  placeRemarks(group.rowReductions, "row");
  placeRemarks(group.colReductions, "column");
}

void Analysis::replaceGroup(Group &group, const FusionPlan &plan,
                            MixedReductionOp fused) {
  Operation *after = fused;
  for (Operation *op : plan.toMove) {
    op->moveAfter(after);
    after = op;
  }
  for (auto [from, to] : llvm::zip(plan.fullOuts, fused.getFullResults()))
    Value(from).replaceUsesWithIf(to, [&](OpOperand &use) {
      return !group.members.contains(use.getOwner());
    });
  OpBuilder b(fused);
  b.setInsertionPointAfter(fused);
  for (auto [from, to] : llvm::zip(plan.colOuts, fused.getColResults())) {
    Value result = to;
    auto type = cast<RankedTensorType>(from.getType());
    if (type != to.getType()) { // keepdim: [N] back to [1, ..., 1, N]
      ReassociationIndices all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      result = tensor::ExpandShapeOp::create(
          b, fused.getLoc(), type, to, ArrayRef<ReassociationIndices>{all});
    }
    Value(from).replaceAllUsesWith(result);
  }
  // Erase the group and the helpers (fills, empties, reshapes, per-row and
  // per-column generics) that nothing else uses any more. A member with a
  // user outside the group (a row sum that is also returned) stays, so the
  // IR is correct whatever the users are.
  eraseDeadOps(group.members.getArrayRef(), &erased);
}

LogicalResult Analysis::fuse(Group &group, std::string &why) {
  FusionPlan plan;
  planStages(group, plan);
  if (failed(planInputs(group, plan, why)) ||
      failed(planOutputs(group, plan, why)))
    return failure();
  // The fused op goes right after the group's last op.
  OpBuilder b(plan.last->getContext());
  b.setInsertionPointAfter(plan.last);
  MixedReductionOp fused = createFusedOp(group, plan, b);
  if (failed(buildRegions(group, plan, b, fused)) ||
      failed(fused.verify()) || failed(fused.verifyRegions())) {
    fused->erase();
    why = "internal: the fused op could not be built";
    return failure();
  }
  remarkFused(group, plan.numStages);
  replaceGroup(group, plan, fused);
  return success();
}

void Analysis::run() {
  buildViews();
  buildExtents();

  // Candidates per domain: reductions, and elementwise ops fed by a row
  // reduction (they carry dx and its epilogues).
  SmallVector<Operation *> order;
  func.walk([&](Operation *op) {
    position[op] = position.size();
    if (viewOf(op))
      order.push_back(op);
  });

  llvm::MapVector<SmallVector<int64_t>, SmallVector<Operation *>> byDomain;
  for (Operation *op : order) {
    const View &view = *viewOf(op);
    if (view.loops.size() < 2) {
      if (linalg::GenericOp(view.generic).getNumReductionLoops() > 0)
        remark(op, "not fused: a reduction over one dim (a group needs a "
                   "[rows..., N] domain)");
      continue;
    }
    if (view.kind == Kind::Other) {
      if (!view.whyOther.empty())
        remark(op, "not fused: " + view.whyOther);
      continue;
    }
    byDomain[view.loops].push_back(op);
  }

  // Per domain, per N among its reductions (N last first): the
  // reductions over that N and every elementwise op.
  for (auto &[loops, ops] : byDomain) {
    llvm::SmallSetVector<unsigned, 4> nDims;
    for (Operation *op : ops)
      if (viewOf(op)->kind != Kind::Elementwise)
        nDims.insert(viewOf(op)->nDim);
    SmallVector<unsigned> order(nDims.begin(), nDims.end());
    llvm::sort(order, std::greater<unsigned>());
    for (unsigned n : order)
      fuseDomain(loops, n, ops);
  }
}

void Analysis::fuseDomain(ArrayRef<int64_t> loops, unsigned n,
                          ArrayRef<Operation *> ops) {
    domain.assign(loops.begin(), loops.end());
    nDim = n;
    SmallVector<Operation *> candidates;
    for (Operation *op : ops) {
      if (erased.contains(op))
        continue;
      const View &view = *viewOf(op);
      if (view.kind != Kind::Elementwise && view.nDim != nDim)
        continue;
      extentLeader = fullValueOf(view);
      Slice slice = sliceOf(view);
      bool isReduction = view.kind != Kind::Elementwise;
      if (!isReduction && slice.rowReductions.empty())
        continue;
      if (!slice.failure.empty()) {
        if (isReduction)
          remark(op, "not fused: " + slice.failure);
        continue;
      }
      slices[op] = std::move(slice);
      candidates.push_back(op);
    }

    // Union candidates that share a full input or intermediate, or chain.
    llvm::EquivalenceClasses<Operation *> classes;
    DenseMap<void *, Operation *> owner;
    auto link = [&](void *key, Operation *op) {
      auto [it, inserted] = owner.try_emplace(key, op);
      if (!inserted)
        classes.unionSets(it->second, op);
    };
    for (Operation *op : candidates) {
      classes.insert(op);
      const Slice &slice = slices[op];
      link(op, op);
      for (Value leaf : slice.fullLeaves)
        link(leaf.getAsOpaquePointer(), op);
      for (Operation *full : slice.fullOps)
        link(full, op);
      for (Operation *row : slice.rowReductions)
        link(row, op);
    }

    for (auto it = classes.begin(); it != classes.end(); ++it) {
      if (!(*it)->isLeader())
        continue;
      Group group;
      for (auto member = classes.member_begin(**it);
           member != classes.member_end(); ++member)
        group.candidates.push_back(*member);
      llvm::sort(group.candidates, [&](Operation *a, Operation *b) {
        return position[a] < position[b];
      });
      std::string why;
      extentLeader = fullValueOf(*viewOf(group.candidates.front()));
      if (failed(validate(group, why)) || failed(fuse(group, why))) {
        for (Operation *op : group.candidates)
          if (viewOf(op)->kind != Kind::Elementwise)
            remark(op, "not fused: " + why);
      }
    }
}

} // namespace

namespace {
struct NormFuseMixedReductionsPass
    : norm::impl::NormFuseMixedReductionsBase<NormFuseMixedReductionsPass> {
  using Base::Base;
  void runOnOperation() override {
    Analysis(getOperation(), remarks, rowOnly).run();
  }
};
} // namespace
