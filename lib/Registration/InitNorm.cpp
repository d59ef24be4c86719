//===- InitNorm.cpp - Register norm-opt with a host compiler --------------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/InitNorm.h"

#include "norm/Dialect/Norm/IR/NormDialect.h"
#include "norm/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"

void mlir::norm::registerNormDialect(DialectRegistry &registry) {
  registry.insert<NormDialect>();
}

void mlir::norm::registerNormPassesAndPipelines() { registerNormPasses(); }
