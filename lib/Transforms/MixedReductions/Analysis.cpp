//===- Analysis.cpp - Mixed-order reduction groups: views, slices, groups -===//
//
// Part of norm-opt.
//
// The steps of the recognition up to a group (Analysis.h says what they
// are), and the driver that forms the groups of each domain and hands each
// to the caller's control and to Rewrite.cpp.
//
//===----------------------------------------------------------------------===//

#include "Analysis.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace mlir::norm;

namespace mlir::norm::mixed {

/// "[1, 2]".
static std::string dimsText(ArrayRef<unsigned> dims) {
  std::string text = "[";
  for (auto [i, d] : llvm::enumerate(dims))
    text += (i ? ", " : "") + std::to_string(d);
  return text + "]";
}

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

/// The view's kind from its iterators and output maps: elementwise, a
/// reduction (with its reduced loops), or other (and why). Whether a
/// reduction is a row or a column one depends on the pairing its domain is
/// taken in (roleOf).
void Analysis::classifyLoops(View &view) const {
  linalg::GenericOp g = view.generic;
  SmallVector<IteratorType> its = g.getIteratorTypesArray();
  unsigned rank = its.size();
  unsigned numReduction = llvm::count(its, IteratorType::reduction);
  bool allOutputsIdentity = llvm::all_of(
      g.getDpsInitsMutable(), [&](OpOperand &init) {
        return g.getMatchingIndexingMap(&init).isIdentity();
      });
  if (numReduction == 0) {
    view.kind = allOutputsIdentity ? Kind::Elementwise : Kind::Other;
    return;
  }
  if (numReduction == rank) {
    view.whyOther = "it reduces every dim (a total sum, not a row or column "
                    "reduction)";
    return;
  }
  for (unsigned d = 0; d < rank; ++d)
    if (its[d] == IteratorType::reduction)
      view.reduced.push_back(d);
  // The output keeps the parallel dims in order (a dropped dim may stay as
  // a constant-0 unit dim).
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
    view.whyOther = "the reduction writes its result through a transposing "
                    "or broadcasting map";
    return;
  }
  view.kind = Kind::Reduction;
}

