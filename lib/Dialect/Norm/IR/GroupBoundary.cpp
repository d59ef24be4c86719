//===- GroupBoundary.cpp - What sits at the edge of a fused group ---------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/GroupBoundary.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <functional>

using namespace mlir;
using namespace mlir::norm;

/// An all-parallel linalg.generic (1-D, or over a multi-axis op's column
/// dims: [B, N]) of one input into a fresh tensor.empty, identity maps, a
/// body of scalar ops that reads only its input and constants: an
/// elementwise map the final reduction can apply per column.
static bool isColumnMap(linalg::GenericOp generic) {
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getNumDpsInits() != 1 || generic.getNumLoops() < 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      generic->getNumResults() != 1 ||
      !generic.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>())
    return false;
  for (AffineMap map : generic.getIndexingMapsArray())
    if (!map.isIdentity())
      return false;
  Block &body = generic.getRegion().front();
  if (!body.getArgument(1).use_empty())
    return false;
  // Only scalar ops of the body and constants: nothing captured from above.
  for (Operation &inner : body.without_terminator()) {
    if (inner.getNumRegions() != 0)
      return false;
    for (Value operand : inner.getOperands())
      if (operand.getParentBlock() != &body &&
          !matchPattern(operand, m_Constant()))
        return false;
  }
  return true;
}

linalg::GenericOp mlir::norm::getColumnEpilogue(Value colResult) {
  if (!colResult.hasOneUse())
    return {};
  auto generic = dyn_cast<linalg::GenericOp>(*colResult.getUsers().begin());
  if (!isColumnMap(generic) ||
      generic.getDpsInputOperand(0)->get() != colResult)
    return {};
  return generic;
}

linalg::GenericOp mlir::norm::getColumnInitPrologue(Value init) {
  auto generic = init.getDefiningOp<linalg::GenericOp>();
  if (!isColumnMap(generic) ||
      !isa<FloatType>(generic.getRegion().front().getArgument(0).getType()))
    return {};
  return generic;
}

std::optional<Attribute> mlir::norm::getConstantColumnInit(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return std::nullopt;
  Attribute value;
  if (!matchPattern(fill.getInputs()[0], m_Constant(&value)))
    return std::nullopt;
  return value;
}

SmallVector<tensor::ExtractOp>
mlir::norm::getCapturedScalars(MixedReductionOp op) {
  SmallVector<tensor::ExtractOp> scalars;
  llvm::SmallPtrSet<Operation *, 4> seen;
  // Through pure arithmetic on them too (e.g. 1 / scale).
  std::function<void(Value)> visit = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (!def || op->isAncestor(def) || !seen.insert(def).second)
      return;
    if (auto extract = dyn_cast<tensor::ExtractOp>(def)) {
      if (cast<RankedTensorType>(extract.getTensor().getType()).getRank() == 0)
        scalars.push_back(extract);
      return;
    }
    if (isa<arith::ArithDialect>(def->getDialect()))
      for (Value operand : def->getOperands())
        visit(operand);
  };
  for (Region &region : op->getRegions())
    region.walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        visit(operand);
    });
  return scalars;
}
