//===- MixedReductionsTest.cpp - The recognition as a library -------------===//
//
// Part of norm-opt. What a host compiler that steers the fusion does: ask
// which groups a function has and why one would not fuse, then fuse only
// the groups it wants (include/norm/Transforms/MixedReductions.h).
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormOps.h"
#include "norm/InitNorm.h"
#include "norm/Transforms/MixedReductions.h"
#include "norm/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

// Two norm backwards in one function (two domains, two groups), and one
// without a weight (row reductions only).
constexpr const char *kTwoNorms = R"mlir(
func.func @f(%dy: tensor<3x7xf32>, %x: tensor<3x7xf32>, %rstd: tensor<3xf32>,
             %w: tensor<7xf32>, %dy2: tensor<5x16xf32>, %x2: tensor<5x16xf32>,
             %rstd2: tensor<5xf32>, %w2: tensor<16xf32>)
    -> (tensor<3x7xf32>, tensor<7xf32>, tensor<5x16xf32>, tensor<16xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<7xf32>)
      : tensor<3x7xf32>, tensor<3xf32> -> tensor<3x7xf32>, tensor<7xf32>
  %dx2, %dw2 = norm.rms_norm_grad %dy2, %x2, %rstd2 weight(%w2 : tensor<16xf32>)
      : tensor<5x16xf32>, tensor<5xf32> -> tensor<5x16xf32>, tensor<16xf32>
  return %dx, %dw, %dx2, %dw2
      : tensor<3x7xf32>, tensor<7xf32>, tensor<5x16xf32>, tensor<16xf32>
}
)mlir";

constexpr const char *kNoWeight = R"mlir(
func.func @f(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %rstd: tensor<4xf32>)
    -> tensor<4x8xf32> {
  %dx = norm.rms_norm_grad %dy, %x, %rstd
      : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  return %dx : tensor<4x8xf32>
}
)mlir";

// GroupNorm NCHW with 2 groups over [N, C, HW] = [2, 8, 16]: decomposed
// over [N, G, C/G, HW] = [2, 2, 4, 16], a multi-axis group.
constexpr const char *kGroupNorm = R"mlir(
func.func @f(%dy: tensor<2x8x16xf32>, %x: tensor<2x8x16xf32>,
             %mean: tensor<2x2xf32>, %rstd: tensor<2x2xf32>,
             %w: tensor<8xf32>)
    -> (tensor<2x8x16xf32>, tensor<8xf32>) {
  %dx, %dw = norm.group_norm_grad %dy, %x, %mean, %rstd
      weight(%w : tensor<8xf32>) {groups = 2 : i64}
      : tensor<2x8x16xf32>, tensor<2x2xf32> -> tensor<2x8x16xf32>, tensor<8xf32>
  return %dx, %dw : tensor<2x8x16xf32>, tensor<8xf32>
}
)mlir";

class MixedReductionsTest : public ::testing::Test {
protected:
  MixedReductionsTest() {
    DialectRegistry registry;
    registry.insert<func::FuncDialect>();
    norm::registerNormDialect(registry);
    context.appendDialectRegistry(registry);
    context.loadDialect<linalg::LinalgDialect, arith::ArithDialect,
                        tensor::TensorDialect>();
  }

  /// `source` parsed and decomposed to linalg on tensors; its function.
  func::FuncOp load(const char *source) {
    module = parseSourceString<ModuleOp>(source, &context);
    if (!module)
      return nullptr;
    RewritePatternSet patterns(&context);
    norm::populateNormDecomposePatterns(patterns);
    walkAndApplyPatterns(*module, std::move(patterns));
    return *module->getOps<func::FuncOp>().begin();
  }

