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

struct NormGPUPipelineOptions
    : public PassPipelineOptions<NormGPUPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("GPU architecture (sm_80, sm_90a, ...)"),
      llvm::cl::init("sm_90a")};
  PassOptions::Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX features (e.g. +ptx80)"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<int> optLevel{
      *this, "opt-level", llvm::cl::desc("LLVM optimisation level (0-3)"),
      llvm::cl::init(3)};
  PassOptions::Option<int64_t> threadsPerRow{
      *this, "threads-per-row",
      llvm::cl::desc("Lanes per row (power of two); 0 = heuristic"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> rowsPerCTA{
      *this, "rows-per-cta",
      llvm::cl::desc("Rows per CTA when a row takes < 32 lanes; 0 = heuristic"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> vectorBytes{
      *this, "vector-bytes",
      llvm::cl::desc("Bytes per global access (16, 8, 4, 2)"),
      llvm::cl::init(16)};
  PassOptions::Option<int64_t> maxResidentElements{
      *this, "max-resident-elements",
      llvm::cl::desc("Columns a lane may keep in registers; 0 = heuristic"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> prefetch{
      *this, "prefetch",
      llvm::cl::desc("Load the next row while reducing this one"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> asyncStages{
      *this, "async-stages",
      llvm::cl::desc("Rows in flight through cp.async (0: plain loads)"),
      llvm::cl::init(3)};
  PassOptions::Option<bool> singleLaunch{
      *this, "single-launch",
      llvm::cl::desc("Final reduction inside the main kernel after a grid "
                     "barrier (cooperative launch)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> programsPerSM{
      *this, "programs-per-sm",
      llvm::cl::desc("CTAs per SM; 0 = from the register estimate"),
      llvm::cl::init(0)};
};

/// --norm-lower-to-nvvm: from the input form through decompose, fusion and
/// --convert-norm-to-gpu to PTX: the kernels of `gpu.module @norm_kernels`
/// become a `gpu.binary` holding PTX (format=isa) for `chip`. The host
/// functions keep their (annotated) norm.mixed_reduction ops; `norm-opt
/// compile` turns them into C launchers.
void buildNormLowerToNVVMPipeline(OpPassManager &pm,
                                  const NormGPUPipelineOptions &options);

/// Registers the pipelines above under their names.
void registerNormPipelines();

} // namespace norm
} // namespace mlir

#endif // NORM_PIPELINES_PIPELINES_H
