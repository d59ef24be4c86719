//===- Compile.cpp - norm-opt compile: PTX, cubin, shared library ---------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/Compile/Compile.h"
#include "norm/Compile/Signature.h"
#include "norm/Transforms/Outline.h"

#include "FunctionOperands.h"
#include "norm/Conversion/GpuOptions.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/PrettyStackTrace.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::norm;

#ifndef NORM_DEFAULT_PTXAS
#define NORM_DEFAULT_PTXAS "ptxas"
#endif
#ifndef NORM_DEFAULT_RUNTIME_LIBRARY
#define NORM_DEFAULT_RUNTIME_LIBRARY ""
#endif

FailureOr<std::string> mlir::norm::extractPTX(ModuleOp module) {
  for (auto binary : module.getOps<gpu::BinaryOp>())
    for (Attribute a : binary.getObjects())
      if (auto object = dyn_cast<gpu::ObjectAttr>(a))
        return object.getObject().str();
  return module.emitError("compile: no gpu.binary with PTX was produced "
                          "(no fused norm group in the input?)");
}

namespace {

LogicalResult writeFile(ModuleOp module, StringRef path, StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return module.emitError() << "compile: cannot write '" << path
                              << "': " << ec.message();
  os << text;
  os.close();
  if (std::error_code error = os.error()) {
    // Reported here, not by the stream's destructor (a fatal "IO failure").
    os.clear_error();
    return module.emitError() << "compile: cannot write '" << path
                              << "': " << error.message();
  }
  return success();
}

/// Runs `program args...` with its stdout and stderr in `output`; returns
/// its exit status (-1 when it could not run, with `error` set).
int runTool(StringRef program, ArrayRef<std::string> args, std::string &output,
            std::string &error) {
  SmallString<128> logPath;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("norm-opt-tool", "log", fd, logPath)) {
    error = "cannot create a temporary file";
    return -1;
  }
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  llvm::FileRemover removeLog(logPath);

  SmallVector<StringRef> argv{program};
  for (const std::string &a : args)
    argv.push_back(a);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(logPath),
                                          StringRef(logPath)};
  int rc = llvm::sys::ExecuteAndWait(program, argv, std::nullopt, redirects,
                                     0, 0, &error);
  auto log = llvm::MemoryBuffer::getFile(logPath);
  output = log ? (*log)->getBuffer().str() : "";
  return rc;
}

/// Runs `program args...`; on failure reports its output.
LogicalResult run(ModuleOp module, StringRef program,
                  ArrayRef<std::string> args, bool echoOutput) {
  std::string text, error;
  int rc = runTool(program, args, text, error);
  if (rc != 0) {
    auto diag = module.emitError() << "compile: '" << program << "' failed";
    if (!error.empty())
      diag << ": " << error;
    diag << "\n" << text;
    return failure();
  }
  if (echoOutput)
    llvm::errs() << text;
  return success();
}

/// Whether this ptxas compiles the kernels of one PTX file on several
/// threads (--split-compile, CUDA 12.x and newer; its --help says so). The
/// SASS is the same either way (perf-notes, "First-call compile time").
bool ptxasSplitsCompile(StringRef ptxas) {
  std::string help, error;
  return runTool(ptxas, {"--help"}, help, error) == 0 &&
         StringRef(help).contains("--split-compile");
}

FailureOr<std::string> findProgram(ModuleOp module, StringRef given,
                                   StringRef fallback, StringRef what) {
  StringRef name = given.empty() ? fallback : given;
  if (llvm::sys::path::is_absolute(name)) {
    if (llvm::sys::fs::can_execute(name))
      return name.str();
  } else if (auto found = llvm::sys::findProgramByName(name)) {
    return *found;
  }
  return module.emitError() << "compile: cannot find " << what << " '" << name
                            << "' (pass its path with --" << what << "=)";
}

