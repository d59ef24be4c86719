//===- GroupBoundary.h - What sits at the edge of a fused group -*- C++ -*-===//
//
// Part of norm-opt. The ops just outside a norm.mixed_reduction that its
// kernels absorb (a column result's narrowing epilogue, a column initial
// value's widening prologue, the 0-d scalars its payloads read): the GPU
// lowering, the launcher writer and --norm-outline-groups agree on them.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_GROUPBOUNDARY_H
#define NORM_DIALECT_NORM_IR_GROUPBOUNDARY_H

#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <optional>

namespace mlir::norm {

/// The elementwise epilogue of a column result that the final kernel
/// absorbs (the narrowing truncf of dW/dB): its only use, an all-parallel
/// linalg.generic (identity maps over the result's dims) reading just that
/// result into a fresh tensor.empty.
linalg::GenericOp getColumnEpilogue(Value colResult);

/// The elementwise prologue of a column initial value that the final
/// reduction absorbs (the extf of a 16-bit previous gradient that dW/dB
/// accumulate into): `init` defined by an all-parallel linalg.generic of one
/// input into a fresh tensor.empty, identity maps, a body of scalar ops and
/// constants. The kernels then read the prologue's input and apply its body.
linalg::GenericOp getColumnInitPrologue(Value init);

/// Scalars the op's payloads read from 0-d tensors defined outside it
/// (`tensor.extract %scale[]`, e.g. a loss scale): each becomes a pointer
/// parameter of the main kernel, after the others, in this order.
SmallVector<tensor::ExtractOp> getCapturedScalars(MixedReductionOp op);

/// The constant a column result starts from when `init` is a linalg.fill of
/// a constant (zeros), else nullopt (the init is then read from memory).
std::optional<Attribute> getConstantColumnInit(Value init);

} // namespace mlir::norm

#endif // NORM_DIALECT_NORM_IR_GROUPBOUNDARY_H
