//===- embed-norm.cpp - A host compiler running norm-opt's passes ---------===//
//
// Part of norm-opt. Registers the norm dialect and passes the way a host
// compiler does, runs --norm-decompose from a textual pipeline on its own
// module, and prints the result. Exits non-zero if anything fails.
//
//===----------------------------------------------------------------------===//

#include "norm/InitNorm.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

static const char *kInput = R"mlir(
func.func @rms(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>,
               %rstd: tensor<?xf32>, %w: tensor<64xbf16>)
    -> (tensor<?x64xbf16>, tensor<64xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xbf16>)
      : tensor<?x64xbf16>, tensor<?xf32> -> tensor<?x64xbf16>, tensor<64xbf16>
  return %dx, %dw : tensor<?x64xbf16>, tensor<64xbf16>
}
)mlir";

int main() {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect>();
  mlir::norm::registerNormDialect(registry);
  mlir::norm::registerNormPassesAndPipelines();
  mlir::MLIRContext context(registry);

  auto module = mlir::parseSourceString<mlir::ModuleOp>(kInput, &context);
  if (!module)
    return 1;
  mlir::PassManager pm(&context);
  if (mlir::failed(mlir::parsePassPipeline("func.func(norm-decompose)", pm,
                                           llvm::errs())) ||
      mlir::failed(pm.run(*module)) || mlir::failed(mlir::verify(*module)))
    return 1;
  module->print(llvm::outs());
  return 0;
}
