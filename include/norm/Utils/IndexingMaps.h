//===- IndexingMaps.h - Indexing map predicates -----------------*- C++ -*-===//
//
// Part of norm-opt. Shared by the spelling passes (--norm-propagate-reshapes,
// --norm-merge-nested-sums).
//
//===----------------------------------------------------------------------===//

#ifndef NORM_UTILS_INDEXINGMAPS_H
#define NORM_UTILS_INDEXINGMAPS_H

#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/SmallBitVector.h"

namespace mlir::norm {

/// Whether every result of `map` is a loop dim (each at most once) or the
/// constant 0 (a unit dim: keepdim statistics as importers write them,
/// `(n, g, c) -> (n, g, 0, 0)`). Upstream's isProjectedPermutation also
/// refuses more results than loops, which such maps often have.
inline bool isDimsOrZeros(AffineMap map) {
  if (map.getNumSymbols() != 0)
    return false;
  llvm::SmallBitVector seen(map.getNumDims());
  for (AffineExpr expr : map.getResults()) {
    if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
      if (seen.test(dim.getPosition()))
        return false;
      seen.set(dim.getPosition());
      continue;
    }
    auto constant = dyn_cast<AffineConstantExpr>(expr);
    if (!constant || constant.getValue() != 0)
      return false;
  }
  return true;
}

} // namespace mlir::norm

#endif // NORM_UTILS_INDEXINGMAPS_H
