/*===- embed-norm-c.c - A C host running norm-opt through its C API -------===*
 *
 * Part of norm-opt. Registers the norm dialect (its handle) and the upstream
 * dialects its input uses, parses a module, runs the fusion from a textual
 * pipeline, prints the result. Exits non-zero if anything fails.
 *
 *===----------------------------------------------------------------------===*/

#include "norm-c/Dialect/Norm.h"
#include "norm-c/Passes.h"

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <stdio.h>

static const char *kInput =
    "func.func @rms(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>,\n"
    "               %rstd: tensor<?xf32>, %w: tensor<64xbf16>)\n"
    "    -> (tensor<?x64xbf16>, tensor<64xbf16>) {\n"
    "  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : "
    "tensor<64xbf16>)\n"
    "      : tensor<?x64xbf16>, tensor<?xf32> -> tensor<?x64xbf16>, "
    "tensor<64xbf16>\n"
    "  return %dx, %dw : tensor<?x64xbf16>, tensor<64xbf16>\n"
    "}\n";

static void print(MlirStringRef text, void *userData) {
  fwrite(text.data, 1, text.length, (FILE *)userData);
}

int main(void) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirNormRegisterUpstreamDialects(registry);
  mlirDialectHandleInsertDialect(mlirGetDialectHandle__norm__(), registry);
  MlirContext ctx = mlirContextCreate();
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirNormRegisterPassesAndPipelines();

  int status = 1;
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kInput));
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  if (!mlirModuleIsNull(module) &&
      mlirLogicalResultIsSuccess(mlirParsePassPipeline(
          mlirPassManagerGetAsOpPassManager(pm),
          mlirStringRefCreateFromCString("builtin.module(func.func("
                                         "norm-decompose,"
                                         "norm-fuse-mixed-reductions))"),
          print, stderr)) &&
      mlirLogicalResultIsSuccess(
          mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)))) {
    mlirOperationPrint(mlirModuleGetOperation(module), print, stdout);
    printf("\n");
    status = 0;
  }
  mlirPassManagerDestroy(pm);
  if (!mlirModuleIsNull(module))
    mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  return status;
}
