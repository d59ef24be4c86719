//===- NormOpsTest.cpp - Building and verifying norm ops from C++ ---------===//
//
// Part of norm-opt. What a front end does: create the ops with a builder and
// rely on the verifier.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class NormOpsTest : public ::testing::Test {
protected:
  NormOpsTest() : builder(&context), loc(builder.getUnknownLoc()) {
    context.loadDialect<norm::NormDialect, func::FuncDialect>();
    module = ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());
  }

  /// A function whose arguments have `types`; the builder inserts into it.
  func::FuncOp makeFunc(TypeRange types) {
    auto fn = func::FuncOp::create(builder, loc, "f",
                                   builder.getFunctionType(types, {}));
    builder.setInsertionPointToStart(fn.addEntryBlock());
    return fn;
  }

  /// Verifies `op`, returning the first diagnostic (empty when it verifies).
  std::string verifyMessage(Operation *op) {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (message.empty())
        message = diag.str();
      return success();
    });
    if (succeeded(verify(op)))
      return "";
    return message.empty() ? "<failed without a message>" : message;
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type elem) {
    return RankedTensorType::get(shape, elem);
  }

  MLIRContext context;
  OpBuilder builder;
  Location loc;
  OwningOpRef<ModuleOp> module;
};

TEST_F(NormOpsTest, BuildsLayerNormGradWithAffineParameters) {
  Type bf16 = builder.getBF16Type(), f32 = builder.getF32Type();
  auto x = tensor({2, 16, 64}, bf16);
  auto stats = tensor({2, 16}, f32);
  auto w = tensor({64}, f32);
  func::FuncOp fn = makeFunc({x, x, stats, stats, w, w});
  auto args = fn.getArguments();

  auto op = norm::LayerNormGradOp::create(
      builder, loc, /*dx=*/x, /*dweight=*/w, /*dbias=*/w, args[0], args[1],
      args[2], args[3], args[4], args[5], /*zero_centered_weight=*/false);
  EXPECT_EQ(verifyMessage(op), "");
  EXPECT_EQ(op.getHiddenSize(), 64);
  EXPECT_EQ(op.getNumRowDims(), 2);
  ASSERT_TRUE(op.getDweight());
  EXPECT_EQ(op.getDweight().getType(), w);
  ASSERT_TRUE(op.getDbias());
}

TEST_F(NormOpsTest, BuildsRMSNormGradWithoutWeight) {
  Type f16 = builder.getF16Type(), f32 = builder.getF32Type();
  auto x = tensor({ShapedType::kDynamic, 4096}, f16);
  auto stats = tensor({ShapedType::kDynamic}, f32);
  func::FuncOp fn = makeFunc({x, x, stats});
  auto args = fn.getArguments();

  auto op = norm::RMSNormGradOp::create(
      builder, loc, x, /*dweight=*/Type(), /*dbias=*/Type(), args[0], args[1],
      args[2], /*weight=*/Value(), /*bias=*/Value(), false);
  EXPECT_EQ(verifyMessage(op), "");
  EXPECT_FALSE(op.getDweight());
  EXPECT_FALSE(op.getDbias());
  EXPECT_EQ(op->getNumResults(), 1u);
}

TEST_F(NormOpsTest, RejectsWeightWithoutGradient) {
  Type f32 = builder.getF32Type();
  auto x = tensor({8, 32}, f32);
  auto stats = tensor({8}, f32);
  auto w = tensor({32}, f32);
  func::FuncOp fn = makeFunc({x, x, stats, w});
  auto args = fn.getArguments();

  auto op = norm::RMSNormGradOp::create(builder, loc, x, Type(), Type(),
                                        args[0], args[1], args[2], args[3],
                                        Value(), false);
  EXPECT_NE(verifyMessage(op).find("has a 'weight' operand but no 'dweight'"),
            std::string::npos)
      << verifyMessage(op);
}

TEST_F(NormOpsTest, RejectsStatisticsOfTheWrongShape) {
  Type bf16 = builder.getBF16Type(), f32 = builder.getF32Type();
  auto x = tensor({8, 32}, bf16);
  auto stats = tensor({32}, f32); // columns, not rows
  func::FuncOp fn = makeFunc({x, x, stats, stats});
  auto args = fn.getArguments();

  auto op = norm::LayerNormGradOp::create(builder, loc, x, Type(), Type(),
                                          args[0], args[1], args[2], args[3],
                                          Value(), Value(), false);
  EXPECT_NE(verifyMessage(op).find(
                "expects 'mean' to be shaped like the leading dims of 'x'"),
            std::string::npos)
      << verifyMessage(op);
}

TEST_F(NormOpsTest, RejectsZeroCenteredWithoutWeight) {
  Type f32 = builder.getF32Type();
  auto x = tensor({8, 32}, f32);
  auto stats = tensor({8}, f32);
  func::FuncOp fn = makeFunc({x, x, stats});
  auto args = fn.getArguments();

  auto op = norm::RMSNormGradOp::create(builder, loc, x, Type(), Type(),
                                        args[0], args[1], args[2], Value(),
                                        Value(), /*zero_centered_weight=*/true);
  EXPECT_NE(verifyMessage(op).find("'zero_centered_weight' but no 'weight'"),
            std::string::npos)
      << verifyMessage(op);
}

} // namespace
