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
  cl::opt<std::string> chip("chip", cl::desc("GPU architecture"),
                            cl::init("sm_90a"), cl::cat(category));
  cl::opt<std::string> features("features", cl::desc("PTX features"),
                                cl::init("+ptx80"), cl::cat(category));
  cl::opt<int> optLevel("opt-level", cl::desc("Optimisation level (0-3)"),
                        cl::init(3), cl::cat(category));
  cl::opt<int64_t> threadsPerRow(
      "threads-per-row", cl::desc("Lanes per row (power of two; 0: pick)"),
      cl::init(0), cl::cat(category));
  cl::opt<int64_t> rowsPerCTA(
      "rows-per-cta", cl::desc("Rows per CTA for short rows (0: pick)"),
      cl::init(0), cl::cat(category));
  cl::opt<int64_t> vectorBytes("vector-bytes",
                               cl::desc("Bytes per global access"),
                               cl::init(16), cl::cat(category));
  cl::opt<int64_t> programsPerSM("programs-per-sm",
                                 cl::desc("CTAs per SM (0: pick)"),
                                 cl::init(0), cl::cat(category));
  cl::opt<int64_t> maxResident(
      "max-resident-elements",
      cl::desc("Columns a lane may keep in registers (0: pick)"), cl::init(0),
      cl::cat(category));
  cl::opt<bool> prefetch(
      "prefetch", cl::desc("Load the next row while reducing this one"),
      cl::init(true), cl::cat(category));
  cl::opt<bool> singleLaunch(
      "single-launch",
      cl::desc("Final reduction inside the main kernel (cooperative launch; "
               "falls back to a second kernel at run time)"),
      cl::init(true), cl::cat(category));
  cl::opt<int64_t> asyncStages(
      "async-stages",
      cl::desc("Rows in flight through cp.async (0: plain loads)"),
      cl::init(3), cl::cat(category));
  cl::opt<std::string> ptxas("ptxas", cl::desc("ptxas to use"),
                             cl::cat(category));
  cl::opt<std::string> cc("cc", cl::desc("C compiler for --emit=lib"),
                          cl::cat(category));
  cl::opt<std::string> runtime(
      "runtime-library",
      cl::desc("libnorm_runtime_static.a to link into --emit=lib"),
      cl::cat(category));
  cl::opt<bool> keep("keep-launcher",
                     cl::desc("Keep the generated launcher (OUT with .c)"),
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
  if (threadsPerRow < 0 || threadsPerRow > 1024 ||
      (threadsPerRow & (threadsPerRow - 1))) {
    llvm::errs() << "norm-opt compile: --threads-per-row must be 0 or a power "
                    "of two <= 1024\n";
    return 1;
  }
  if (optLevel < 0 || optLevel > 3) {
    llvm::errs() << "norm-opt compile: --opt-level must be 0-3\n";
    return 1;
  }

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

  CompileOptions options;
  options.chip = chip;
  options.features = features;
  options.optLevel = optLevel;
  options.threadsPerRow = threadsPerRow;
  options.rowsPerCTA = rowsPerCTA;
  options.vectorBytes = vectorBytes;
  options.programsPerSM = programsPerSM;
  options.maxResidentElements = maxResident;
  options.prefetch = prefetch;
  options.singleLaunch = singleLaunch;
  options.asyncStages = asyncStages;
  options.emit = emit;
  options.output = output;
  options.ptxas = ptxas;
  options.cc = cc;
  options.runtimeLibrary =
      runtime.empty() ? installedRuntime(argv[0]) : std::string(runtime);
  options.keepLauncher = keep;
  options.ptxasVerbose = verbose;
  options.configurePassManager = [](PassManager &pm) {
    applyDefaultTimingPassManagerCLOptions(pm);
    return applyPassManagerCLOptions(pm);
  };
  return failed(compileNormModule(*module, options)) ? 1 : 0;
}
