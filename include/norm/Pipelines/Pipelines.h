//===- Pipelines.h - norm-opt pass pipelines --------------------*- C++ -*-===//
//
// Part of norm-opt. The pipelines as C++ builders a host compiler calls, and
// their registration under stable names for textual pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_PIPELINES_PIPELINES_H
#define NORM_PIPELINES_PIPELINES_H

#include "norm/Conversion/GpuOptions.h"

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

/// The options of --norm-lower-to-nvvm: the GPU options of
/// convert-norm-to-gpu (Passes.td), the same names, defaults and help.
struct NormGPUPipelineOptions
    : public PassPipelineOptions<NormGPUPipelineOptions> {
#define NORM_GPU_OPTION(field, type, argument, initial, description)             \
  PassOptions::Option<type> field{*this, argument, llvm::cl::desc(description), \
                                  llvm::cl::init(initial)};
#include "norm/Conversion/GpuOptions.h.inc"

  /// The values, as the struct the builder and compileNormModule take.
  NormGpuOptions getOptions() const;
};

/// --norm-lower-to-nvvm: from the input form through decompose, fusion and
/// --convert-norm-to-gpu to PTX: the kernels of `gpu.module @norm_kernels`
/// become a `gpu.binary` holding PTX (format=isa) for `chip`. The host
/// functions keep their (annotated) norm.mixed_reduction ops; `norm-opt
/// compile` turns them into C-ABI launchers (host IR, `HostLaunch.h`). The options must have passed
/// validateGpuOptions (GpuOptions.h); the registered pipeline checks them
/// when its text is parsed.
void buildNormLowerToNVVMPipeline(OpPassManager &pm,
                                  const NormGpuOptions &options);

/// The two halves of --norm-lower-to-nvvm, for a host that works between
/// them (`norm-opt compile` outlines groups there):
///  - the front: TOSA to linalg, --norm-decompose,
///    --norm-fuse-mixed-reductions, canonicalize, cse;
///  - the back: --convert-norm-to-gpu and the NVVM passes to the gpu.binary.
void buildNormFusePipeline(OpPassManager &pm);
void buildNormGPUToBinaryPipeline(OpPassManager &pm,
                                  const NormGpuOptions &options);

/// Registers the pipelines above under their names.
void registerNormPipelines();

} // namespace norm
} // namespace mlir

#endif // NORM_PIPELINES_PIPELINES_H
