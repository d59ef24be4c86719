//===- Pipelines.cpp - norm-opt pass pipelines ----------------------------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/Pipelines/Pipelines.h"

#include "norm/Conversion/Passes.h"
#include "norm/Transforms/Passes.h"

#include "mlir/Conversion/TosaToArith/TosaToArith.h"
#include "mlir/Conversion/TosaToLinalg/TosaToLinalg.h"
#include "mlir/Conversion/TosaToTensor/TosaToTensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

namespace {
/// Appends an upstream stage given as pipeline text. The texts are fixed and
/// covered by the tests; a failure is a build/LLVM-version mismatch.
void addUpstream(OpPassManager &pm, StringRef text) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  if (failed(parsePassPipeline(text, pm, os)))
    llvm::report_fatal_error(llvm::Twine("norm-opt: upstream pipeline '") +
                             text + "' did not parse: " + errors);
}
/// TOSA input to linalg on tensors (a no-op on functions without TOSA).
void addTosaToLinalg(OpPassManager &pm) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(tosa::createTosaToLinalgNamed());
  fn.addPass(tosa::createTosaToLinalg());
  fn.addPass(createTosaToArithPass());
  fn.addPass(createTosaToTensorPass());
}

// GroupNorm as torch decomposes it (reshapes between the steps, sums of
// per-channel sums) to the one domain recognition fuses.
void addSpellingPasses(OpPassManager &pm) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(norm::createNormPropagateReshapes());
  fn.addPass(norm::createNormMergeNestedSums());
}
} // namespace

void norm::buildNormLowerToCPUPipeline(OpPassManager &pm,
                                       const NormCPUPipelineOptions &options) {
  addTosaToLinalg(pm);
  pm.addPass(createNormDecompose());
  addSpellingPasses(pm);
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createNormFuseMixedReductions());
  fn.addPass(createNormPartialAccumulate(
      NormPartialAccumulateOptions{options.programs}));
  addUpstream(pm, "canonicalize,cse");
  // Tensors to buffers: function boundaries too, with identity layouts so
  // the C interface takes plain strided memrefs; then deallocation.
  addUpstream(pm, "one-shot-bufferize{bufferize-function-boundaries "
                  "function-boundary-type-conversion=identity-layout-map}");
  // Deallocation may return clones (e.g. dW accumulated into an argument's
  // buffer): lower them too.
  addUpstream(pm, "buffer-deallocation-pipeline,convert-bufferization-to-memref");
  // The programs run one after the other on the CPU (a reference path).
  addUpstream(pm, "func.func(scf-forall-to-for),convert-linalg-to-loops,"
                  "canonicalize,cse,expand-strided-metadata,lower-affine,"
                  "convert-scf-to-cf,finalize-memref-to-llvm");
  // bf16 conversions as integer ops: no __truncsfbf2 libcall needed.
  addUpstream(pm, "arith-expand{include-bf16=true},convert-math-to-llvm,"
                  "convert-arith-to-llvm,func.func(llvm-request-c-wrappers),"
                  "convert-func-to-llvm,convert-cf-to-llvm,"
                  "reconcile-unrealized-casts");
}

void norm::buildNormLowerToNVVMPipeline(OpPassManager &pm,
                                        const NormGpuOptions &options) {
  buildNormFusePipeline(pm);
  buildNormGPUToBinaryPipeline(pm, options);
}

void norm::buildNormFusePipeline(OpPassManager &pm) {
  addTosaToLinalg(pm);
  pm.addPass(createNormDecompose());
  addSpellingPasses(pm);
  // Of the multi-axis groups, those the GPU lowering takes fuse (adaLN's
  // batched rows, GroupNorm's slabs); any other stays as written (the CPU
  // pipeline fuses them all).
  NormFuseMixedReductionsOptions fuse;
  fuse.multiAxis = "gpu";
  pm.nest<func::FuncOp>().addPass(createNormFuseMixedReductions(fuse));
  addUpstream(pm, "canonicalize,cse");
}

