//===- GpuOptions.h - The GPU options, their limits, one check --*- C++ -*-===//
//
// Part of norm-opt. The GPU options are declared once, as the options of
// --convert-norm-to-gpu in Passes.td; the generated struct is NormGpuOptions.
// The pipeline options and `norm-opt compile` take the same list through
// the X-macro file GpuOptions.h.inc (generated from Passes.td):
//
//   #define NORM_GPU_OPTION(field, type, argument, default, description) ...
//   #include "norm/Conversion/GpuOptions.h.inc"
//
// validateGpuOptions checks every value once, before anything runs, with
// the ranges of the chip's target description (GpuTarget.h, the one table
// of chip facts); checkKernelResources checks the kernels written for one
// op against the same description (threads and shared memory per block).
//
//===----------------------------------------------------------------------===//

#ifndef NORM_CONVERSION_GPUOPTIONS_H
#define NORM_CONVERSION_GPUOPTIONS_H

#include "norm/Conversion/NormToGPU/GpuTarget.h"
#include "norm/Conversion/Passes.h"
#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <optional>
#include <string>

namespace mlir::norm {

/// The GPU options (generated from Passes.td, convert-norm-to-gpu).
using NormGpuOptions = ConvertNormToGPUOptions;

/// Upper bounds of the size options that no chip sets (sane compile time).
constexpr int64_t kMaxResidentElementsLimit = 256;
constexpr int64_t kMaxAsyncStagesLimit = 8;
/// tier-min-cols: the range of the smallest resident tier (a multiple of
/// every vector width), and the largest tier any option makes.
constexpr int64_t kMinTierColsLimit = 16;
constexpr int64_t kMaxTierColsLimit = 65536;

/// Checks every option value. Each bad one is reported as
/// `report(argument, value, problem)`: the option's name as written on a
/// command line (`chip`), its value, and what is allowed. Fails when any is
/// bad.
LogicalResult validateGpuOptions(
    const NormGpuOptions &options,
    function_ref<void(StringRef argument, StringRef value,
                      const Twine &problem)>
        report);

/// The same, each bad value an error at `loc` naming the option.
LogicalResult validateGpuOptions(const NormGpuOptions &options, Location loc);

/// The GPU kernels need at least one column: a statically empty N (or a
/// domain with a dimension of size 0 in N) is an error at `op`.
LogicalResult checkSupportedOnGpu(MixedReductionOp op);

/// Checks one kernel written for `op` against the chip: its block size and
/// its static (workgroup attributions) plus `dynamicSharedBytes` of shared
/// memory. Errors at `op`, naming the kernel and the options to lower.
LogicalResult checkKernelResources(MixedReductionOp op, gpu::GPUFuncOp kernel,
                                   int64_t dynamicSharedBytes,
                                   const GpuTarget &target);

} // namespace mlir::norm

#endif // NORM_CONVERSION_GPUOPTIONS_H
