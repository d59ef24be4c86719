//===- CompileMain.cpp - `norm-opt compile` -------------------------------===//
//
// Part of norm-opt. The command-line face of mlir::norm::compileNormModule.
// Its options live in this function, so plain `norm-opt` does not show them.
//
//===----------------------------------------------------------------------===//

#include "CompileMain.h"

#include "norm/Compile/Compile.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
namespace cl = llvm::cl;

/// libnorm_runtime_static.a next to an installed driver (PREFIX/lib).
static std::string installedRuntime(const char *argv0) {
  std::string exe = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&installedRuntime));
  llvm::SmallString<256> path(llvm::sys::path::parent_path(exe));
  llvm::sys::path::append(path, "..", "lib", "libnorm_runtime_static.a");
  return llvm::sys::fs::exists(path) ? path.str().str() : std::string();
}

int mlir::norm::compileMain(int argc, char **argv, DialectRegistry &registry) {
  // A crash prints a stack (and, from compileNormModule, the pipeline), as
  // MlirOptMain does for the opt path.
  llvm::InitLLVM initLLVM(argc, argv);
  cl::OptionCategory category("norm-opt compile options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<input .mlir>"),
                             cl::Required, cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("Output file"),
                              cl::value_desc("path"), cl::Required,
                              cl::cat(category));
  cl::opt<EmitKind> emit(
      "emit", cl::desc("What to write"), cl::init(EmitKind::PTX),
      cl::values(clEnumValN(EmitKind::PTX, "ptx", "PTX assembly"),
                 clEnumValN(EmitKind::Cubin, "cubin", "a cubin (ptxas)"),
                 clEnumValN(EmitKind::Library, "lib",
                            "a shared library with C launchers, and its "
                            "header (OUT with .h)")),
      cl::cat(category));
  // The GPU options: Passes.td's list (GpuOptions.h.inc), stored straight
  // into the options compileNormModule takes.
  CompileOptions options;
#define NORM_GPU_OPTION(field, type, argument, initial, description)             \
  cl::opt<type, /*ExternalStorage=*/true> field##Option(                        \
      argument, cl::desc(description), cl::location(options.gpu.field),        \
      cl::init(initial), cl::cat(category));
#include "norm/Conversion/GpuOptions.h.inc"
  cl::opt<std::string> ptxas("ptxas", cl::desc("ptxas to use"),
                             cl::cat(category));
  cl::opt<std::string> cc("cc", cl::desc("C compiler for --emit=lib"),
                          cl::cat(category));
  cl::opt<std::string> runtime(
      "runtime-library",
      cl::desc("libnorm_runtime_static.a to link into --emit=lib"),
      cl::cat(category));
  cl::opt<std::string> hostModule(
      "host-module",
      cl::desc("Write the host module here: the input after fusion, with "
               "the groups of functions that are not only their groups "
               "outlined and called, and what the library launches "
               "declared"),
      cl::value_desc("path"), cl::cat(category));
  cl::opt<bool> keep("keep-launcher",
                     cl::desc("Keep the launchers' host IR (OUT with "
                              ".launchers.mlir) and object "
                              "(.launchers.o)"),
                     cl::cat(category));
  cl::opt<bool> verbose("ptxas-verbose",
                        cl::desc("Print ptxas's register/spill report"),
                        cl::cat(category));
  // --mlir-print-ir-after-all, --mlir-timing, ... work in compile mode too.
  registerPassManagerCLOptions();
  registerMLIRContextCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions(category);

  // argv[1] is "compile".
  std::string program = std::string(argv[0]) + " compile";
  SmallVector<char *> args{program.data()};
  args.append(argv + 2, argv + argc);
  if (!cl::ParseCommandLineOptions(int(args.size()), args.data(),
                                   "norm-opt compile: from an input .mlir "
                                   "to PTX, a cubin or a shared library\n",
                                   &llvm::errs()))
    return 1;
  if (failed(validateGpuOptions(
          options.gpu,
          [](StringRef argument, StringRef value, const Twine &problem) {
            llvm::errs() << "norm-opt compile: error: --" << argument << "="
                         << value << ": " << problem << "\n";
          })))
    return 1;

  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  std::string error;
  auto file = openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "norm-opt compile: " << error << "\n";
    return 1;
  }
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sources, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module)
    return 1;

  options.emit = emit;
  options.output = output;
  options.ptxas = ptxas;
  options.cc = cc;
  options.runtimeLibrary =
      runtime.empty() ? installedRuntime(argv[0]) : std::string(runtime);
  options.keepLauncher = keep;
  options.hostModule = hostModule;
  options.ptxasVerbose = verbose;
  options.configurePassManager = [](PassManager &pm) {
    applyDefaultTimingPassManagerCLOptions(pm);
    return applyPassManagerCLOptions(pm);
  };
  return failed(compileNormModule(*module, options)) ? 1 : 0;
}
