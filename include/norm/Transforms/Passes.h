//===- Passes.h - norm-opt transformation passes ----------------*- C++ -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_TRANSFORMS_PASSES_H
#define NORM_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"
#include "norm/Dialect/Norm/IR/NormDialect.h"

namespace mlir {
class RewritePatternSet;
namespace norm {

#define GEN_PASS_DECL
#include "norm/Transforms/Passes.h.inc"

/// Patterns that lower norm.layer_norm_grad / norm.rms_norm_grad to linalg on
/// tensors (what --norm-decompose applies), for pipelines that drive their
/// own rewrites.
void populateNormDecomposePatterns(RewritePatternSet &patterns);

/// The rewrites of --norm-propagate-reshapes (generics over their
/// reshapes' finer dims, with upstream's reshape folds).
void populateNormPropagateReshapesPatterns(RewritePatternSet &patterns);

/// The rewrite of --norm-merge-nested-sums (a value linear in sums as one
/// sum over both sets of dims).
void populateNormMergeNestedSumsPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "norm/Transforms/Passes.h.inc"

} // namespace norm
} // namespace mlir

#endif // NORM_TRANSFORMS_PASSES_H
