//===- EmbeddingTest.cpp - Using norm-opt from a host compiler ------------===//
//
// Part of norm-opt. What an embedding compiler does: register the dialect
// and passes, name our pass in a textual pipeline or take the patterns, and
// run them on its own module.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormOps.h"
#include "norm/InitNorm.h"
#include "norm/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

constexpr const char *kRMSNormGrad = R"mlir(
func.func @f(%dy: tensor<3x7xbf16>, %x: tensor<3x7xbf16>, %rstd: tensor<3xf32>,
             %w: tensor<7xbf16>) -> (tensor<3x7xbf16>, tensor<7xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<7xbf16>)
      : tensor<3x7xbf16>, tensor<3xf32> -> tensor<3x7xbf16>, tensor<7xbf16>
  return %dx, %dw : tensor<3x7xbf16>, tensor<7xbf16>
}
)mlir";

class EmbeddingTest : public ::testing::Test {
protected:
  EmbeddingTest() {
    DialectRegistry registry;
    registry.insert<func::FuncDialect>();
    norm::registerNormDialect(registry);
    context.appendDialectRegistry(registry);
  }

  OwningOpRef<ModuleOp> parse(const char *source) {
    return parseSourceString<ModuleOp>(source, &context);
  }

  static int64_t count(Operation *root, StringRef name) {
    int64_t n = 0;
    root->walk([&](Operation *op) { n += op->getName().getStringRef() == name; });
    return n;
  }

  MLIRContext context;
};

TEST_F(EmbeddingTest, TextualPipelineNamesOurPass) {
  norm::registerNormPassesAndPipelines();
  OwningOpRef<ModuleOp> module = parse(kRMSNormGrad);
  ASSERT_TRUE(module);

  PassManager pm(&context);
  std::string errors;
  llvm::raw_string_ostream os(errors);
  // The pipeline text is nested under `pm`'s anchor (builtin.module).
  ASSERT_TRUE(succeeded(parsePassPipeline("func.func(norm-decompose)", pm, os)))
      << errors;
  ASSERT_TRUE(succeeded(pm.run(*module)));

  EXPECT_EQ(count(*module, "norm.rms_norm_grad"), 0);
  // extf x, dy, w; xhat; w*dy; row sum; dx; truncf dx; dw; truncf dw.
  EXPECT_EQ(count(*module, "linalg.generic"), 10);
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(EmbeddingTest, PatternsRunInTheHostsOwnDriver) {
  OwningOpRef<ModuleOp> module = parse(kRMSNormGrad);
  ASSERT_TRUE(module);
  // The host loads what our patterns create (a pass would declare these).
  context.loadDialect<linalg::LinalgDialect, arith::ArithDialect,
                      tensor::TensorDialect>();

  RewritePatternSet patterns(&context);
  norm::populateNormDecomposePatterns(patterns);
  walkAndApplyPatterns(*module, std::move(patterns));

  EXPECT_EQ(count(*module, "norm.rms_norm_grad"), 0);
  EXPECT_GT(count(*module, "linalg.generic"), 0);
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(EmbeddingTest, PassCanBeCreatedDirectly) {
  OwningOpRef<ModuleOp> module = parse(kRMSNormGrad);
  ASSERT_TRUE(module);
  PassManager pm(&context);
  pm.addNestedPass<func::FuncOp>(norm::createNormDecompose());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  EXPECT_EQ(count(*module, "norm.rms_norm_grad"), 0);
}

} // namespace
