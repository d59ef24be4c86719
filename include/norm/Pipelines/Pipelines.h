//===- Pipelines.h - norm-opt pass pipelines --------------------*- C++ -*-===//
//
// Part of norm-opt. The pipelines as C++ builders a host compiler calls, and
// their registration under stable names for textual pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_PIPELINES_PIPELINES_H
#define NORM_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
class OpPassManager;
namespace norm {

struct NormCPUPipelineOptions
    : public PassPipelineOptions<NormCPUPipelineOptions> {
  PassOptions::Option<int64_t> programs{
      *this, "programs",
      llvm::cl::desc("Number of programs P of the persistent row loop"),
      llvm::cl::init(8)};
};

/// --norm-lower-to-cpu: from linalg / TOSA-lowered linalg / norm ops on
/// tensors to the LLVM dialect with C interfaces (`llvm.emit_c_interface`):
/// decompose, fuse, partial accumulation, one-shot bufferization with
/// deallocation, loops, LLVM. Runs with mlir-runner or the ExecutionEngine.
void buildNormLowerToCPUPipeline(OpPassManager &pm,
                                 const NormCPUPipelineOptions &options);

/// Registers the pipelines above under their names.
void registerNormPipelines();

} // namespace norm
} // namespace mlir

#endif // NORM_PIPELINES_PIPELINES_H
