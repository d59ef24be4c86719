//===- DeadOps.cpp - Erasing what a rewrite left unused -------------------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/Utils/DeadOps.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

void mlir::norm::eraseDeadOps(ArrayRef<Operation *> roots,
                              DenseSet<Operation *> *erased) {
  DenseSet<Operation *> gone;
  SetVector<Operation *> worklist(roots.begin(), roots.end());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    // A producer is queued again when a later user goes.
    if (gone.contains(op) || !isOpTriviallyDead(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.insert(def);
    gone.insert(op);
    if (erased)
      erased->insert(op);
    op->erase();
  }
}
