/*===- norm-capi-test.c - The norm-opt C API, from C --------------*- C -*-===*
 *
 * Part of norm-opt. A C host: registers the dialects (the norm dialect
 * through its handle), parses IR, runs the fusion through a textual
 * pipeline and through a pass created by the generated C API, prints the
 * module, and drives the GPU pipeline and compile with good and bad
 * options. Output checked by test/CAPI/capi.test (FileCheck).
 * usage: norm-capi-test OUT.ptx OUT.so
 *
 *===----------------------------------------------------------------------===*/

#include "norm-c/Compile.h"
#include "norm-c/Dialect/Norm.h"
#include "norm-c/Passes.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *kInput =
    "func.func @rms(%dy: tensor<?x256xf32>, %x: tensor<?x256xf32>,\n"
    "               %rstd: tensor<?xf32>, %w: tensor<256xf32>)\n"
    "    -> (tensor<?x256xf32>, tensor<256xf32>) {\n"
    "  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : "
    "tensor<256xf32>)\n"
    "      : tensor<?x256xf32>, tensor<?xf32> -> tensor<?x256xf32>, "
    "tensor<256xf32>\n"
    "  return %dx, %dw : tensor<?x256xf32>, tensor<256xf32>\n"
    "}\n";

/* Callback user data: the prefix of each diagnostic line. */
static char kGPUPipeline[] = "gpu-pipeline";
static char kCompile[] = "compile";

static void printToStdout(MlirStringRef text, void *userData) {
  (void)userData;
  fwrite(text.data, 1, text.length, stdout);
}

static void printDiagnostic(MlirStringRef text, void *userData) {
  fprintf(stdout, "%s diagnostic: ", (const char *)userData);
  fwrite(text.data, 1, text.length, stdout);
}

/* mlirNormFindMixedReductionGroups's callback: one line per group. */
static void printGroup(MlirOperation firstRowReduction, intptr_t numMembers,
                       MlirStringRef whyNot, void *userData) {
  (void)userData;
  MlirIdentifier name = mlirOperationGetName(firstRowReduction);
  MlirStringRef text = mlirIdentifierStr(name);
  printf("group: %.*s, %d members, %s%.*s\n", (int)text.length, text.data,
         (int)numMembers, whyNot.length ? "would not fuse: " : "would fuse",
         (int)whyNot.length, whyNot.data);
}

/* A control function that declines every group. */
static bool declineGroup(MlirOperation firstRowReduction, intptr_t numMembers,
                         void *userData) {
  (void)firstRowReduction;
  (void)numMembers;
  (void)userData;
  return false;
}

static MlirModule parse(MlirContext ctx) {
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kInput));
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "parse failed\n");
    exit(1);
  }
  return module;
}

