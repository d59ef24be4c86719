//===- NormOps.cpp - norm dialect ops -------------------------------------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::norm;

namespace {
/// The checks both grad ops share. `stats` are the saved statistics operands
/// with their names (mean/rstd), in operand order.
template <typename OpTy>
LogicalResult
verifyGradOp(OpTy op, ArrayRef<std::pair<Value, StringRef>> stats) {
  RankedTensorType xType = op.getX().getType();
  if (xType.getRank() < 2)
    return op.emitOpError("expects 'x' of rank >= 2 (leading dims are rows, "
                          "the trailing dim is normalised), got ")
           << xType;
  ArrayRef<int64_t> rowShape = xType.getShape().drop_back();
  int64_t hidden = xType.getShape().back();

  for (auto [value, name] : stats) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getShape().size() != rowShape.size() ||
        failed(verifyCompatibleShape(type.getShape(), rowShape)))
      return op.emitOpError() << "expects '" << name
                              << "' to be shaped like the leading dims of 'x' "
                              << xType << ", got " << type;
  }

  if (op.getDx().getType() != xType)
    return op.emitOpError() << "expects result 'dx' to have the type of 'x' "
                            << xType << ", got " << op.getDx().getType();

  // An optional affine parameter and its gradient come as a pair.
  auto verifyParam = [&](Value param, Value grad, StringRef paramName,
                         StringRef gradName) -> LogicalResult {
    if (!param && !grad)
      return success();
    if (param && !grad)
      return op.emitOpError() << "has a '" << paramName
                              << "' operand but no '" << gradName
                              << "' result";
    if (!param)
      return op.emitOpError() << "has a '" << gradName << "' result but no '"
                              << paramName << "' operand";
    auto type = cast<RankedTensorType>(param.getType());
    if (type.getRank() != 1 ||
        failed(verifyCompatibleShape(type.getShape(), {hidden})))
      return op.emitOpError()
             << "expects '" << paramName
             << "' to be 1-D with the trailing dim of 'x' " << xType
             << ", got " << type;
    if (grad.getType() != type)
      return op.emitOpError() << "expects result '" << gradName
                              << "' to have the type of '" << paramName
                              << "' " << type << ", got " << grad.getType();
    return success();
  };
  if (failed(verifyParam(op.getWeight(), op.getDweight(), "weight",
                         "dweight")) ||
      failed(verifyParam(op.getBias(), op.getDbias(), "bias", "dbias")))
    return failure();

  if (op.getZeroCenteredWeight() && !op.getWeight())
    return op.emitOpError("has 'zero_centered_weight' but no 'weight'");
  return success();
}
} // namespace

LogicalResult LayerNormGradOp::verify() {
  return verifyGradOp(*this, {{getMean(), "mean"}, {getRstd(), "rstd"}});
}

LogicalResult RMSNormGradOp::verify() {
  return verifyGradOp(*this, {{getRstd(), "rstd"}});
}

#define GET_OP_CLASSES
#include "norm/Dialect/Norm/IR/NormOps.cpp.inc"