  int64_t count(StringRef name) {
    int64_t n = 0;
    module->walk([&](Operation *op) { n += op->getName().getStringRef() == name; });
    return n;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(MixedReductionsTest, FindsGroupsWithoutChangingTheIR) {
  func::FuncOp fn = load(kTwoNorms);
  ASSERT_TRUE(fn);
  int64_t generics = count("linalg.generic");
  std::vector<norm::MixedReductionGroup> groups =
      norm::findMixedReductionGroups(fn);
  ASSERT_EQ(groups.size(), 2u);
  for (const norm::MixedReductionGroup &g : groups) {
    EXPECT_TRUE(g.wouldFuse()) << g.whyNot;
    EXPECT_EQ(g.nDim, 1u);
    EXPECT_FALSE(g.rowReductions.empty());
    EXPECT_FALSE(g.columnReductions.empty());
    EXPECT_GE(g.members.size(),
              g.rowReductions.size() + g.columnReductions.size());
  }
  EXPECT_EQ(groups[0].domain, (SmallVector<int64_t>{3, 7}));
  EXPECT_EQ(groups[1].domain, (SmallVector<int64_t>{5, 16}));
  EXPECT_EQ(count("norm.mixed_reduction"), 0);
  EXPECT_EQ(count("linalg.generic"), generics);
}

TEST_F(MixedReductionsTest, FusesOnlyTheGroupsTheControlAccepts) {
  func::FuncOp fn = load(kTwoNorms);
  ASSERT_TRUE(fn);
  int asked = 0;
  SmallVector<norm::MixedReductionOp> fused = norm::fuseMixedReductions(
      fn, {}, [&](const norm::MixedReductionGroup &g) {
        ++asked;
        return g.domain.back() == 16; // the second norm only
      });
  EXPECT_EQ(asked, 2);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(count("norm.mixed_reduction"), 1);
  auto type = cast<RankedTensorType>(fused[0].getFullResults()[0].getType());
  EXPECT_EQ(type.getShape(), (ArrayRef<int64_t>{5, 16}));
  // The declined group is as it was: its row and column reductions remain.
  EXPECT_GE(count("linalg.generic"), 2);
  EXPECT_TRUE(succeeded(verify(*module)));

  // Without a control, every group fuses.
  fn = load(kTwoNorms);
  EXPECT_EQ(norm::fuseMixedReductions(fn).size(), 2u);
  EXPECT_EQ(count("norm.mixed_reduction"), 2);
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(MixedReductionsTest, SaysWhyAGroupWouldNotFuse) {
  func::FuncOp fn = load(kNoWeight);
  ASSERT_TRUE(fn);
  std::vector<norm::MixedReductionGroup> groups =
      norm::findMixedReductionGroups(fn);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_FALSE(groups[0].wouldFuse());
  EXPECT_NE(groups[0].whyNot.find("row-only=true"), std::string::npos)
      << groups[0].whyNot;
  EXPECT_TRUE(norm::fuseMixedReductions(fn).empty());

  norm::MixedReductionOptions rowOnly;
  rowOnly.rowOnly = true;
  groups = norm::findMixedReductionGroups(fn, rowOnly);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_TRUE(groups[0].wouldFuse()) << groups[0].whyNot;
  EXPECT_EQ(norm::fuseMixedReductions(fn, rowOnly).size(), 1u);
  EXPECT_EQ(count("norm.mixed_reduction"), 1);
}

TEST_F(MixedReductionsTest, ReportsAndFusesAMultiAxisGroup) {
  func::FuncOp fn = load(kGroupNorm);
  ASSERT_TRUE(fn);
  std::vector<norm::MixedReductionGroup> groups =
      norm::findMixedReductionGroups(fn);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_TRUE(groups[0].wouldFuse()) << groups[0].whyNot;
  EXPECT_EQ(groups[0].domain, (SmallVector<int64_t>{2, 2, 4, 16}));
  EXPECT_EQ(groups[0].rowSumDims, (SmallVector<unsigned>{2, 3}));
  EXPECT_EQ(groups[0].colDims, (SmallVector<unsigned>{1, 2}));

  // Off, or batched rows only (norm-opt's GPU pipeline; GroupNorm is not
  // batched rows): reported with why, nothing fused.
  for (auto [mode, word] :
       {std::pair(norm::MultiAxisGroups::None, "multi-axis=false"),
        std::pair(norm::MultiAxisGroups::BatchedRows, "multi-axis=batched")}) {
    norm::MixedReductionOptions off;
    off.multiAxis = mode;
    groups = norm::findMixedReductionGroups(fn, off);
    ASSERT_EQ(groups.size(), 1u);
    EXPECT_FALSE(groups[0].wouldFuse());
    EXPECT_NE(groups[0].whyNot.find(word), std::string::npos)
        << groups[0].whyNot;
    EXPECT_TRUE(norm::fuseMixedReductions(fn, off).empty());
    EXPECT_EQ(count("norm.mixed_reduction"), 0);
  }
  EXPECT_EQ(norm::parseMultiAxisGroups("batched"),
            norm::MultiAxisGroups::BatchedRows);
  EXPECT_EQ(norm::parseMultiAxisGroups("maybe"), std::nullopt);

  SmallVector<norm::MixedReductionOp> fused = norm::fuseMixedReductions(fn);
  ASSERT_EQ(fused.size(), 1u);
  norm::MixedReductionOp op = fused[0];
  EXPECT_TRUE(op.isMultiAxis());
  EXPECT_EQ(op.getRowSumDimList(), (SmallVector<int64_t>{2, 3}));
  EXPECT_EQ(op.getRowDimList(), (SmallVector<int64_t>{0, 1}));
  EXPECT_EQ(op.getRowShape(), (SmallVector<int64_t>{2, 2}));
  EXPECT_EQ(op.getColShape(), (SmallVector<int64_t>{2, 4}));
  EXPECT_TRUE(succeeded(verify(*module)));
}

} // namespace

// Batched rows: the multi-axis domains the GPU lowering takes (a 2-D
// [rows, N] problem per point of the leading dims).
TEST(BatchedRowsRank, IsTheLeadingDimsBothSidesKeep) {
  using norm::batchedRowsRank;
  EXPECT_EQ(batchedRowsRank(3, {2}, {0, 2}), 1);       // adaLN [B, S, N]
  EXPECT_EQ(batchedRowsRank(4, {3}, {0, 1, 3}), 2);    // [B1, B2, S, N]
  EXPECT_EQ(batchedRowsRank(3, {2}, {1, 2}), 0);       // not leading
  EXPECT_EQ(batchedRowsRank(3, {2}, {0, 1, 2}), 0);    // no row dim left
  EXPECT_EQ(batchedRowsRank(4, {2, 3}, {1, 2}), 0);    // GroupNorm NCHW
  EXPECT_EQ(batchedRowsRank(4, {1, 3}, {2, 3}), 0);    // GroupNorm NHWC
  EXPECT_EQ(batchedRowsRank(3, {1}, {0, 1}), 0);       // N not the last dim
  EXPECT_EQ(batchedRowsRank(2, {1}, {1}), 0);          // 2-D
}

// Slab domains: GroupNorm's roles in one of two orders (the GPU's slab
// kernel), A and C static.
TEST(SlabDomainOf, IsGroupNormsTwoLayouts) {
  using norm::slabDomainOf;
  int64_t dyn = ShapedType::kDynamic;
  // NCHW [N, G, C/G, H, W]: R A C D D.
  std::optional<norm::SlabDomain> nchw =
      slabDomainOf({dyn, 32, 10, 64, 64}, {2, 3, 4}, {1, 2});
  ASSERT_TRUE(nchw.has_value());
  EXPECT_FALSE(nchw->channelsLast);
  EXPECT_EQ(nchw->aSize, 32);
  EXPECT_EQ(nchw->cSize, 10);
  EXPECT_EQ(nchw->dRank, 2);
  // NHWC [N, H, W, G, C/G]: R D D A C; H and W at run time.
  std::optional<norm::SlabDomain> nhwc =
      slabDomainOf({dyn, dyn, dyn, 4, 2}, {1, 2, 4}, {3, 4});
  ASSERT_TRUE(nhwc.has_value());
  EXPECT_TRUE(nhwc->channelsLast);
  EXPECT_EQ(nhwc->rRank, 1);
  // Not slabs: a run-time G, roles in another order, no spatial dim.
  EXPECT_FALSE(slabDomainOf({2, dyn, 3, 4}, {2, 3}, {1, 2}).has_value());
  EXPECT_FALSE(slabDomainOf({2, 3, 2, 4}, {1, 3}, {1, 2}).has_value());
  EXPECT_FALSE(slabDomainOf({2, 4, 3}, {2}, {1, 2}).has_value());
  // adaLN's batched rows are not slabs (no D dims).
  EXPECT_FALSE(slabDomainOf({2, 3, 8}, {2}, {0, 2}).has_value());
}