/// ptxas is the user's (the CUDA toolkit's): --ptxas, else $CUDA_HOME/bin,
/// $CUDA_PATH/bin, the toolkit norm-opt was built against, PATH and
/// /usr/local/cuda/bin, in that order. A self-contained norm-opt (the
/// Python wheel) runs where its build's toolkit path may not exist.
FailureOr<std::string> findPtxas(ModuleOp module, StringRef given) {
  if (!given.empty())
    return findProgram(module, given, given, "ptxas");
  SmallVector<std::string> looked;
  auto inDir = [&](const char *dir) -> std::optional<std::string> {
    if (!dir || !*dir)
      return std::nullopt;
    SmallString<256> path(dir);
    llvm::sys::path::append(path, "bin", "ptxas");
    looked.push_back(path.str().str());
    if (llvm::sys::fs::can_execute(path))
      return path.str().str();
    return std::nullopt;
  };
  for (const char *env : {"CUDA_HOME", "CUDA_PATH"})
    if (auto found = inDir(std::getenv(env)))
      return *found;
  StringRef builtWith = NORM_DEFAULT_PTXAS;
  if (llvm::sys::path::is_absolute(builtWith)) {
    looked.push_back(builtWith.str());
    if (llvm::sys::fs::can_execute(builtWith))
      return builtWith.str();
  }
  looked.push_back("ptxas on PATH");
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  if (auto found = inDir("/usr/local/cuda"))
    return *found;
  auto diag = module.emitError()
              << "compile: cannot find ptxas, the CUDA toolkit's PTX "
                 "assembler (--emit=cubin and --emit=lib need it); looked for ";
  llvm::interleaveComma(looked, diag);
  diag << ". Install the CUDA toolkit, set CUDA_HOME, or pass --ptxas=PATH";
  return failure();
}

std::string replaceExtension(StringRef path, StringRef ext) {
  SmallString<128> p(path);
  llvm::sys::path::replace_extension(p, ext);
  return p.str().str();
}

/// Runs `build`'s passes on `module`; a crash prints which pipeline ran.
LogicalResult runPipeline(ModuleOp module, const CompileOptions &options,
                          function_ref<void(OpPassManager &)> build) {
  PassManager pm(module.getContext());
  build(pm);
  if (options.configurePassManager &&
      failed(options.configurePassManager(pm)))
    return failure();
  std::string pipelineText;
  llvm::raw_string_ostream pipelineStream(pipelineText);
  pm.printAsTextualPipeline(pipelineStream);
  llvm::PrettyStackTraceFormat crashNote(
      "norm-opt compile: running the pipeline '%s'", pipelineText.c_str());
  return pm.run(module);
}

/// Outlines the groups of every function that cannot be launched whole,
/// writes the host module if asked, and leaves in `module` only what the
/// library launches.
LogicalResult outlineForHosts(ModuleOp module, const CompileOptions &options) {
  SymbolTable symbols(module);
  SmallVector<func::FuncOp> hosts;
  for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
    bool hasGroup = false;
    fn.walk([&](MixedReductionOp) { hasGroup = true; });
    if (!hasGroup || fn->hasAttr(kOutlinedAttrName))
      continue;
    std::string why = compile_detail::whyNotLaunchableWhole(fn);
    if (why.empty())
      continue;
    FailureOr<SmallVector<func::FuncOp>> outlined =
        outlineNormGroups(fn, symbols);
    if (failed(outlined))
      return failure();
    std::string names;
    for (func::FuncOp g : *outlined)
      names += (names.empty() ? "@" : ", @") + g.getSymName().str();
    fn.emitRemark() << "compile: @" << fn.getSymName()
                    << " is not only its fused groups (" << why
                    << "): each group is outlined and launched on its own ("
                    << names << ")";
    hosts.push_back(fn);
  }
  if (!options.hostModule.empty()) {
    // The host's view: what the library launches is a declaration.
    OwningOpRef<ModuleOp> host(cast<ModuleOp>(module->clone()));
    for (func::FuncOp fn : host->getOps<func::FuncOp>()) {
      bool launched = fn->hasAttr(kOutlinedAttrName);
      fn.walk([&](MixedReductionOp) { launched = true; });
      if (!launched)
        continue;
      fn.getBody().getBlocks().clear();
      fn.setPrivate();
    }
    std::string text;
    llvm::raw_string_ostream os(text);
    host->print(os);
    os << "\n";
    if (failed(writeFile(module, options.hostModule, text)))
      return failure();
  }
  for (func::FuncOp fn : hosts)
    fn.erase();
  return success();
}

