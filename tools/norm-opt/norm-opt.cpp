//===- norm-opt.cpp - The norm-opt driver ---------------------------------===//
//
// Part of norm-opt. An mlir-opt style driver: parse, run a pass pipeline,
// print. It registers the norm dialect and passes plus the upstream
// dialects and passes a norm backward pipeline uses.
//
//===----------------------------------------------------------------------===//

#include "CompileMain.h"

#include "norm/InitNorm.h"
#include "norm/RegisterUpstream.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::norm::registerUpstreamDialects(registry);
  mlir::norm::registerNormDialect(registry);
  mlir::norm::registerUpstreamPasses();
  mlir::norm::registerNormPassesAndPipelines();

  // `norm-opt compile IN.mlir --chip=... --emit=... -o OUT`.
  if (argc > 1 && std::strcmp(argv[1], "compile") == 0)
    return mlir::norm::compileMain(argc, argv, registry);

  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "norm-opt " NORM_OPT_VERSION "\n"
       << "  built with LLVM/MLIR " LLVM_VERSION_STRING
#ifdef NORM_OPT_STATIC_LLVM
       << " (linked in: self-contained)"
#else
       << " (shared libraries)"
#endif
       << "\n";
  });

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv,
      "norm-opt: find and fuse the mixed-order reductions of LayerNorm / "
      "RMSNorm backward\n",
      registry));
}
