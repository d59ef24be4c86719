/*===- Passes.h - C API of norm-opt's passes and pipelines --------*- C -*-===*
 *
 * Part of norm-opt. Generated per pass (mlir-tblgen -gen-pass-capi-header,
 * as upstream's dialect headers in mlir-c/Dialect): mlirRegisterNormPasses(),
 * mlirRegisterNormConversionPasses(), and for each pass
 * mlirCreateNorm<Pass>() / mlirRegisterNorm<Pass>(), e.g.
 * mlirCreateNormNormFuseMixedReductions(). After
 * mlirNormRegisterPassesAndPipelines() every pass and pipeline can be named
 * in a textual pipeline (mlirParsePassPipeline,
 * mlirOpPassManagerAddPipeline): "func.func(norm-fuse-mixed-reductions)",
 * "norm-lower-to-nvvm{chip=sm_80}", ...
 *
 *===----------------------------------------------------------------------===*/

#ifndef NORM_C_PASSES_H
#define NORM_C_PASSES_H

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include "norm/Conversion/Passes.capi.h.inc"
#include "norm/Transforms/Passes.capi.h.inc"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers every norm pass and the pipelines --norm-lower-to-cpu and
   --norm-lower-to-nvvm with the global pass registry, and the upstream
   passes the pipelines name (canonicalize, cse, the conversions to NVVM and
   LLVM, ...); idempotent, thread-safe. */
MLIR_CAPI_EXPORTED void mlirNormRegisterPassesAndPipelines(void);

/* Inserts the upstream dialects norm input and norm-opt's pipelines contain
   (func, arith, math, linalg, tensor, tosa, scf, gpu, nvvm, llvm, ...) with
   the interface models the pipelines need (bufferization, NVVM target, LLVM
   IR translation) into `registry`: what norm-opt itself registers. A host
   that registers its own dialects does not need it. */
MLIR_CAPI_EXPORTED void
mlirNormRegisterUpstreamDialects(MlirDialectRegistry registry);

/* The recognition as a library (norm/Transforms/MixedReductions.h). A
   group is named by its first row reduction. */

/* Called once per group of `func` with whether it would fuse and, if not,
   why (`whyNot` is empty when it would). */
typedef void (*MlirNormGroupCallback)(MlirOperation firstRowReduction,
                                      intptr_t numMembers,
                                      MlirStringRef whyNot, void *userData);

/* Whether to fuse a group that would fuse (a host compiler's choice). */
typedef bool (*MlirNormControlGroupFn)(MlirOperation firstRowReduction,
                                       intptr_t numMembers, void *userData);

/* Reports every group of the func.func `func` to `callback` (which may be
   NULL) without changing the IR; returns how many there are. `remarks` and
   `rowOnly` are the pass's options. */
MLIR_CAPI_EXPORTED intptr_t mlirNormFindMixedReductionGroups(
    MlirOperation func, bool remarks, bool rowOnly,
    MlirNormGroupCallback callback, void *userData);

/* Fuses the groups of `func` that would fuse and that `control` accepts
   (every one when `control` is NULL); returns how many were fused. */
MLIR_CAPI_EXPORTED intptr_t mlirNormFuseMixedReductions(
    MlirOperation func, bool remarks, bool rowOnly,
    MlirNormControlGroupFn control, void *userData);

#ifdef __cplusplus
}
#endif

#endif /* NORM_C_PASSES_H */
