//===- Rewrite.cpp - Mixed-order reduction groups: plan and fused op ------===//
//
// Part of norm-opt.
//
// A group's plan (its row stages, inputs, outputs and the users that move)
// decides whether it fuses; the fused op is then created, its regions
// filled with the members' cloned payloads, and the group replaced.
//
//===----------------------------------------------------------------------===//

#include "Analysis.h"

#include "norm/Utils/DeadOps.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::norm;

namespace mlir::norm::mixed {

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

/// The reassociation that collapses the unit dims of a rank-`rank` shape
/// (`isUnit(pos)`) away: each joins the group of the next kept dim, and
/// trailing ones the last kept dim's.
static SmallVector<ReassociationIndices>
collapsingUnitDims(int64_t rank, function_ref<bool(int64_t)> isUnit) {
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices pending;
  for (int64_t d = 0; d < rank; ++d) {
    pending.push_back(d);
    if (!isUnit(d)) {
      groups.push_back(pending);
      pending.clear();
    }
  }
  if (!pending.empty() && !groups.empty())
    llvm::append_range(groups.back(), pending);
  return groups;
}

Value collapseUnitDims(OpBuilder &b, Location loc, const Access &access) {
  Value v = access.base;
  if (access.unitDims.empty())
    return v;
  auto type = cast<RankedTensorType>(v.getType());
  return tensor::CollapseShapeOp::create(
      b, loc, v, collapsingUnitDims(type.getRank(), [&](int64_t d) {
        return llvm::is_contained(access.unitDims, d);
      }));
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
  Dims rows = rowDims(rank), colDims = pairing.colKept, allDims;
  for (unsigned d = 0; d < rank; ++d)
    allDims.push_back(d);
  DenseSet<std::pair<Value, unsigned>> seen;
  for (Operation *op : group.candidates) {
    for (auto &[key, access] : slices[op].externals) {
      if (!seen.insert(key).second)
        continue;
      if (access.dims.size() == rank)
        plan.full.push_back(access);
      else if (access.dims == rows)
        plan.row.push_back(access);
      else if (Access asFull = withUnitDomainDims(access, allDims);
               asFull.dims.size() == rank)
        plan.full.push_back(asFull);
      else if (Access asRow = withUnitDomainDims(access, rows);
               !access.dims.empty() && asRow.dims == rows)
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
    const View &view = *viewOf(op);
    for (OpResult r : op->getResults()) {
      if (roleOf(view) == Role::Col) {
        plan.colOuts.push_back(r);
        plan.colInits.push_back(cast<DestinationStyleOpInterface>(op)
                                    .getDpsInits()[r.getResultNumber()]);
        plan.colKeepdim.push_back(keepdimGroups(view, r.getResultNumber()));
      } else if (view.kind == Kind::Elementwise && leaves(r)) {
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

/// A column reduction's output `i` with keepdim unit dims (torch's sum over
/// the rows with keepdim=True, [1, ..., 1, N]; [B, 1, N] over the tokens of
/// each sample): the reassociation that collapses them into the kept dims,
/// each unit dim joining the next kept dim (trailing ones the last). Empty
/// when the output has none.
SmallVector<ReassociationIndices>
Analysis::keepdimGroups(const View &view, unsigned i) const {
  linalg::GenericOp g = view.generic;
  AffineMap map = g.getMatchingIndexingMap(g.getDpsInitOperand(i));
  auto isUnit = [&](int64_t pos) {
    return !isa<AffineDimExpr>(map.getResult(pos));
  };
  if (llvm::none_of(llvm::seq<int64_t>(0, map.getNumResults()), isUnit))
    return {};
  return collapsingUnitDims(map.getNumResults(), isUnit);
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
  // Keepdim column results accumulate into their init collapsed to the
  // kept dims ([N], [B, N]).
  for (auto [init, groups] : llvm::zip(plan.colInits, plan.colKeepdim)) {
    if (!groups.empty())
      init = tensor::CollapseShapeOp::create(b, loc, init, groups);
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
      nDimAttr(b), rowSumDimsAttr(b), colDimsAttr(b), plan.numStages);
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
  reportedFused.insert(group.rowReductions.begin(), group.rowReductions.end());
  reportedFused.insert(group.colReductions.begin(), group.colReductions.end());
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
  for (auto [from, to, groups] :
       llvm::zip(plan.colOuts, fused.getColResults(), plan.colKeepdim)) {
    Value result = to;
    auto type = cast<RankedTensorType>(from.getType());
    if (!groups.empty()) // keepdim: [N] back to [1, ..., 1, N]
      result = tensor::ExpandShapeOp::create(b, fused.getLoc(), type, to,
                                             groups);
    Value(from).replaceAllUsesWith(result);
  }
  // Erase the group and the helpers (fills, empties, reshapes, per-row and
  // per-column generics) that nothing else uses any more. A member with a
  // user outside the group (a row sum that is also returned) stays, so the
  // IR is correct whatever the users are.
  eraseDeadOps(group.members.getArrayRef(), &erased);
}

LogicalResult Analysis::decide(const Group &group, FusionPlan &plan,
                               std::string &why) {
  planStages(group, plan);
  if (failed(planInputs(group, plan, why)) ||
      failed(planOutputs(group, plan, why)))
    return failure();
  return success();
}

FailureOr<MixedReductionOp> Analysis::fuse(Group &group, FusionPlan &plan,
                                           std::string &why) {
  // The fused op goes right after the group's last op.
  OpBuilder b(plan.last->getContext());
  b.setInsertionPointAfter(plan.last);
  MixedReductionOp op = createFusedOp(group, plan, b);
  if (failed(buildRegions(group, plan, b, op)) || failed(op.verify()) ||
      failed(op.verifyRegions())) {
    op->erase();
    why = "internal: the fused op could not be built";
    return failure();
  }
  remarkFused(group, plan.numStages);
  replaceGroup(group, plan, op);
  return op;
}

MixedReductionGroup Analysis::describe(const Group &group,
                                       const std::string &whyNot) const {
  MixedReductionGroup out;
  out.domain.assign(domain.begin(), domain.end());
  out.nDim = pairing.isMultiAxis() ? 0 : pairing.rowSum.front();
  out.rowSumDims.assign(pairing.rowSum.begin(), pairing.rowSum.end());
  out.colDims.assign(pairing.colKept.begin(), pairing.colKept.end());
  out.rowReductions.assign(group.rowReductions.begin(),
                           group.rowReductions.end());
  out.columnReductions.assign(group.colReductions.begin(),
                              group.colReductions.end());
  out.members.assign(group.members.begin(), group.members.end());
  llvm::sort(out.members, [&](Operation *a, Operation *b) {
    return position.lookup(a) < position.lookup(b);
  });
  out.whyNot = whyNot;
  return out;
}


} // namespace mlir::norm::mixed
