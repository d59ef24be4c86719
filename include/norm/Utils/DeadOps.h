//===- DeadOps.h - Erasing what a rewrite left unused -----------*- C++ -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_UTILS_DEADOPS_H
#define NORM_UTILS_DEADOPS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::norm {

/// Erases each op of `roots` that is trivially dead, then, transitively, the
/// producers of their operands that become so (fills, empties, reshapes,
/// constants only they used). `erased`, if given, records every erased op.
void eraseDeadOps(ArrayRef<Operation *> roots,
                  DenseSet<Operation *> *erased = nullptr);

} // namespace mlir::norm

#endif // NORM_UTILS_DEADOPS_H