static int countMixedReductions(MlirOperation op) {
  int n = mlirNormOperationIsMixedReduction(op) ? 1 : 0;
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r) {
    MlirRegion region = mlirOperationGetRegion(op, r);
    for (MlirBlock b = mlirRegionGetFirstBlock(region); !mlirBlockIsNull(b);
         b = mlirBlockGetNextInRegion(b))
      for (MlirOperation o = mlirBlockGetFirstOperation(b);
           !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o))
        n += countMixedReductions(o);
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: norm-capi-test OUT.ptx OUT.so\n");
    return 2;
  }
  MlirDialectHandle norm = mlirGetDialectHandle__norm__();
  MlirStringRef ns = mlirDialectHandleGetNamespace(norm);
  printf("dialect: %.*s\n", (int)ns.length, ns.data);
  // CHECK-LABEL: dialect: norm

  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirNormRegisterUpstreamDialects(registry);
  mlirDialectHandleInsertDialect(norm, registry);
  MlirContext ctx = mlirContextCreate();
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirNormRegisterPassesAndPipelines();

  /* A textual pipeline naming our passes. */
  MlirModule module = parse(ctx);
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirLogicalResult st = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(pm),
      mlirStringRefCreateFromCString(
          "builtin.module(func.func(norm-decompose,"
          "norm-fuse-mixed-reductions))"),
      printToStdout, NULL);
  if (mlirLogicalResultIsFailure(st))
    return 1;
  st = mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
  printf("textual pipeline: %s, %d norm.mixed_reduction\n",
         mlirLogicalResultIsSuccess(st) ? "ok" : "failed",
         countMixedReductions(mlirModuleGetOperation(module)));
  mlirOperationPrint(mlirModuleGetOperation(module), printToStdout, NULL);
  printf("\n");
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  // CHECK: textual pipeline: ok, 1 norm.mixed_reduction
  // CHECK-LABEL: func.func @rms
  // CHECK: norm.mixed_reduction
  // CHECK-NOT: linalg.generic
  // CHECK: return

  /* The same through the generated per-pass C API. */
  module = parse(ctx);
  pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager fpm = mlirPassManagerGetNestedUnder(
      pm, mlirStringRefCreateFromCString("func.func"));
  mlirOpPassManagerAddOwnedPass(fpm, mlirCreateNormNormDecompose());
  mlirOpPassManagerAddOwnedPass(fpm, mlirCreateNormNormFuseMixedReductions());
  st = mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
  printf("created passes: %s, %d norm.mixed_reduction\n",
         mlirLogicalResultIsSuccess(st) ? "ok" : "failed",
         countMixedReductions(mlirModuleGetOperation(module)));
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  // CHECK: created passes: ok, 1 norm.mixed_reduction

  /* The recognition as a library: find the groups, then fuse under a
     control function that declines, then without one. */
  module = parse(ctx);
  pm = mlirPassManagerCreate(ctx);
  fpm = mlirPassManagerGetNestedUnder(
      pm, mlirStringRefCreateFromCString("func.func"));
  mlirOpPassManagerAddOwnedPass(fpm, mlirCreateNormNormDecompose());
  st = mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
  mlirPassManagerDestroy(pm);
  MlirOperation func =
      mlirBlockGetFirstOperation(mlirModuleGetBody(module));
  intptr_t groups = mlirNormFindMixedReductionGroups(func, false, false,
                                                     printGroup, NULL);
  printf("groups: %d, %d norm.mixed_reduction\n", (int)groups,
         countMixedReductions(mlirModuleGetOperation(module)));
  intptr_t fused = mlirNormFuseMixedReductions(func, false, false,
                                               declineGroup, NULL);
  printf("declined: %d fused, %d norm.mixed_reduction\n", (int)fused,
         countMixedReductions(mlirModuleGetOperation(module)));
  fused = mlirNormFuseMixedReductions(func, false, false, NULL, NULL);
  printf("no control: %d fused, %d norm.mixed_reduction\n", (int)fused,
         countMixedReductions(mlirModuleGetOperation(module)));
  mlirModuleDestroy(module);
  // CHECK: group: linalg.generic, {{[0-9]+}} members, would fuse
  // CHECK: groups: 1, 0 norm.mixed_reduction
  // CHECK: declined: 0 fused, 0 norm.mixed_reduction
  // CHECK: no control: 1 fused, 1 norm.mixed_reduction

  /* Bad options: a failure and a diagnostic, no crash. */
  module = parse(ctx);
  st = mlirNormRunGPUPipeline(
      module, mlirStringRefCreateFromCString("chip=sm_90a no-such-key=1"),
      printDiagnostic, kGPUPipeline);
  printf("gpu pipeline, bad option: %s\n",
         mlirLogicalResultIsFailure(st) ? "failed" : "succeeded");
  // CHECK: gpu-pipeline diagnostic: {{.*}}error: invalid options 'chip=sm_90a no-such-key=1': {{.*}}no-such-key
  // CHECK: gpu pipeline, bad option: failed

  /* The GPU pipeline: a gpu.binary for the chip. */
  st = mlirNormRunGPUPipeline(
      module, mlirStringRefCreateFromCString("chip=sm_80 opt-level=2"),
      printDiagnostic, kGPUPipeline);
  printf("gpu pipeline: %s\n",
         mlirLogicalResultIsSuccess(st) ? "ok" : "failed");
  mlirOperationPrint(mlirModuleGetOperation(module), printToStdout, NULL);
  printf("\n");
  mlirModuleDestroy(module);
  // CHECK: gpu pipeline: ok
  // CHECK: gpu.binary @norm_kernels
  // CHECK-SAME: chip = "sm_80"

  /* compile: no output path, then PTX to argv[1]. */
  module = parse(ctx);
  st = mlirNormCompileModule(module, MlirNormEmitPTX,
                             mlirStringRefCreateFromCString(""),
                             mlirStringRefCreateFromCString(""),
                             printDiagnostic, kCompile);
  printf("compile, no output: %s\n",
         mlirLogicalResultIsFailure(st) ? "failed" : "succeeded");
  // CHECK: compile diagnostic: {{.*}}error: compile: an output path is required
  // CHECK: compile, no output: failed
  st = mlirNormCompileModule(module, MlirNormEmitPTX,
                             mlirStringRefCreateFromCString(argv[1]),
                             mlirStringRefCreateFromCString("chip=sm_90a"),
                             printDiagnostic, kCompile);
  printf("compile ptx: %s\n", mlirLogicalResultIsSuccess(st) ? "ok" : "failed");
  mlirModuleDestroy(module);
  // CHECK: compile ptx: ok

  /* A library (the runtime found beside libNormCAPI.so), its header and
     signature written beside it (argv[2]). */
  module = parse(ctx);
  st = mlirNormCompileModule(module, MlirNormEmitLibrary,
                             mlirStringRefCreateFromCString(argv[2]),
                             mlirStringRefCreateFromCString("keep-launcher=1"),
                             printDiagnostic, kCompile);
  printf("compile lib: %s\n", mlirLogicalResultIsSuccess(st) ? "ok" : "failed");
  mlirModuleDestroy(module);
  // CHECK: compile lib: ok

  mlirContextDestroy(ctx);
  printf("done\n");
  // CHECK: done
  return 0;
}
