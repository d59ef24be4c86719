/*===- Norm.h - C API of the norm dialect -------------------------*- C -*-===*
 *
 * Part of norm-opt. The dialect handle, as upstream dialects and CIRCT /
 * torch-mlir publish theirs: register it with
 *   mlirDialectHandleRegisterDialect(mlirGetDialectHandle__norm__(), ctx);
 * or insert it into a registry with mlirDialectHandleInsertDialect.
 *
 *===----------------------------------------------------------------------===*/

#ifndef NORM_C_DIALECT_NORM_H
#define NORM_C_DIALECT_NORM_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Norm, norm);

/* True for a `norm.mixed_reduction` op (what --norm-fuse-mixed-reductions
   produces). */
MLIR_CAPI_EXPORTED bool mlirNormOperationIsMixedReduction(MlirOperation op);

#ifdef __cplusplus
}
#endif

#endif /* NORM_C_DIALECT_NORM_H */
