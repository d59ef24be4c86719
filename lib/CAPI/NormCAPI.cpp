//===- NormCAPI.cpp - C API of norm-opt -----------------------------------===//
//
// Part of norm-opt. include/norm-c/: the dialect handle, the generated pass
// registration, the GPU pipeline and compileNormModule. Options arrive as
// text and are parsed by the pipeline's own option parser (so the C ABI does
// not change when an option is added); mlirNormCompileModule is the one
// place that copies them into CompileOptions.
//
//===----------------------------------------------------------------------===//

#include "norm-c/Compile.h"
#include "norm-c/Dialect/Norm.h"
#include "norm-c/Passes.h"

#include "norm/Compile/Compile.h"
#include "norm/Conversion/GpuOptions.h"
#include "norm/Conversion/Passes.h"
#include "norm/Dialect/Norm/IR/NormDialect.h"
#include "norm/Dialect/Norm/IR/NormOps.h"
#include "norm/InitNorm.h"
#include "norm/Pipelines/Pipelines.h"
#include "norm/RegisterUpstream.h"
#include "norm/Transforms/MixedReductions.h"
#include "norm/Transforms/Passes.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <dlfcn.h>
#include <mutex>
#include <optional>

using namespace mlir;
using namespace mlir::norm;

//===----------------------------------------------------------------------===//
// Dialect and passes.
//===----------------------------------------------------------------------===//

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Norm, norm, mlir::norm::NormDialect)

bool mlirNormOperationIsMixedReduction(MlirOperation op) {
  return isa<MixedReductionOp>(unwrap(op));
}

// mlirRegisterNorm*Passes, mlirCreateNorm<Pass>, mlirRegisterNorm<Pass>.
#include "norm/Conversion/Passes.capi.cpp.inc"
#include "norm/Transforms/Passes.capi.cpp.inc"

void mlirNormRegisterPassesAndPipelines(void) {
  // Our pipelines name upstream passes in text (canonicalize, cse, ...).
  static std::once_flag once;
  std::call_once(once, registerUpstreamPasses);
  registerNormPassesAndPipelines();
}

void mlirNormRegisterUpstreamDialects(MlirDialectRegistry registry) {
  registerUpstreamDialects(*unwrap(registry));
}

//===----------------------------------------------------------------------===//
// The recognition as a library.
//===----------------------------------------------------------------------===//

static norm::MixedReductionOptions fuseOptions(bool remarks, bool rowOnly) {
  norm::MixedReductionOptions options;
  options.remarks = remarks;
  options.rowOnly = rowOnly;
  return options;
}

intptr_t mlirNormFindMixedReductionGroups(MlirOperation func, bool remarks,
                                          bool rowOnly,
                                          MlirNormGroupCallback callback,
                                          void *userData) {
  auto fn = dyn_cast<func::FuncOp>(unwrap(func));
  if (!fn)
    return 0;
  std::vector<norm::MixedReductionGroup> groups =
      norm::findMixedReductionGroups(fn, fuseOptions(remarks, rowOnly));
  if (callback)
    for (const norm::MixedReductionGroup &g : groups)
      callback(wrap(g.rowReductions.empty() ? g.members.front()
                                            : g.rowReductions.front()),
               intptr_t(g.members.size()),
               mlirStringRefCreate(g.whyNot.data(), g.whyNot.size()),
               userData);
  return intptr_t(groups.size());
}

intptr_t mlirNormFuseMixedReductions(MlirOperation func, bool remarks,
                                     bool rowOnly,
                                     MlirNormControlGroupFn control,
                                     void *userData) {
  auto fn = dyn_cast<func::FuncOp>(unwrap(func));
  if (!fn)
    return 0;
  norm::ControlMixedReductionFn accept;
  if (control)
    accept = [&](const norm::MixedReductionGroup &g) {
      return control(wrap(g.rowReductions.front()),
                     intptr_t(g.members.size()), userData);
    };
  return intptr_t(
      norm::fuseMixedReductions(fn, fuseOptions(remarks, rowOnly), accept)
          .size());
}

//===----------------------------------------------------------------------===//
// GPU pipeline and compile.
//===----------------------------------------------------------------------===//

namespace {

/// While alive, hands each diagnostic of `context` to `callback` as text
/// ("LOC: error: message\n" and its notes, without the op dump the context
/// may attach); with no callback it leaves the context's handlers alone.
class CallbackDiagnostics {
public:
  CallbackDiagnostics(MLIRContext *context, MlirStringCallback callback,
                      void *userData)
      : context(context), printedOp(context->shouldPrintOpOnDiagnostic()) {
    if (!callback)
      return;
    context->printOpOnDiagnostic(false);
    handler.emplace(context, [=](Diagnostic &diag) {
      std::string text;
      llvm::raw_string_ostream os(text);
      print(os, diag);
      for (Diagnostic &note : diag.getNotes())
        print(os, note);
      callback(wrap(StringRef(text)), userData);
      return success();
    });
  }