/// Puts the cubin at `cubinPath` into the module's gpu.binary: the launchers'
/// LLVM IR embeds it and loads it with mgpuModuleLoad.
LogicalResult embedCubin(ModuleOp module, StringRef cubinPath) {
  auto cubin = llvm::MemoryBuffer::getFile(cubinPath, /*IsText=*/false);
  if (!cubin)
    return module.emitError() << "compile: cannot read '" << cubinPath << "'";
  for (auto binary : module.getOps<gpu::BinaryOp>()) {
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    auto bin = gpu::ObjectAttr::get(
        module.getContext(), object.getTarget(),
        gpu::CompilationTarget::Binary,
        StringAttr::get(module.getContext(), (*cubin)->getBuffer()),
        object.getProperties(), object.getKernels());
    binary.setObjectsAttr(ArrayAttr::get(module.getContext(), {bin}));
  }
  return success();
}

/// The upstream passes that take the launchers to the LLVM dialect.
void buildLauncherToLLVM(OpPassManager &pm) {
  std::string error;
  llvm::raw_string_ostream os(error);
  (void)parsePassPipeline("convert-scf-to-cf,gpu-to-llvm,"
                          "convert-func-to-llvm,convert-arith-to-llvm,"
                          "convert-cf-to-llvm,reconcile-unrealized-casts,"
                          "canonicalize",
                          pm, os);
}

/// The launchers' LLVM IR, optimised (O2) and compiled for the host into
/// the object file `path` (position independent: it goes into a shared
/// library).
LogicalResult emitObject(ModuleOp module, StringRef path) {
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  module.getContext()->appendDialectRegistry(registry);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "norm_launchers");
  if (!llvmModule)
    return module.emitError("compile: the launchers' LLVM IR translation "
                            "failed");
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError() << "compile: no host target: " << error;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "generic", "", llvm::TargetOptions(), llvm::Reloc::PIC_));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);
  if (llvm::Error e = makeOptimizingTransformer(2, 0, machine.get())(
          llvmModule.get()))
    return module.emitError() << "compile: optimising the launchers failed: "
                              << llvm::toString(std::move(e));
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return module.emitError() << "compile: cannot write '" << path
                              << "': " << ec.message();
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return module.emitError("compile: the host target cannot emit objects");
  codegen.run(*llvmModule);
  os.close();
  return success();
}

/// The linker's version script: the launchers and the runtime's C API are
/// exported, everything else (the runtime's mgpu* copy) stays local.
std::string versionScript(ArrayRef<std::string> launchers) {
  std::string text = "{\n  global:\n    normrt_*;\n";
  for (const std::string &name : launchers)
    text += "    " + name + ";\n";
  return text + "  local:\n    *;\n};\n";
}

} // namespace

