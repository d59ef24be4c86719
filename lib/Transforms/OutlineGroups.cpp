//===- OutlineGroups.cpp - One function per fused norm group --------------===//
//
// Part of norm-opt.
//
// Each norm.mixed_reduction of a host function becomes a function of its
// own, called where the group was. The outlined function's arguments are
// exactly the group's inputs (its full, row and column tensors, the source
// of a widened column initial value, the 0-d tensors its payloads read) and
// its results exactly the group's results (a column result's narrowing
// epilogue goes with it). What the kernels absorb (constant column initial
// values, the epilogue and prologue maps, the scalar reads) is rebuilt
// inside, with N taken from the group's first full input, so nothing else
// of the host crosses the boundary. Steps: collect the inputs, collect the
// results, build the function, replace the group by a call.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/GroupBoundary.h"
#include "norm/Transforms/Outline.h"
#include "norm/Transforms/Passes.h"
#include "norm/Utils/DeadOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"

namespace mlir::norm {
#define GEN_PASS_DEF_NORMOUTLINEGROUPS
#include "norm/Transforms/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

namespace {

/// What crosses the boundary of one group, and how to rebuild the rest.
struct Boundary {
  MixedReductionOp op;
  SmallVector<Value> inputs;  // host values: the outlined arguments
  SmallVector<Value> results; // host values the call's results replace
  // Per column initial value: a constant fill to rebuild, a prologue to
  // clone over its input, or neither (the value is an input).
  SmallVector<linalg::GenericOp> prologues;
  SmallVector<linalg::GenericOp> epilogues; // per column result, or null
  // Values the regions read from above, in first-use order.
  SetVector<Value> captured;
};

/// Index of `v` among the inputs, appending it the first time.
unsigned inputIndex(Boundary &b, Value v) {
  auto it = llvm::find(b.inputs, v);
  if (it != b.inputs.end())
    return it - b.inputs.begin();
  b.inputs.push_back(v);
  return b.inputs.size() - 1;
}

/// A value a payload reads from above that the outlined function rebuilds
/// (a constant, a dim of an input, arithmetic on such values) or reads from
/// a 0-d argument.
LogicalResult collectCaptured(Boundary &b, Value v, std::string &why) {
  if (b.captured.contains(v))
    return success();
  Operation *def = v.getDefiningOp();
  if (def && matchPattern(v, m_Constant())) {
    b.captured.insert(v);
    return success();
  }
  if (auto extract = dyn_cast_or_null<tensor::ExtractOp>(def)) {
    if (cast<RankedTensorType>(extract.getTensor().getType()).getRank() == 0) {
      inputIndex(b, extract.getTensor());
      b.captured.insert(v);
      return success();
    }
  }
  // A dim of an input (a run-time N the payload divides by).
  if (auto dim = dyn_cast_or_null<tensor::DimOp>(def)) {
    if (llvm::is_contained(b.inputs, dim.getSource())) {
      if (failed(collectCaptured(b, dim.getIndex(), why)))
        return failure();
      b.captured.insert(v);
      return success();
    }
  }
  if (def && isa<arith::ArithDialect>(def->getDialect()) &&
      def->getNumRegions() == 0) {
    for (Value operand : def->getOperands())
      if (failed(collectCaptured(b, operand, why)))
        return failure();
    b.captured.insert(v);
    return success();
  }
  why = "a payload reads a value that is neither a constant, a 0-d "
        "tensor's element nor a dim of an input";
  return failure();
}

/// Step 1: the group's inputs.
LogicalResult collectInputs(Boundary &b, std::string &why) {
  MixedReductionOp op = b.op;
  for (Value v : llvm::concat<Value>(op.getFull(), op.getRow(), op.getCol()))
    inputIndex(b, v);
  for (Value init : op.getColInit()) {
    linalg::GenericOp prologue = getColumnInitPrologue(init);
    b.prologues.push_back(prologue);
    if (prologue)
      inputIndex(b, prologue.getDpsInputOperand(0)->get());
    else if (!getConstantColumnInit(init))
      inputIndex(b, init);
  }
  SetVector<Value> above;
  getUsedValuesDefinedAbove(op->getRegions(), above);
  for (Value v : above)
    if (failed(collectCaptured(b, v, why)))
      return failure();
  return success();
}

/// Step 2: the group's results (a column result's epilogue included).
void collectResults(Boundary &b) {
  for (Value v : b.op.getFullResults())
    b.results.push_back(v);
  for (Value v : b.op.getColResults()) {
    linalg::GenericOp epilogue = getColumnEpilogue(v);
    b.epilogues.push_back(epilogue);
    b.results.push_back(epilogue ? epilogue->getResult(0) : v);
  }
}

/// An empty tensor of `type` (a column result's: [N], or indexed by the
/// op's col_dims) whose dynamic dims are those of `full`.
Value emptyColumns(OpBuilder &builder, Location loc, MixedReductionOp op,
                   RankedTensorType type, Value full) {
  SmallVector<Value> sizes;
  for (auto [i, d] : llvm::enumerate(op.getColDimList()))
    if (type.isDynamicDim(i))
      sizes.push_back(tensor::DimOp::create(builder, loc, full, d));
  return tensor::EmptyOp::create(builder, loc, type, sizes);
}

/// Step 3: the outlined function, inserted after `previous` (the host
/// function or the last function outlined from it).
func::FuncOp buildFunction(Boundary &b, func::FuncOp host,
                           func::FuncOp previous, StringRef name) {
  MixedReductionOp op = b.op;
  Location loc = op.getLoc();
  OpBuilder builder(host.getContext());
  builder.setInsertionPointAfter(previous);
  auto type = builder.getFunctionType(ValueRange(b.inputs).getTypes(),
                                      ValueRange(b.results).getTypes());
  auto fn = func::FuncOp::create(builder, loc, name, type);
  fn->setAttr(kOutlinedAttrName, builder.getStringAttr(host.getSymName()));
  Block *body = fn.addEntryBlock();
  builder.setInsertionPointToStart(body);

  IRMapping mapping;
  for (auto [v, arg] : llvm::zip(b.inputs, body->getArguments()))
    mapping.map(v, arg);
  // What the payloads read from above: constants, scalar reads, arithmetic.
  for (Value v : b.captured) {
    if (auto extract = v.getDefiningOp<tensor::ExtractOp>())
      mapping.map(v, tensor::ExtractOp::create(
                         builder, loc, mapping.lookup(extract.getTensor()),
                         ValueRange{}));
    else
      builder.clone(*v.getDefiningOp(), mapping);
  }
  // Column initial values: a constant fill or a prologue, rebuilt.
  Value full = mapping.lookup(op.getFull().front());
  for (auto [init, prologue] : llvm::zip(op.getColInit(), b.prologues)) {
    if (mapping.contains(init))
      continue;
    auto initType = cast<RankedTensorType>(init.getType());
    if (prologue) {
      Value into = prologue.getDpsInitOperand(0)->get();
      mapping.map(into, emptyColumns(builder, loc, op,
                                     cast<RankedTensorType>(into.getType()),
                                     full));
      mapping.map(init, builder.clone(*prologue, mapping)->getResult(0));
    } else {
      auto fill = init.getDefiningOp<linalg::FillOp>();
      Value value = builder.clone(*fill.value().getDefiningOp())->getResult(0);
      Value empty = emptyColumns(builder, loc, op, initType, full);
      mapping.map(init, linalg::FillOp::create(builder, loc, value, empty)
                            .getResult(0));
    }
  }
  Operation *group = builder.clone(*op, mapping);
  SmallVector<Value> returned(group->getResults().take_front(
      op.getFullResults().size()));
  for (auto [c, epilogue] : llvm::enumerate(b.epilogues)) {
    Value result = group->getResult(op.getFullResults().size() + c);
    if (!epilogue) {
      returned.push_back(result);
      continue;
    }
    IRMapping epilogueMapping;
    epilogueMapping.map(op.getColResults()[c], result);
    Value into = epilogue.getDpsInitOperand(0)->get();
    epilogueMapping.map(into,
                        emptyColumns(builder, loc, op,
                                     cast<RankedTensorType>(into.getType()),
                                     full));
    returned.push_back(builder.clone(*epilogue, epilogueMapping)->getResult(0));
  }
  func::ReturnOp::create(builder, loc, returned);
  return fn;
}

/// Step 4: the call in place of the group; what only the group used goes.
/// A later group that reads this one's results (a chain whose column sums
/// start from this one's: adaLN's shared scale / shift) reads the call's.
void replaceByCall(Boundary &b, func::FuncOp fn,
                   MutableArrayRef<Boundary> later) {
  OpBuilder builder(b.op);
  auto call = func::CallOp::create(builder, b.op.getLoc(), fn, b.inputs);
  for (auto [from, to] : llvm::zip(b.results, call.getResults())) {
    for (Boundary &next : later)
      llvm::replace(next.inputs, from, Value(to));
    from.replaceAllUsesWith(to);
  }
  // The group, its epilogues, and the fills, empties, prologues and scalar
  // reads that nothing uses any more.
  // Users go before what they use (the last root is tried first).
  SmallVector<Operation *> dead;
  for (Value v : b.captured)
    if (Operation *def = v.getDefiningOp())
      dead.push_back(def);
  dead.push_back(b.op);
  for (linalg::GenericOp epilogue : b.epilogues)
    if (epilogue)
      dead.push_back(epilogue);
  eraseDeadOps(dead);
}

} // namespace

FailureOr<SmallVector<func::FuncOp>>
mlir::norm::outlineNormGroups(func::FuncOp host, SymbolTable &symbols) {
  SmallVector<MixedReductionOp> groups;
  host.walk([&](MixedReductionOp op) { groups.push_back(op); });
  std::vector<Boundary> boundaries;
  for (MixedReductionOp op : groups) {
    Boundary b;
    b.op = op;
    std::string why;
    if (failed(collectInputs(b, why)))
      return op.emitError() << "cannot outline the fused group: " << why;
    collectResults(b);
    boundaries.push_back(std::move(b));
  }
  SmallVector<func::FuncOp> outlined;
  for (auto [i, b] : llvm::enumerate(boundaries)) {
    func::FuncOp fn = buildFunction(
        b, host, outlined.empty() ? host : outlined.back(),
        (host.getSymName() + "_group" + Twine(i)).str());
    symbols.insert(fn); // renames on a clash
    replaceByCall(b, fn, MutableArrayRef(boundaries).drop_front(i + 1));
    outlined.push_back(fn);
  }
  return outlined;
}

namespace {
struct NormOutlineGroupsPass
    : norm::impl::NormOutlineGroupsBase<NormOutlineGroupsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> hosts;
    for (func::FuncOp fn : module.getOps<func::FuncOp>())
      if (!fn.isDeclaration() && !fn->hasAttr(kOutlinedAttrName))
        hosts.push_back(fn);
    for (func::FuncOp fn : hosts)
      if (failed(outlineNormGroups(fn, symbols)))
        return signalPassFailure();
  }
};
} // namespace
