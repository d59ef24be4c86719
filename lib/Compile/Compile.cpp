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
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/PrettyStackTrace.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

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

/// Runs `program args...`; on failure reports its output.
LogicalResult run(ModuleOp module, StringRef program,
                  ArrayRef<std::string> args, bool echoOutput) {
  SmallString<128> logPath;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("norm-opt-tool", "log", fd, logPath))
    return module.emitError("compile: cannot create a temporary file");
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  llvm::FileRemover removeLog(logPath);

  SmallVector<StringRef> argv{program};
  for (const std::string &a : args)
    argv.push_back(a);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(logPath),
                                          StringRef(logPath)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(program, argv, std::nullopt, redirects,
                                     0, 0, &error);
  auto log = llvm::MemoryBuffer::getFile(logPath);
  StringRef text = log ? (*log)->getBuffer() : "";
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

/// An assembly file defining the hidden `norm_image`: the bytes of the
/// file at `path`, then a NUL (PTX images are C strings).
std::string imageAssembly(StringRef path) {
  std::string quoted;
  for (char c : path) {
    if (c == '"' || c == '\\')
      quoted += '\\';
    quoted += c;
  }
  return (Twine("  .section .rodata.norm_image,\"a\"\n"
                "  .balign 16\n"
                "  .globl norm_image\n"
                "  .hidden norm_image\n"
                "  .type norm_image, @object\n"
                "norm_image:\n"
                "  .incbin \"") +
          quoted +
          "\"\n"
          "  .byte 0\n"
          "  .size norm_image, .-norm_image\n"
          "  .section .note.GNU-stack,\"\",@progbits\n")
      .str();
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
  FailureOr<std::string> ptxas =
      findProgram(module, options.ptxas, NORM_DEFAULT_PTXAS, "ptxas");
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
  if (failed(run(module, *ptxas, ptxasArgs, options.ptxasVerbose)))
    return failure();
  if (options.emit == EmitKind::Cubin)
    return success();

  // Library: the launcher, with the cubin embedded, and the runtime.
  llvm::FileRemover removeCubin(cubinPath);
  auto cubin = llvm::MemoryBuffer::getFile(cubinPath, /*IsText=*/false);
  if (!cubin)
    return module.emitError() << "compile: cannot read '" << cubinPath << "'";
  std::string headerPath = replaceExtension(options.output, "h");
  std::string source, header;
  if (failed(generateLauncher(module, StringRef(),
                              llvm::sys::path::filename(headerPath), source,
                              header)))
    return failure();
  if (failed(writeFile(module, headerPath, header)))
    return failure();
  // The same signature as JSON, for bindings (python/norm_opt).
  FailureOr<std::string> signature = librarySignatureJSON(
      module, {llvm::sys::path::filename(options.output).str(),
               llvm::sys::path::filename(headerPath).str(), options.gpu.chip,
               options.gpu.features});
  if (failed(signature) ||
      failed(writeFile(module, replaceExtension(options.output, "json"),
                       *signature)))
    return failure();
  std::string sourcePath = replaceExtension(options.output, "c");
  if (failed(writeFile(module, sourcePath, source)))
    return failure();
  // The cubin, as the launcher's hidden `norm_image` (assembled, not a C
  // array: cc takes seconds over a megabyte of initialisers).
  std::string imagePath = replaceExtension(options.output, "image.s");
  if (failed(writeFile(module, imagePath, imageAssembly(cubinPath))))
    return failure();
  std::optional<llvm::FileRemover> removeSource, removeImage;
  if (!options.keepLauncher) {
    removeSource.emplace(sourcePath);
    removeImage.emplace(imagePath);
  }

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
             {"-shared", "-fPIC", "-O2", "-Wl,-z,defs", "-o", options.output,
              sourcePath, imagePath, runtime, "-ldl", "-lpthread", "-lstdc++"},
             /*echoOutput=*/false);
}