/// The CUDA toolkit whose nvvm/libdevice upstream's serializer links into
/// the GPU module (math.rsqrt of a recomputed statistic becomes a call of
/// __nv_rsqrtf, which ptxas cannot resolve alone). Upstream looks only at
/// $CUDA_ROOT, $CUDA_HOME and $CUDA_PATH (its build's default is empty in
/// Debian's packages); a training machine often sets none. So: those, then
/// the toolkit norm-opt was built against, then /usr/local/cuda -- the
/// first that has libdevice, else "" (upstream's own search).
static std::string findLibdeviceToolkit() {
  auto hasLibdevice = [](llvm::StringRef dir) {
    if (dir.empty())
      return false;
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, "nvvm", "libdevice", "libdevice.10.bc");
    return llvm::sys::fs::exists(path);
  };
  for (const char *env : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *dir = std::getenv(env); dir && hasLibdevice(dir))
      return dir;
  for (llvm::StringRef dir : {llvm::StringRef(NORM_BUILD_CUDA_TOOLKIT),
                              llvm::StringRef("/usr/local/cuda")})
    if (hasLibdevice(dir))
      return dir.str();
  return "";
}

void norm::buildNormGPUToBinaryPipeline(OpPassManager &pm,
                                        const NormGpuOptions &options) {
  pm.addPass(createConvertNormToGPU(options));
  addUpstream(pm, (llvm::Twine("nvvm-attach-target{chip=") + options.chip +
                   " features=" + options.features +
                   " O=" + llvm::Twine(options.optLevel) + "}")
                      .str());
  // convert-nvvm-to-llvm: the NVVM ops without an LLVM intrinsic (the bulk
  // ring's mbarrier wait loop) become inline PTX.
  addUpstream(pm, "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,"
                  "convert-nvvm-to-llvm,canonicalize,cse,"
                  "reconcile-unrealized-casts)");
  std::string toolkit = findLibdeviceToolkit();
  // Pass options end at a space; such a path is left to upstream's search.
  if (toolkit.find(' ') != std::string::npos)
    toolkit.clear();
  addUpstream(pm, "gpu-module-to-binary{format=isa" +
                      (toolkit.empty() ? "" : " toolkit=" + toolkit) + "}");
}

norm::NormGpuOptions norm::NormGPUPipelineOptions::getOptions() const {
  NormGpuOptions options;
#define NORM_GPU_OPTION(field, type, argument, initial, description)             \
  options.field = field;
#include "norm/Conversion/GpuOptions.h.inc"
  return options;
}

void norm::registerNormPipelines() {
  // Registered by hand (not PassPipelineRegistration) to check the option
  // values when the pipeline text is parsed, before anything runs.
  registerPassPipeline(
      "norm-lower-to-nvvm",
      "Fuse norm backward functions and turn their kernels into PTX "
      "(gpu.binary); host functions keep the annotated fused ops",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        NormGPUPipelineOptions parsed;
        if (failed(parsed.parseFromString(text)))
          return failure();
        NormGpuOptions options = parsed.getOptions();
        std::string problems;
        if (failed(validateGpuOptions(
                options, [&](StringRef argument, StringRef value,
                             const Twine &problem) {
                  problems += (Twine(problems.empty() ? "" : "; ") +
                               "invalid option '" + argument + "=" + value +
                               "' of norm-lower-to-nvvm: " + problem)
                                  .str();
                })))
          return errorHandler(problems);
        buildNormLowerToNVVMPipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(NormGPUPipelineOptions());
      });
  PassPipelineRegistration<NormCPUPipelineOptions>(
      "norm-lower-to-cpu",
      "Fuse, partially accumulate, bufferize and lower norm backward "
      "functions to the LLVM dialect with C interfaces (the CPU reference "
      "path)",
      buildNormLowerToCPUPipeline);
}
