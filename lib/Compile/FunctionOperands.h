//===- FunctionOperands.h - Which function argument/result a value is -*- C++ -*-===//
//
// Part of norm-opt. Internal to NormCompile: the launcher and the signature
// writer both map a fused op's operands and results to the parameters of
// the function they launch, looking through reshapes and casts, and print
// their types.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_LIB_COMPILE_FUNCTIONOPERANDS_H
#define NORM_LIB_COMPILE_FUNCTIONOPERANDS_H

#include "norm/Conversion/NormToGPU.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace mlir::norm::compile_detail {

/// The leading dims a group's launcher takes as its `batch` parameter:
/// batched rows' samples (adaLN's B), a slab domain's R dims (GroupNorm's
/// N); 0 for none.
inline int64_t batchParamRank(MixedReductionOp op) {
  if (std::optional<SlabDomain> slab = op.getSlabDomain())
    return slab->rRank;
  return op.getBatchRank();
}

/// Whether two fused groups share their launcher's domain parameters:
/// one domain shape, N at one dim, and the same batch parameter.
inline bool sameDomain(MixedReductionOp a, MixedReductionOp b) {
  return a.getDomainShape() == b.getDomainShape() &&
         a.getNDimIndex() == b.getNDimIndex() &&
         batchParamRank(a) == batchParamRank(b) &&
         a.getSlabDomain().has_value() == b.getSlabDomain().has_value();
}

inline bool isReshape(Operation *op) {
  return isa<tensor::CastOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
      op);
}

/// The function argument `v` is (through reshapes and casts), if any.
inline std::optional<unsigned> argumentOf(Value v) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (isa<func::FuncOp>(arg.getOwner()->getParentOp()))
        return arg.getArgNumber();
      return std::nullopt;
    }
    Operation *def = v.getDefiningOp();
    if (!def || !isReshape(def))
      return std::nullopt;
    v = def->getOperand(0);
  }
}

/// The function result `v` becomes (through reshapes and casts), if it has
/// exactly that one use.
inline std::optional<unsigned> resultOf(Value v) {
  while (v.hasOneUse()) {
    OpOperand &use = *v.getUses().begin();
    if (isa<func::ReturnOp>(use.getOwner()))
      return use.getOperandNumber();
    if (!isReshape(use.getOwner()))
      return std::nullopt;
    v = use.getOwner()->getResult(0);
  }
  return std::nullopt;
}

/// The value a column initial value is read from: the input of the
/// prologue the kernels absorb (the extf of a 16-bit previous gradient),
/// else the initial value itself.
inline Value columnInitSource(Value init) {
  if (linalg::GenericOp prologue = getColumnInitPrologue(init))
    return prologue.getDpsInputOperand(0)->get();
  return init;
}

/// Why `fn` cannot take one launcher of its own (the whole-function form),
/// or "" when it can: its groups sit in its body, every other op there is
/// side-effect-free glue the kernels make unnecessary (shapes, fills,
/// reshapes, a column result's epilogue or an initial value's prologue),
/// every group input is an argument, and every result comes out of a group
/// and is returned once. Otherwise compile mode outlines its groups
/// (--norm-outline-groups) and launches each on its own.
inline std::string whyNotLaunchableWhole(func::FuncOp fn) {
  if (fn.isDeclaration() || !fn.getBody().hasOneBlock())
    return "its body is not one block";
  Block &body = fn.getBody().front();
  SmallVector<MixedReductionOp> groups;
  fn.walk([&](MixedReductionOp op) { groups.push_back(op); });
  llvm::SmallPtrSet<Operation *, 8> edges;
  llvm::SmallPtrSet<Value, 8> produced;
  auto isArgument = [](Value v) { return argumentOf(v).has_value(); };
  const char *notArgument = "a group input is computed in the function";
  for (MixedReductionOp op : groups) {
    if (op->getBlock() != &body)
      return "a group sits in a nested region";
    if (!llvm::all_of(op.getFull(), isArgument) ||
        !llvm::all_of(op.getRow(), isArgument) ||
        !llvm::all_of(op.getCol(), isArgument))
      return notArgument;
    for (tensor::ExtractOp e : getCapturedScalars(op))
      if (!isArgument(e.getTensor()))
        return notArgument;
    for (Value init : op.getColInit()) {
      if (linalg::GenericOp p = getColumnInitPrologue(init))
        edges.insert(p);
      if (!getConstantColumnInit(init) && !isArgument(columnInitSource(init)))
        return notArgument;
    }
    for (Value v : op.getFullResults())
      produced.insert(v);
    for (Value v : op.getColResults()) {
      linalg::GenericOp e = getColumnEpilogue(v);
      if (e)
        edges.insert(e);
      produced.insert(e ? e->getResult(0) : v);
    }
  }
  for (Operation &op : body) {
    if (isa<MixedReductionOp, func::ReturnOp, tensor::EmptyOp,
            linalg::FillOp>(op) ||
        isPure(&op) || edges.contains(&op))
      continue;
    return ("it has other work ('" + op.getName().getStringRef() + "')")
        .str();
  }
  if (!llvm::all_of(produced, [](Value v) { return resultOf(v).has_value(); }))
    return "a group result is used in the function";
  for (Value v : body.getTerminator()->getOperands()) {
    while (v.getDefiningOp() && isReshape(v.getDefiningOp()))
      v = v.getDefiningOp()->getOperand(0);
    if (!produced.contains(v))
      return "a result does not come out of a group";
  }
  return "";
}

/// `t` as MLIR prints it ("tensor<?x256xf32>"), for generated sources.
inline std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

} // namespace mlir::norm::compile_detail

#endif // NORM_LIB_COMPILE_FUNCTIONOPERANDS_H
