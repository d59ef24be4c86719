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
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace mlir::norm::compile_detail {

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

/// `t` as MLIR prints it ("tensor<?x256xf32>"), for generated sources.
inline std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

} // namespace mlir::norm::compile_detail

#endif // NORM_LIB_COMPILE_FUNCTIONOPERANDS_H