Role Analysis::roleOf(const View &view) const {
  if (view.kind != Kind::Reduction)
    return Role::None;
  if (view.reduced == pairing.rowSum)
    return Role::Row;
  Dims kept;
  for (unsigned d = 0, e = view.loops.size(); d < e; ++d)
    if (!llvm::is_contained(view.reduced, d))
      kept.push_back(d);
  return kept == pairing.colKept ? Role::Col : Role::None;
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
    if (view.kind == Kind::Reduction) {
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
      case Kind::Reduction: {
        // A reduction over another domain (a softmax's row sum, a loss's
        // column sum elsewhere, or the same static shape over other
        // run-time extents) is a neighbour: its result is an input.
        // A reduction of the same domain with no role in this pairing
        // (over another N) is one too.
        Role role = roleOf(*view);
        if (view->loops != ArrayRef<int64_t>(domain) || !sameExtents(*view) ||
            role == Role::None)
          break;
        bool row = role == Role::Row;
        Dims expected = row ? rowDims(rank) : pairing.colKept;
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
  if (roleOf(candidate) == Role::Row) {
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

LogicalResult Analysis::validate(Group &group, std::string &why,
                                 bool allowRowOnly) {
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
    switch (roleOf(*viewOf(op))) {
    case Role::Row:
      group.rowReductions.push_back(op);
      break;
    case Role::Col:
      group.colReductions.push_back(op);
      break;
    case Role::None:
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
  if (group.colReductions.empty() && !allowRowOnly) {
    why = rowOnly ? "no additive column reduction (over the rows) shares its "
                    "inputs, and a row-only group did not form"
                  : "no additive column reduction (over the rows) shares its "
                    "inputs (row-only groups: row-only=true)";
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
  // A column sum accumulated into a value (dW into the previous gradient)
  // reads it before the group's results exist: not one of them (adaLN's
  // chain of issue 193061 once CSE has merged its two groups' shared ops).
  for (Operation *col : group.colReductions)
    for (Value init : cast<DestinationStyleOpInterface>(col).getDpsInits()) {
      Operation *def = init.getDefiningOp();
      def = def ? block->findAncestorOpInBlock(*def) : nullptr;
      if (def && (group.members.contains(def) || downstream.contains(def)))
        return report(def);
    }
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
// The driver
//===----------------------------------------------------------------------===//

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

  // Per domain, per pairing: 2-D pairings first (with their column
  // reductions: a plain LayerNorm next to a per-sample pooling sum is a
  // 2-D group), then multi-axis ones, then, when asked, 2-D groups
  // without a column reduction (a row-only group must not take an adaLN's
  // row sums from its multi-axis pairing).
  for (auto &[loops, ops] : byDomain) {
    SmallVector<Pairing> pairings = pairingsOf(loops, ops);
    for (const Pairing &p : pairings)
      if (!p.isMultiAxis())
        fuseDomain(loops, p, ops, /*allowRowOnly=*/false);
    for (const Pairing &p : pairings)
      if (p.isMultiAxis())
        fuseDomain(loops, p, ops, /*allowRowOnly=*/false);
    if (rowOnly)
      for (const Pairing &p : pairings)
        if (!p.isMultiAxis())
          fuseDomain(loops, p, ops, /*allowRowOnly=*/true);
  }

  reportUnfused(order);
}

void Analysis::reportUnfused(ArrayRef<Operation *> order) {
  for (Operation *op : order) {
    const View &view = *viewOf(op);
    // Skipped: fused, or claimed by a group that would fuse (a dry run's
    // "would fuse" remark said so).
    if (erased.contains(op) || reportedFused.contains(op) ||
        view.kind != Kind::Reduction ||
        view.loops.size() < 2 ||
        (claimed.contains(op) && !whyNotFused.count(op)))
      continue;
    auto it = whyNotFused.find(op);
    remark(op, "not fused: " +
                   (it != whyNotFused.end()
                        ? it->second
                        : std::string("no reduction of its domain pairs with "
                                      "it (a row reduction needs a column "
                                      "reduction that keeps one of the dims "
                                      "it sums over)")));
  }
  if (found)
    for (auto &[report, candidates] : pendingReports)
      if (llvm::none_of(candidates, [&](Operation *op) {
            return erased.contains(op) || claimed.contains(op);
          }))
        found->push_back(std::move(report));
}

/// Whether `a` and `b` (ascending) share an element.
static bool intersects(ArrayRef<unsigned> a, ArrayRef<unsigned> b) {
  return llvm::any_of(a, [&](unsigned d) { return llvm::is_contained(b, d); });
}

SmallVector<Pairing> Analysis::pairingsOf(ArrayRef<int64_t> loops,
                                          ArrayRef<Operation *> ops) const {
  unsigned rank = loops.size();
  llvm::SetVector<Dims> reducedSets, keptSets;
  for (Operation *op : ops) {
    const View &view = *viewOf(op);
    if (view.kind != Kind::Reduction)
      continue;
    Dims kept;
    for (unsigned d = 0; d < rank; ++d)
      if (!llvm::is_contained(view.reduced, d))
        kept.push_back(d);
    reducedSets.insert(view.reduced);
    keptSets.insert(kept);
  }
  // 2-D: N is the one dim a row reduction sums over or a column reduction
  // keeps; at rank 2 it is the last (one reduced loop of two reads either
  // way). The last dim first.
  llvm::SmallSetVector<unsigned, 4> nDims;
  for (const Dims &dims : llvm::concat<const Dims>(reducedSets, keptSets))
    if (dims.size() == 1 && (rank > 2 || dims.front() == rank - 1))
      nDims.insert(dims.front());
  SmallVector<unsigned> ns(nDims.begin(), nDims.end());
  llvm::sort(ns, std::greater<unsigned>());
  SmallVector<Pairing> out;
  for (unsigned n : ns)
    out.push_back(Pairing{Dims{n}, Dims{n}});
  // Multi-axis: a set of dims some reduction sums over, and a set some
  // other keeps, that share a dim (the column sums cut across the rows).
  // Later dims summed over first (the rows' innermost dims, as N last
  // first above): GroupNorm's (C/G, HW) before (N, HW).
  SmallVector<Pairing> multi;
  for (const Dims &sum : reducedSets)
    for (const Dims &kept : keptSets) {
      Pairing p{sum, kept};
      if (rank > 2 && p.isMultiAxis() && intersects(sum, kept))
        multi.push_back(p);
    }
  auto laterFirst = [](ArrayRef<unsigned> a, ArrayRef<unsigned> b) {
    return std::lexicographical_compare(b.rbegin(), b.rend(), a.rbegin(),
                                        a.rend());
  };
  llvm::stable_sort(multi, [&](const Pairing &a, const Pairing &b) {
    if (a.rowSum != b.rowSum)
      return laterFirst(a.rowSum, b.rowSum);
    return laterFirst(a.colKept, b.colKept);
  });
  llvm::append_range(out, multi);
  return out;
}

void Analysis::fuseDomain(ArrayRef<int64_t> loops, const Pairing &p,
                          ArrayRef<Operation *> ops, bool allowRowOnly) {
    domain.assign(loops.begin(), loops.end());
    pairing = p;
    SmallVector<Operation *> candidates;
    for (Operation *op : ops) {
      if (erased.contains(op) || claimed.contains(op))
        continue;
      const View &view = *viewOf(op);
      if (view.kind != Kind::Elementwise && roleOf(view) == Role::None)
        continue;
      extentLeader = fullValueOf(view);
      Slice slice = sliceOf(view);
      bool isReduction = view.kind != Kind::Elementwise;
      if (!isReduction && slice.rowReductions.empty())
        continue;
      if (!slice.failure.empty()) {
        if (isReduction)
          notFused(op, slice.failure);
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
      FusionPlan plan;
      bool fuses = succeeded(validate(group, why, allowRowOnly)) &&
                   succeeded(decide(group, plan, why));
      if (fuses && pairing.isMultiAxis() &&
          !multiAxisFuses(pairing, domain)) {
        // Reported, and claimed: no later pairing takes these reductions
        // (nor overwrites the reason).
        why = "a multi-axis group (row sums over dims " +
              dimsText(pairing.rowSum) + ", column sums keeping dims " +
              dimsText(pairing.colKept) + "), and " +
              (multiAxis == MultiAxisGroups::None
                   ? "multi-axis groups are off (multi-axis=false)"
               : multiAxis == MultiAxisGroups::BatchedRows
                   ? "only batched rows fuse (multi-axis=batched)"
                   : "only the GPU lowering's fuse (multi-axis=gpu: batched "
                     "rows, GroupNorm slabs)");
        if (found)
          found->push_back(describe(group, why));
        for (Operation *op : group.candidates) {
          if (viewOf(op)->kind != Kind::Elementwise)
            notFused(op, why);
          claimed.insert(op);
        }
        continue;
      }
      if (fuses && dryRun) {
        found->push_back(describe(group, ""));
        remark(group.rowReductions.front(),
               "would fuse: a mixed-order reduction group of " +
                   Twine(group.members.size()) + " ops");
        for (Operation *op : group.candidates) {
          claimed.insert(op); // no later pairing reports them
          whyNotFused.erase(op);
        }
        continue;
      }
      if (fuses && control && !control(describe(group, ""))) {
        fuses = false;
        why = "the caller's control function declined the group";
      }
      if (fuses) {
        FailureOr<MixedReductionOp> op = fuse(group, plan, why);
        if (succeeded(op)) {
          if (found)
            found->push_back(describe(group, ""));
          fused.push_back(*op);
          continue;
        }
      }
      if (found)
        pendingReports.emplace_back(describe(group, why), group.candidates);
      for (Operation *op : group.candidates)
        if (viewOf(op)->kind != Kind::Elementwise)
          notFused(op, why);
    }
}


} // namespace mlir::norm::mixed
