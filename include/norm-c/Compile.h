/*===- Compile.h - C API: GPU pipeline and norm-opt compile -------*- C -*-===*
 *
 * Part of norm-opt. The GPU pipeline and `norm-opt compile` on an
 * MlirModule. Options are given as text in the pipeline's option syntax,
 * "chip=sm_80 threads-per-row=8 single-launch=false" (the keys of
 * --norm-lower-to-nvvm and of `norm-opt compile`'s flags, see
 * docs/compile.md); an empty string means the defaults. Every call returns
 * success or failure; its diagnostics (errors, warnings, remarks, each with
 * its location, one per callback call, ending with a newline) go to
 * `diagnostics` when it is not NULL, else to the context's handlers.
 *
 *===----------------------------------------------------------------------===*/

#ifndef NORM_C_COMPILE_H
#define NORM_C_COMPILE_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum MlirNormEmitKind {
  MlirNormEmitPTX = 0,     /* the PTX of all kernels */
  MlirNormEmitCubin = 1,   /* a cubin (ptxas for the chip) */
  MlirNormEmitLibrary = 2, /* a shared library with C launchers; its header
                              (OUT with .h) and signature (OUT with .json)
                              are written beside it */
} MlirNormEmitKind;

/* Runs --norm-lower-to-nvvm{options} on `module` in place: fusion, the
   kernels, NVVM, a gpu.binary with PTX. */
MLIR_CAPI_EXPORTED MlirLogicalResult
mlirNormRunGPUPipeline(MlirModule module, MlirStringRef options,
                       MlirStringCallback diagnostics, void *userData);

/* What `norm-opt compile` does (mlir::norm::compileNormModule): lowers
   `module` in place and writes `output`. `options` takes the pipeline's
   keys plus ptxas=PATH, cc=PATH, runtime-library=PATH and
   keep-launcher=true. The runtime library defaults to the
   libnorm_runtime_static.a beside libNormCAPI.so, else the build tree's. */
MLIR_CAPI_EXPORTED MlirLogicalResult
mlirNormCompileModule(MlirModule module, MlirNormEmitKind emit,
                      MlirStringRef output, MlirStringRef options,
                      MlirStringCallback diagnostics, void *userData);

#ifdef __cplusplus
}
#endif

#endif /* NORM_C_COMPILE_H */