  ~CallbackDiagnostics() { context->printOpOnDiagnostic(printedOp); }

private:
  static void print(llvm::raw_ostream &os, Diagnostic &diag) {
    os << diag.getLocation() << ": ";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      os << "error: ";
      break;
    case DiagnosticSeverity::Warning:
      os << "warning: ";
      break;
    case DiagnosticSeverity::Note:
      os << "note: ";
      break;
    case DiagnosticSeverity::Remark:
      os << "remark: ";
      break;
    }
    os << diag << "\n";
  }

  MLIRContext *context;
  bool printedOp;
  std::optional<ScopedDiagnosticHandler> handler;
};

/// The GPU pipeline's options plus what only `compile` takes (the flags of
/// `norm-opt compile` that are not pipeline options).
struct CompileTextOptions : public NormGPUPipelineOptions {
  PassOptions::Option<std::string> ptxas{*this, "ptxas",
                                         llvm::cl::desc("ptxas to run")};
  PassOptions::Option<std::string> cc{
      *this, "cc", llvm::cl::desc("C compiler that links a library")};
  PassOptions::Option<std::string> runtimeLibrary{
      *this, "runtime-library",
      llvm::cl::desc("libnorm_runtime_static.a to link into a library")};
  PassOptions::Option<bool> keepLauncher{
      *this, "keep-launcher",
      llvm::cl::desc("Keep the launchers' host IR (OUT with "
                     ".launchers.mlir) and object (.launchers.o)"),
      llvm::cl::init(false)};
};

/// Parses `text` into `options`; a bad key or value is an error diagnostic
/// on the module.
LogicalResult parseOptions(ModuleOp module, MlirStringRef text,
                           mlir::detail::PassOptions &options) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  if (succeeded(options.parseFromString(unwrap(text), os)))
    return success();
  return module.emitError() << "invalid options '" << unwrap(text)
                            << "': " << StringRef(errors).trim();
}

/// libnorm_runtime_static.a beside this library (an installed prefix), or
/// "" to let compileNormModule use the build tree's.
std::string runtimeBesideThisLibrary() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&mlirNormCompileModule), &info) ||
      !info.dli_fname)
    return "";
  llvm::SmallString<256> path(llvm::sys::path::parent_path(info.dli_fname));
  llvm::sys::path::append(path, "libnorm_runtime_static.a");
  return llvm::sys::fs::exists(path) ? path.str().str() : std::string();
}

} // namespace

MlirLogicalResult mlirNormRunGPUPipeline(MlirModule cModule,
                                         MlirStringRef options,
                                         MlirStringCallback diagnostics,
                                         void *userData) {
  ModuleOp module = unwrap(cModule);
  CallbackDiagnostics scope(module.getContext(), diagnostics, userData);
  NormGPUPipelineOptions pipeline;
  if (failed(parseOptions(module, options, pipeline)))
    return wrap(failure());
  NormGpuOptions gpu = pipeline.getOptions();
  if (failed(validateGpuOptions(gpu, module.getLoc())))
    return wrap(failure());
  PassManager pm(module.getContext());
  buildNormLowerToNVVMPipeline(pm, gpu);
  return wrap(pm.run(module));
}

MlirLogicalResult mlirNormCompileModule(MlirModule cModule,
                                        MlirNormEmitKind emit,
                                        MlirStringRef output,
                                        MlirStringRef options,
                                        MlirStringCallback diagnostics,
                                        void *userData) {
  ModuleOp module = unwrap(cModule);
  CallbackDiagnostics scope(module.getContext(), diagnostics, userData);
  CompileTextOptions text;
  if (failed(parseOptions(module, options, text)))
    return wrap(failure());
  if (emit < MlirNormEmitPTX || emit > MlirNormEmitLibrary)
    return wrap(module.emitError() << "invalid emit kind " << int(emit));

  // The GPU options as declared once in Passes.td; the rest is compile's.
  CompileOptions compile;
  compile.gpu = text.getOptions();
  compile.emit = emit == MlirNormEmitPTX     ? EmitKind::PTX
                 : emit == MlirNormEmitCubin ? EmitKind::Cubin
                                             : EmitKind::Library;
  compile.output = unwrap(output).str();
  compile.ptxas = text.ptxas;
  compile.cc = text.cc;
  compile.runtimeLibrary = text.runtimeLibrary.empty()
                               ? runtimeBesideThisLibrary()
                               : std::string(text.runtimeLibrary);
  compile.keepLauncher = text.keepLauncher;
  return wrap(compileNormModule(module, compile));
}
