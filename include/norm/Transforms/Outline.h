//===- Outline.h - One function per fused norm group ------------*- C++ -*-===//
//
// Part of norm-opt. What --norm-outline-groups does, for one function, as a
// call a host compiler (and `norm-opt compile`) can make.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_TRANSFORMS_OUTLINE_H
#define NORM_TRANSFORMS_OUTLINE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::norm {

/// The attribute an outlined function carries: the name of the function it
/// came from.
inline constexpr llvm::StringLiteral kOutlinedAttrName = "norm.outlined_from";

/// Outlines every norm.mixed_reduction of `host` into a function named
/// `<host>_group<i>` (renamed on a clash), inserted after `host`, whose
/// arguments are exactly the group's inputs and whose results are exactly
/// its results, and replaces the group by a func.call. Fails with a
/// diagnostic, changing nothing, when a payload reads a value from above
/// that is neither a constant, a 0-d tensor's element nor a dim of an input.
FailureOr<SmallVector<func::FuncOp>> outlineNormGroups(func::FuncOp host,
                                                       SymbolTable &symbols);

} // namespace mlir::norm

#endif // NORM_TRANSFORMS_OUTLINE_H
