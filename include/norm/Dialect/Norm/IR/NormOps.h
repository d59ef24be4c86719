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

/// A GroupNorm-like multi-axis domain: its dims by role, each role one run
/// of consecutive dims, in one of two orders,
///   slabs contiguous (NCHW): [R..., A..., C..., D...]
///   channels last (NHWC):    [R..., D..., A..., C...]
/// R kept by the rows and summed by the columns (N), A kept by both (G),
/// C summed by the rows and kept by the columns (C/G), D summed by both
/// (the spatial dims). A row is a slab (r, a); a column slot is (a, c).
struct SlabDomain {
  bool channelsLast = false;
  int64_t rRank = 0, aRank = 0, cRank = 0, dRank = 0;
  int64_t aSize = 1, cSize = 1; // static extents of A and C
};
/// The slab domain of `domain` (extents) with row sums over `rowSumDims`
/// and column results keeping `colDims`: every role present, A and C
/// static, in one of the two orders; nullopt otherwise.
std::optional<SlabDomain> slabDomainOf(ArrayRef<int64_t> domain,
                                       ArrayRef<int64_t> rowSumDims,
                                       ArrayRef<int64_t> colDims);

} // namespace mlir::norm

#define GET_OP_CLASSES
#include "norm/Dialect/Norm/IR/NormOps.h.inc"

#endif // NORM_DIALECT_NORM_IR_NORMOPS_H
