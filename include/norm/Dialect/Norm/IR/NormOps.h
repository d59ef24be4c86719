//===- NormOps.h - norm dialect ops -----------------------------*- C++ -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_NORMOPS_H
#define NORM_DIALECT_NORM_IR_NORMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "norm/Dialect/Norm/IR/NormAttrs.h"
#include "norm/Dialect/Norm/IR/NormDialect.h"

namespace mlir::norm {

/// The batch rank k of a multi-axis domain of `rank` dims whose row sums
/// run over `rowSumDims` and whose column results keep `colDims`, when it
/// is batched rows: the row sums over the last dim (N) only, the column
/// results indexed by the leading dims [0, k) and N, with at least one row
/// dim between (adaLN over x [B, S, N]: k = 1, a 2-D [S, N] problem per
/// sample). 0 for any other domain.
int64_t batchedRowsRank(int64_t rank, ArrayRef<int64_t> rowSumDims,
                        ArrayRef<int64_t> colDims);

} // namespace mlir::norm

#define GET_OP_CLASSES
#include "norm/Dialect/Norm/IR/NormOps.h.inc"

#endif // NORM_DIALECT_NORM_IR_NORMOPS_H
