//===- NormOptPlugin.cpp - norm-opt as an mlir-opt plugin -----------------===//
//
// Part of norm-opt. The upstream plugin ABI (mlir/Tools/Plugins): one shared
// library that is both a dialect plugin and a pass plugin, so an MLIR user
// can run norm-opt's passes and pipelines in the upstream tool:
//
//   mlir-opt --load-dialect-plugin=libNormOptPlugin.so \
//            --load-pass-plugin=libNormOptPlugin.so \
//            --pass-pipeline='builtin.module(func.func(norm-fuse-mixed-reductions))'
//
// mlir-opt registers every upstream dialect, extension and pass itself; the
// plugin adds only what is ours. As in upstream's standalone-plugin example
// the entry points are weak, so the plugin can also be linked statically.
//
//===----------------------------------------------------------------------===//

#include "norm/InitNorm.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

#define NORM_PLUGIN_EXPORT extern "C" LLVM_ATTRIBUTE_WEAK __attribute__((visibility("default")))

NORM_PLUGIN_EXPORT ::mlir::DialectPluginLibraryInfo mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "NormOpt", NORM_OPT_VERSION,
          [](mlir::DialectRegistry *registry) {
            mlir::norm::registerNormDialect(*registry);
          }};
}

NORM_PLUGIN_EXPORT ::mlir::PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "NormOptPasses", NORM_OPT_VERSION,
          []() { mlir::norm::registerNormPassesAndPipelines(); }};
}
