//===- norm-fuzz.cpp - libFuzzer target: bytes through every pipeline ----===//
//
// Part of norm-opt. Input bytes -> parse -> verify -> each of our passes and
// pipelines in turn, on a fresh copy of the module: recognition, partial
// accumulation, the CPU pipeline, and the GPU pipeline to PTX (LLVM's NVPTX
// back end; no ptxas). Bad input must give diagnostics, never a crash;
// libFuzzer reports a crash, an abort, a sanitizer error or a timeout, and
// this target aborts itself when a pass succeeds but leaves invalid IR.
//
// Inputs that reach crashes known upstream (the MLIR parser, also in
// mlir-opt) are skipped: see docs/reliability.md.
//
//===----------------------------------------------------------------------===//

#include "norm/RegisterUpstream.h"

#include "norm/Conversion/GpuOptions.h"
#include "norm/InitNorm.h"
#include "norm/Pipelines/Pipelines.h"
#include "norm/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

using namespace mlir;

namespace {

/// Aborts when a pass reports success but leaves IR that does not verify.
struct VerifyAfterEachPass : public PassInstrumentation {
  void runAfterPass(Pass *pass, Operation *op) override {
    if (failed(verify(op))) {
      llvm::errs() << "norm-fuzz: pass '" << pass->getArgument()
                   << "' succeeded but left invalid IR\n";
      std::abort();
    }
  }
};

/// True when every `dimensions` in `text` reads `= [i, j, ...]` (or `[]`):
/// the custom parsers of linalg.broadcast / reduce / transpose crash on
/// anything else (`dimensions = full`, an unclosed `[1`, an empty element
/// as in `[0, ]`).
bool dimensionsWellFormed(StringRef text) {
  for (size_t at = text.find("dimensions"); at != StringRef::npos;
       at = text.find("dimensions", at + 1)) {
    StringRef rest = text.drop_front(at + strlen("dimensions")).ltrim();
    if (!rest.consume_front("="))
      continue; // not the custom syntax
    rest = rest.ltrim();
    if (!rest.consume_front("["))
      return false;
    size_t close = rest.find(']');
    if (close == StringRef::npos)
      return false;
    StringRef list = rest.take_front(close).trim();
    if (list.empty())
      continue;
    SmallVector<StringRef> items;
    list.split(items, ',');
    for (StringRef item : items) {
      item = item.trim();
      if (item.empty() || item.find_first_not_of("0123456789") !=
                              StringRef::npos)
        return false;
    }
  }
  return true;
}

/// Inputs the upstream parsers crash on (mlir-opt too): a dense array of
/// index type in an attribute, a malformed `dimensions` of linalg.broadcast
/// / reduce / transpose, and very deep nesting (the recursive descent
/// overflows the stack at ~5000 regions).
bool reachesKnownUpstreamCrash(StringRef text) {
  if (text.contains("array<index") || !dimensionsWellFormed(text))
    return true;
  int depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '{' || c == '(' || c == '[' || c == '<')
      deepest = std::max(deepest, ++depth);
    else if (c == '}' || c == ')' || c == ']' || c == '>')
      depth = std::max(0, depth - 1);
  }
  return deepest > 200;
}

constexpr size_t kGpuPipeline = 3, kMaxGpuFunctions = 2;

struct Fuzzer {
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
  SmallVector<std::function<void(OpPassManager &)>> pipelines;

  Fuzzer() {
    norm::registerUpstreamDialects(registry);
    norm::registerNormDialect(registry);
    norm::registerUpstreamPasses();
    norm::registerNormPassesAndPipelines();
    context = std::make_unique<MLIRContext>(registry,
                                            MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    context->allowUnregisteredDialects(false);
    // Bad input is expected: swallow the diagnostics.
    context->getDiagEngine().registerHandler([](Diagnostic &) {});

    pipelines.push_back([](OpPassManager &pm) {
      pm.addPass(norm::createNormDecompose());
      pm.nest<func::FuncOp>().addPass(
          norm::createNormFuseMixedReductions(
              norm::NormFuseMixedReductionsOptions{/*remarks=*/true}));
    });
    pipelines.push_back([](OpPassManager &pm) {
      pm.addPass(norm::createNormDecompose());
      OpPassManager &fn = pm.nest<func::FuncOp>();
      fn.addPass(norm::createNormFuseMixedReductions());
      fn.addPass(norm::createNormPartialAccumulate(
          norm::NormPartialAccumulateOptions{/*programs=*/3}));
    });
    pipelines.push_back([](OpPassManager &pm) {
      norm::NormCPUPipelineOptions options;
      norm::buildNormLowerToCPUPipeline(pm, options);
    });
    pipelines.push_back([](OpPassManager &pm) {
      norm::buildNormLowerToNVVMPipeline(pm, norm::NormGpuOptions());
    });
  }

  void run(StringRef text) {
    if (reachesKnownUpstreamCrash(text))
      return;
    ParserConfig config(context.get());
    // A NUL-terminated copy, as every file buffer is: the parser scans for
    // the terminator (memchr past the end of the fuzzer's bytes otherwise).
    std::string source = text.str();
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
        StringRef(source.c_str(), source.size()), config, "fuzz-input");
    if (!module || failed(verify(*module)))
      return;
    // The GPU pipeline costs ~0.3 s per function (NVPTX code generation,
    // more under ASan): large inputs take the other pipelines only, so a
    // run's time stays within libFuzzer's timeout.
    size_t numFunctions = llvm::range_size(module->getOps<func::FuncOp>());
    for (auto [index, build] : llvm::enumerate(pipelines)) {
      if (index == kGpuPipeline && numFunctions > kMaxGpuFunctions)
        continue;
      OwningOpRef<ModuleOp> copy = module->clone();
      PassManager pm(context.get());
      pm.enableVerifier(false); // VerifyAfterEachPass checks, and aborts
      pm.addInstrumentation(std::make_unique<VerifyAfterEachPass>());
      build(pm);
      (void)pm.run(*copy);
    }
  }
};

} // namespace

// ASan defaults (no leak detection, no user poisoning): see
// tools/sanitizer-defaults/asan-defaults.c, linked into this target.

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Fuzzer *fuzzer = new Fuzzer();
  fuzzer->run(StringRef(reinterpret_cast<const char *>(data), size));
  return 0;
}