LogicalResult mlir::norm::compileNormModule(ModuleOp module,
                                            const CompileOptions &options) {
  if (options.output.empty())
    return module.emitError("compile: an output path is required (-o)");

  if (failed(validateGpuOptions(options.gpu, module.getLoc())))
    return failure();

  // Fuse, outline what cannot be launched whole, then the kernels.
  if (failed(runPipeline(module, options, buildNormFusePipeline)) ||
      failed(outlineForHosts(module, options)) ||
      failed(runPipeline(module, options, [&](OpPassManager &pm) {
        buildNormGPUToBinaryPipeline(pm, options.gpu);
      })))
    return failure();
  FailureOr<std::string> ptx = extractPTX(module);
  if (failed(ptx))
    return failure();
  if (options.emit == EmitKind::PTX)
    return writeFile(module, options.output, *ptx);

  // ptxas: PTX -> cubin for the chip.
  FailureOr<std::string> ptxas = findPtxas(module, options.ptxas);
  if (failed(ptxas))
    return failure();
  SmallString<128> ptxPath;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("norm-opt", "ptx", fd, ptxPath))
    return module.emitError("compile: cannot create a temporary file");
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  llvm::FileRemover removePtx(ptxPath);
  if (failed(writeFile(module, ptxPath, *ptx)))
    return failure();
  std::string cubinPath = options.emit == EmitKind::Cubin
                              ? options.output
                              : replaceExtension(options.output, "cubin");
  SmallVector<std::string> ptxasArgs{"-arch=" + options.gpu.chip,
                                     "-O" + std::to_string(options.gpu.optLevel),
                                     std::string(ptxPath), "-o", cubinPath};
  if (options.ptxasVerbose)
    ptxasArgs.insert(ptxasArgs.begin(), "-v");
  // The kernels of the file on as many threads as there are CPUs: the
  // first call of a new shape in a JIT waits for this.
  if (ptxasSplitsCompile(*ptxas))
    ptxasArgs.push_back("--split-compile=0");
  if (failed(run(module, *ptxas, ptxasArgs, options.ptxasVerbose)))
    return failure();
  if (options.emit == EmitKind::Cubin)
    return success();

  // Library: the launchers (host IR lowered by upstream passes, compiled
  // here) with the cubin embedded, and the runtime.
  llvm::FileRemover removeCubin(cubinPath);
  if (failed(embedCubin(module, cubinPath)))
    return failure();
  // The same signature as JSON, for bindings (python/norm_opt), from the
  // functions before they become launchers.
  std::string headerPath = replaceExtension(options.output, "h");
  FailureOr<std::string> signature = librarySignatureJSON(
      module, {llvm::sys::path::filename(options.output).str(),
               llvm::sys::path::filename(headerPath).str(), options.gpu.chip,
               options.gpu.features});
  if (failed(signature) ||
      failed(writeFile(module, replaceExtension(options.output, "json"),
                       *signature)))
    return failure();
  SmallVector<std::string> launchers;
  for (func::FuncOp fn : module.getOps<func::FuncOp>())
    if (fn.walk([](MixedReductionOp) { return WalkResult::interrupt(); })
            .wasInterrupted())
      launchers.push_back(fn.getSymName().str());
  std::string header;
  if (failed(buildLaunchers(module, llvm::sys::path::filename(headerPath),
                            header)) ||
      failed(writeFile(module, headerPath, header)))
    return failure();
  std::string launcherIR = replaceExtension(options.output, "launchers.mlir");
  if (failed(runPipeline(module, options, [](OpPassManager &pm) {
        (void)parsePassPipeline("canonicalize,cse", pm);
      })))
    return failure();
  if (options.keepLauncher) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    if (failed(writeFile(module, launcherIR, text)))
      return failure();
  }
  if (failed(runPipeline(module, options, buildLauncherToLLVM)))
    return failure();
  std::string objectPath = replaceExtension(options.output, "launchers.o");
  std::string scriptPath = replaceExtension(options.output, "exports.map");
  std::optional<llvm::FileRemover> removeObject, removeScript;
  if (!options.keepLauncher)
    removeObject.emplace(objectPath);
  removeScript.emplace(scriptPath);
  if (failed(emitObject(module, objectPath)) ||
      failed(writeFile(module, scriptPath, versionScript(launchers))))
    return failure();

  FailureOr<std::string> cc = findProgram(module, options.cc, "cc", "cc");
  if (failed(cc))
    return failure();
  std::string runtime = options.runtimeLibrary.empty()
                            ? NORM_DEFAULT_RUNTIME_LIBRARY
                            : options.runtimeLibrary;
  if (runtime.empty() || !llvm::sys::fs::exists(runtime))
    return module.emitError()
           << "compile: cannot find the norm-opt runtime library '" << runtime
           << "' (pass it with --runtime-library=)";
  return run(module, *cc,
             {"-shared", "-fPIC", "-Wl,-z,defs", "-Wl,-Bsymbolic",
              "-Wl,--version-script=" + scriptPath, "-o", options.output,
              objectPath, runtime, "-ldl", "-lpthread", "-lstdc++"},
             /*echoOutput=*/false);
}
