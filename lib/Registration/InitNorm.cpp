//===- InitNorm.cpp - Register norm-opt with a host compiler --------------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/InitNorm.h"

#include "norm/Conversion/Passes.h"
#include "norm/Dialect/Norm/IR/NormDialect.h"
#include "norm/Pipelines/Pipelines.h"
#include "norm/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"

#include <mutex>

void mlir::norm::registerNormDialect(DialectRegistry &registry) {
  registry.insert<NormDialect>();
}

void mlir::norm::registerNormPassesAndPipelines() {
  // Hosts may call this from several places; register once.
  static std::once_flag once;
  std::call_once(once, [] {
    registerNormPasses();
    registerNormConversionPasses();
    registerNormPipelines();
  });
}
