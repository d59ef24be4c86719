//===- KernelPlanTest.cpp - planKernel over (op, shape, dtype, chip) ------===//
//
// Part of norm-opt. The kernel plan of LayerNorm / RMSNorm backward ops
// (fused from norm.*_grad as the pipeline does) per chip: a table of
// expected plans, and invariants every plan keeps (its shared memory fits
// the chip's CTA limit; the cp.async ring starts 16-byte aligned).
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/GpuOptions.h"
#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/NormToGPU/KernelNames.h"
#include "norm/InitNorm.h"
#include "norm/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::norm;

namespace {

/// The norm dialect and func, loaded into `context`.
void loadNormDialects(MLIRContext &context) {
  DialectRegistry registry;
  registerNormDialect(registry);
  registry.insert<func::FuncDialect>();
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
}

struct Expected {
  int64_t vector, threadsPerRow, rowsPerCta, chunksPerThread, asyncStages;
  bool prefetch, combineInCta, singleLaunch;
  int64_t columnGroups, splitColumnGroups, dynamicSharedBytes,
      splitSharedBytes;
  int64_t clusterCtas = 1;
  int64_t bulkStages = 0;
  bool peel = false;
};

struct Case {
  const char *kind; // "layer" or "rms"
  const char *config;
  int64_t n;
  const char *chip;
  Expected plan;
};

// (op, activation/weight dtype, N, chip) -> plan, as python/norm_opt/
// kernel_set.py writes the ops (dynamic rows, static N).
const Case kCases[] = {
    // Short rows: several rows per CTA, partials combined in the CTA.
    // At 16 columns per lane LayerNorm's register prefetch would cost the
    // second CTA per SM (160 registers against 126 without, H200:
    // 131072x128 41.9 -> 38.3 us); RMSNorm's fits two CTAs with it.
    {"layer", "bf16", 128, "sm_90a", {8, 8, 32, 2, 0, false, true, true, 0, 0, 32768, 0}},
    {"rms", "bf16", 128, "sm_90a", {8, 8, 32, 2, 0, true, true, true, 0, 0, 16384, 0}},
    {"rms", "bf16", 384, "sm_90a", {8, 16, 16, 3, 3, false, true, true, 0, 0, 98304, 0}},
    {"rms", "bf16", 1024, "sm_90a", {8, 32, 8, 4, 3, false, true, true, 0, 0, 131072, 0}},
    // Rows of 256 lanes: the cp.async ring behind no accumulators.
    {"rms", "bf16", 5120, "sm_90a", {8, 256, 1, 3, 3, false, false, true, 0, 0, 73728, 0}},
    {"rms", "bf16", 8192, "sm_90a", {8, 256, 1, 4, 3, false, false, true, 0, 0, 98304, 0}},
    // Looped 16-bit rows: column groups and the split kernels for few rows;
    // on sm_90a the bulk ring behind the accumulators, as deep as fits 224
    // KiB (RMSNorm 10240: 3 stages of 40 KiB), for rows under 48 KiB (N <
    // 12288; on sm_80 without the ring).
    {"rms", "bf16", 12288, "sm_80", {8, 512, 1, 0, 0, false, false, false, 1, 4, 49152, 12288}},
    {"rms", "bf16", 10240, "sm_90a", {8, 512, 1, 0, 0, false, false, false, 1, 4, 163888, 10240, 1, 3}},
    // 12288 (48 KiB) in a cluster of 4 parts of 128 lanes; LayerNorm's two
    // row sums a row ahead with a ring of 3.
    {"rms", "bf16", 12288, "sm_90a", {8, 128, 1, 3, 2, false, false, false, 0, 0, 24576, 0, 4}},
    {"layer", "bf16", 12288, "sm_90a", {8, 128, 1, 3, 3, false, false, false, 0, 0, 36864, 0, 4}},
    // Rows of 64 KiB (N = 16384) take a cluster of 4 parts of 128 lanes
    // (two CTAs per SM) instead of the ring's 2 stages.
    {"rms", "bf16", 16384, "sm_90a", {8, 128, 1, 4, 2, false, false, false, 0, 0, 32768, 0, 4}},
    // Odd N (the scalar kernel) and 32-bit rows past one CTA: clusters of
    // resident CTAs (4 of 256 lanes for 17389: 8695 columns would need 34
    // per lane at 256).
    {"rms", "bf16", 17389, "sm_90a", {1, 256, 1, 17, 0, true, false, false, 0, 0, 0, 0, 4}},
    // Odd N that one CTA holds: the peeled vector kernel (16-byte chunks
    // between a scalar head and tail per row), planned as for N rounded up
    // to the vector.
    {"layer", "bf16", 2999, "sm_90a", {8, 128, 2, 3, 0, true, true, true, 0, 0, 47984, 0, 1, 0, true}},
    {"rms", "f32", 4099, "sm_90a", {4, 256, 1, 5, 0, true, false, true, 0, 0, 0, 0, 1, 0, true}},
    // N = 32768: two stages of a whole row do not fit beside the
    // accumulators (128 KiB, or a part of 128 KiB): no bulk ring, so a
    // cluster of 8 parts of 128 lanes (two CTAs per SM), the cp.async ring
    // at most 2 deep, 3 for LayerNorm's row sums a row ahead (two sums); on
    // sm_80 the looped kernels without the bulk ring.
    {"rms", "bf16", 32768, "sm_90a", {8, 128, 1, 4, 2, false, false, false, 0, 0, 32768, 0, 8}},
    {"layer", "bf16", 32768, "sm_90a", {8, 128, 1, 4, 3, false, false, false, 0, 0, 49152, 0, 8}},
    {"layer", "bf16", 32768, "sm_80", {8, 512, 1, 0, 0, false, false, false, 2, 4, 131072, 65536}},
    {"layer", "bf16", 2048, "sm_90a", {8, 64, 4, 4, 3, false, true, true, 0, 0, 163840, 0}},
    // Looped, it would take two column groups, each CTA staging the whole
    // row (the row sums): a cluster of 4 instead.
    {"layer", "bf16", 16384, "sm_90a", {8, 128, 1, 4, 3, false, false, false, 0, 0, 49152, 0, 4}},
    // Rows of 128 lanes: two per CTA, partials combined in the CTA.
    {"layer", "f32", 4096, "sm_90a", {4, 128, 2, 8, 0, false, true, true, 0, 0, 65536, 0}},
    {"rms", "bf16", 4096, "sm_90a", {8, 128, 2, 4, 0, true, true, true, 0, 0, 32768, 0}},
    {"layer", "bf16", 3000, "sm_90a", {8, 128, 2, 3, 0, true, true, true, 0, 0, 48000, 0}},
    {"layer", "f32", 16384, "sm_90a", {4, 256, 1, 8, 0, false, false, false, 0, 0, 0, 0, 2}},
    {"layer", "f32", 32768, "sm_90a", {4, 256, 1, 8, 0, false, false, false, 0, 0, 0, 0, 4}},
    {"layer", "bf16w32", 4096, "sm_90a", {8, 128, 2, 4, 3, false, true, true, 0, 0, 163840, 0}},
    // sm_80 (no clusters): 163 KiB per CTA still holds 160 KiB of
    // accumulators; the looped variant (column groups, the split kernels
    // for few rows) has two CTAs per SM of 68 KiB parts (164 KiB per SM).
    {"rms", "bf16", 5120, "sm_80", {8, 256, 1, 3, 3, false, false, true, 0, 0, 73728, 0}},
    {"layer", "bf16", 2048, "sm_80", {8, 64, 4, 4, 3, false, true, true, 0, 0, 163840, 0}},
    {"layer", "bf16", 16384, "sm_80", {8, 512, 1, 0, 0, false, false, false, 2, 4, 65536, 32768}},
    // sm_86: 99 KiB per CTA: no room for a ring beside 64 KiB of
    // accumulators.
    {"layer", "bf16", 2048, "sm_86", {8, 64, 4, 4, 0, false, true, true, 0, 0, 65536, 0}},
    {"rms", "bf16", 384, "sm_86", {8, 16, 16, 3, 3, false, true, true, 0, 0, 98304, 0}},
    {"layer", "bf16", 16384, "sm_86", {8, 512, 1, 0, 0, false, false, false, 2, 4, 65536, 32768}},
};

// Names the case in test output (instead of its bytes).
void PrintTo(const Case &c, std::ostream *os) {
  *os << c.kind << " " << c.config << " N=" << c.n << " " << c.chip;
}

std::string source(const Case &c) {
  std::string x = c.config == std::string("f32") ? "f32" : "bf16";
  std::string w = c.config == std::string("bf16w32") || x == "f32" ? "f32"
                                                                   : "bf16";
  std::string n = c.n < 0 ? "?" : std::to_string(c.n); // -1: a run-time N
  std::string full = "tensor<?x" + n + "x" + x + ">";
  std::string vec = "tensor<" + n + "x" + w + ">";
  if (c.kind == std::string("layer"))
    return "func.func @f(%dy: " + full + ", %x: " + full +
           ", %mean: tensor<?xf32>, %rstd: tensor<?xf32>, %w: " + vec +
           ", %b: " + vec + ") -> (" + full + ", " + vec + ", " + vec +
           ") {\n  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, "
           "%rstd weight(%w : " + vec + ") bias(%b : " + vec + ") : " + full +
           ", tensor<?xf32> -> " + full + ", " + vec + ", " + vec +
           "\n  return %dx, %dw, %db : " + full + ", " + vec + ", " + vec +
           "\n}\n";
  return "func.func @f(%dy: " + full + ", %x: " + full +
         ", %rstd: tensor<?xf32>, %w: " + vec + ") -> (" + full + ", " + vec +
         ") {\n  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : " +
         vec + ") : " + full + ", tensor<?xf32> -> " + full + ", " + vec +
         "\n  return %dx, %dw : " + full + ", " + vec + "\n}\n";
}

class KernelPlanTest : public ::testing::TestWithParam<Case> {
protected:
  KernelPlanTest() { loadNormDialects(context); }

  /// The fused op of `c`'s function, as the pipeline leaves it.
  MixedReductionOp fused(const Case &c) {
    module = parseSourceString<ModuleOp>(source(c), &context);
    if (!module)
      return {};
    PassManager pm(&context);
    pm.addPass(createNormDecompose());
    pm.nest<func::FuncOp>().addPass(createNormFuseMixedReductions());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (failed(pm.run(*module)))
      return {};
    MixedReductionOp op;
    module->walk([&](MixedReductionOp found) { op = found; });
    return op;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

// The table checks the attribute the pass attaches (what the kernel
// builders and the host lowering read), not the planner's struct.
TEST_P(KernelPlanTest, MatchesTable) {
  const Case &c = GetParam();
  MixedReductionOp op = fused(c);
  ASSERT_TRUE(op) << source(c);
  std::optional<GpuTarget> target = lookupGpuTarget(c.chip);
  ASSERT_TRUE(target);
  KernelPlanAttr plan = kernelPlanAttr(
      &context, "f_0", planKernel(op, KernelPlanOptions(), *target));
  const Expected &e = c.plan;
  EXPECT_EQ(plan.getVector(), e.vector);
  EXPECT_EQ(plan.getThreadsPerRow(), e.threadsPerRow);
  EXPECT_EQ(plan.getRowsPerCta(), e.rowsPerCta);
  EXPECT_EQ(plan.getChunksPerThread(), e.chunksPerThread);
  EXPECT_EQ(plan.getAsyncStages(), e.asyncStages);
  EXPECT_EQ(plan.getPrefetch(), e.prefetch);
  EXPECT_EQ(plan.getCombineInCta().getValue(), e.combineInCta);
  EXPECT_EQ(plan.getSingleLaunch().getValue(), e.singleLaunch);
  EXPECT_EQ(plan.getColumnGroups(), e.columnGroups);
  EXPECT_EQ(plan.getSplitColumnGroups(), e.splitColumnGroups);
  EXPECT_EQ(plan.getDynamicSharedBytes(), e.dynamicSharedBytes);
  EXPECT_EQ(plan.getSplitSharedBytes(), e.splitSharedBytes);
  EXPECT_EQ(plan.getClusterCtas(), e.clusterCtas);
  EXPECT_EQ(plan.getBulkStages(), e.bulkStages);
  EXPECT_EQ(plan.getPeel(), e.peel);
  EXPECT_EQ(plan.getBlock(), e.threadsPerRow * e.rowsPerCta);
  // Every plan with column results on sm_90+ launches its final kernel as
  // a programmatic dependent; the tiers alike (their final kernels are
  // built with the plan's flag, their main kernels with their own).
  EXPECT_EQ(plan.getDependentLaunch(), target->hasDependentLaunch);
  KernelPlanOptions off;
  off.dependentLaunch = false;
  EXPECT_FALSE(planKernel(op, off, *target).dependentLaunch);
}

/// The fields of a plan the kernel builders and the launches read: every
/// generated field (KernelPlanFields), the static N and the tiers.
void expectSameForBuilders(const KernelPlan &a, const KernelPlan &b) {
  EXPECT_STREQ(a.firstDifferentField(b), "");
  EXPECT_EQ(a.staticCols, b.staticCols);
  ASSERT_EQ(a.tiers.size(), b.tiers.size());
  for (auto [x, y] : llvm::zip(a.tiers, b.tiers))
    expectSameForBuilders(x, y);
}

// The attribute is the whole plan: what the builders read back from it
// (readKernelPlan) is what the planner decided, tiers included; and the
// main kernels are the ones mainKernels lists for it.
TEST_P(KernelPlanTest, RoundTripsThroughTheAttribute) {
  Case c = GetParam();
  for (int64_t n : {c.n, int64_t(-1)}) { // the case's N, then a run-time N
    c.n = n;
    MixedReductionOp op = fused(c);
    ASSERT_TRUE(op);
    KernelPlan decided =
        planKernel(op, KernelPlanOptions(), *lookupGpuTarget(c.chip));
    op->setAttr(kKernelPlanAttrName, kernelPlanAttr(&context, "f_0", decided));
    FailureOr<KernelPlan> read = readKernelPlan(op);
    ASSERT_TRUE(succeeded(read));
    expectSameForBuilders(*read, decided);
    SmallVector<MainKernel> kernels = mainKernels(*read, "f_0");
    // The latency pair (a static N on sm_90+) comes last.
    while (!kernels.empty() && kernels.back().latency)
      kernels.pop_back();
    ASSERT_FALSE(kernels.empty());
    EXPECT_EQ(kernels.back().name, decided.splitColumnGroups > 0
                                       ? "f_0_main_split_scalar"
                                       : "f_0_main_scalar");
  }
}

// Each main kernel is built from its own plan (mainKernelPlan), with every
// choice of that kernel made there: the builders change nothing.
TEST_P(KernelPlanTest, EachMainKernelHasItsOwnPlan) {
  const Case &c = GetParam();
  MixedReductionOp op = fused(c);
  ASSERT_TRUE(op);
  KernelPlan plan =
      planKernel(op, KernelPlanOptions(), *lookupGpuTarget(c.chip));
  for (const MainKernel &kernel : mainKernels(plan, "f_0")) {
    SCOPED_TRACE(kernel.name);
    KernelPlan k = mainKernelPlan(op, plan, kernel);
    EXPECT_EQ(k.vector, kernel.vector);
    if (kernel.latency) {
      // One cluster of latency_ctas CTAs whose parts cover the row, each
      // within its lanes' columns; rows read again per pass: no ring,
      // prefetch or peel; the kernel finishes the columns itself.
      EXPECT_TRUE(k.latencyKernel());
      EXPECT_EQ(k.clusterCtas, plan.latencyCtas);
      EXPECT_EQ(k.block(), kLatencyThreads);
      EXPECT_LE(k.chunksPerThread * k.vector, kLatencyMaxColumns);
      int64_t chunks = (*plan.staticCols + k.vector - 1) / k.vector;
      int64_t part = (chunks + k.clusterCtas - 1) / k.clusterCtas;
      EXPECT_GE(k.threadsPerRow * k.chunksPerThread, part);
      EXPECT_GE(part * (k.clusterCtas - 1), 0);
      EXPECT_LT(part * (k.clusterCtas - 1), chunks); // every CTA has a part
      EXPECT_EQ(k.asyncStages + k.bulkStages, 0);
      EXPECT_FALSE(k.prefetch || k.peel || k.singleLaunch || k.dependentLaunch);
      EXPECT_GE(k.latencyUnroll, 1);
      EXPECT_LE(k.latencyUnroll, kLatencyUnroll);
      continue;
    }
    EXPECT_FALSE(k.latencyKernel());
    // The same columns per lane in every kernel of the plan.
    EXPECT_EQ(k.chunksPerThread * k.vector,
              plan.chunksPerThread * plan.vector);
    if (kernel.vector == 1) {
      EXPECT_EQ(k.asyncStages, 0);
      EXPECT_EQ(k.bulkStages, 0);
    }
    if (kernel.vector < plan.vector) {
      EXPECT_EQ(k.prefetch, plan.scalarPrefetch && k.asyncStages == 0);
      EXPECT_FALSE(k.twoCtasPerSm);
    }
    EXPECT_FALSE(k.prefetch && k.asyncStages > 0);
    EXPECT_FALSE(k.ringRowInputs && k.asyncStages == 0);
    EXPECT_FALSE(k.clusterSumsAhead && k.asyncStages < 3);
    if (!kernel.split && kernel.vector > 1)
      EXPECT_EQ(k.peel, kernel.peel);
    if (kernel.split)
      EXPECT_EQ(k.columnGroups, plan.splitColumnGroups);
    else
      EXPECT_EQ(k.columnGroups, plan.columnGroups);
  }
}

// The latency kernels: on a chip with clusters, every static N has them,
// for at most latency-max-rows rows and kLatencyChunkRows chunks, in a cluster
// of at most latency-ctas CTAs that each own a part; none without
// clusters, and none where the options turn them off.
TEST_P(KernelPlanTest, LatencyKernelsWhereClustersAre) {
  const Case &c = GetParam();
  MixedReductionOp op = fused(c);
  ASSERT_TRUE(op);
  GpuTarget target = *lookupGpuTarget(c.chip);
  KernelPlanOptions options;
  KernelPlan plan = planKernel(op, options, target);
  if (!target.hasClusters) {
    EXPECT_EQ(plan.latencyCtas, 0);
    EXPECT_EQ(plan.latencyRows, 0);
    return;
  }
  ASSERT_GE(plan.latencyCtas, 2);
  EXPECT_LE(plan.latencyCtas, options.latencyCTAs);
  int64_t chunks =
      c.n % plan.vector == 0 ? c.n / plan.vector : c.n; // the vector kernel's
  int64_t part = (chunks + plan.latencyCtas - 1) / plan.latencyCtas;
  EXPECT_GE(plan.latencyRows, 1);
  EXPECT_LE(plan.latencyRows, options.latencyMaxRows);
  EXPECT_LE(plan.latencyRows * part, kLatencyChunkRows);
  options.latencyCTAs = 0;
  EXPECT_EQ(planKernel(op, options, target).latencyCtas, 0);
  options.latencyCTAs = 16;
  options.latencyMaxRows = 0;
  EXPECT_EQ(planKernel(op, options, target).latencyCtas, 0);
}

TEST_P(KernelPlanTest, FitsTheChip) {
  const Case &c = GetParam();
  MixedReductionOp op = fused(c);
  ASSERT_TRUE(op);
  GpuTarget target = *lookupGpuTarget(c.chip);
  KernelPlan plan = planKernel(op, KernelPlanOptions(), target);
  // Dynamic shared memory plus the static arrays (warp slots, the tail's
  // slices: at most 3 KiB) within the CTA's limit.
  // The bulk ring takes the SM (one CTA), the rest leave room for two.
  EXPECT_LE(plan.dynamicSharedBytes, plan.bulkStages
                                         ? maxDynamicSharedBytes(target)
                                         : maxAccumulatorSharedBytes(target));
  EXPECT_LE(plan.splitSharedBytes, maxAccumulatorSharedBytes(target));
  EXPECT_LE(maxDynamicSharedBytes(target) + 3 * 1024,
            target.sharedBytesPerBlock);
  if (plan.bulkStages) {
    EXPECT_TRUE(target.hasBulkCopy);
    EXPECT_GE(plan.bulkStages, 2);
    EXPECT_FALSE(plan.resident());
    EXPECT_FALSE(plan.twoCtasPerSm);
    EXPECT_EQ(plan.bulkRingOffset % 16, 0);
    EXPECT_LE(plan.bulkRingOffset + plan.bulkStages * kBulkBarrierBytes,
              plan.dynamicSharedBytes);
  }

  EXPECT_LE(maxAccumulatorSharedBytes(target) + 3 * 1024,
            target.sharedBytesPerBlock);
  // The ring is read with 16-byte vectors.
  EXPECT_EQ(plan.asyncRingOffset % 16, 0);
  EXPECT_LE(plan.block(), target.maxThreadsPerBlock);
  EXPECT_LE(plan.estimatedRegisters, target.registersPerThread);
  if (plan.twoCtasPerSm) {
    EXPECT_LE(2 * (plan.dynamicSharedBytes + 3 * 1024),
              target.sharedBytesPerSM);
  }
}

// The scalar fallback of a vector plan prefetches only where one register
// per prefetched element fits: RMSNorm bf16 4096 (32 columns per lane)
// spilled with it at two rows per CTA; LayerNorm bf16 3000 (24) does not.
TEST_P(KernelPlanTest, ScalarFallbackPrefetchFits) {
  const Case &c = GetParam();
  MixedReductionOp op = fused(c);
  ASSERT_TRUE(op);
  KernelPlan plan =
      planKernel(op, KernelPlanOptions(), *lookupGpuTarget(c.chip));
  if (!plan.prefetch) {
    EXPECT_FALSE(plan.scalarPrefetch);
  }
  if (std::string(c.config) == "bf16" && c.n == 4096 && plan.prefetch) {
    EXPECT_FALSE(plan.scalarPrefetch);
  }
  if (std::string(c.config) == "bf16" && c.n == 3000) {
    EXPECT_TRUE(plan.scalarPrefetch);
  }
}

// Peeled rows over the space of N around each case's (odd, one off a
// multiple of the vector, the multiple itself): the peeled kernel exactly
// where N is not a multiple of the vector and its plan is one the kernel
// runs (resident, one CTA per row, a lane per head and tail column), else
// the scalar kernel only; never with peel-rows=false.
TEST_P(KernelPlanTest, PeelsExactlyWhereRowsMisalign) {
  Case c = GetParam();
  GpuTarget target = *lookupGpuTarget(c.chip);
  int64_t base = c.n;
  for (int64_t n : {base - 1, base, base + 1, base + 3, base | 1}) {
    if (n < 1)
      continue;
    c.n = n;
    SCOPED_TRACE("N = " + std::to_string(n));
    MixedReductionOp op = fused(c);
    ASSERT_TRUE(op);
    KernelPlanOptions options;
    KernelPlan plan = planKernel(op, options, target);
    int64_t width = planKernel(op, [] {
                      KernelPlanOptions aligned;
                      aligned.peelRows = false;
                      return aligned;
                    }(), target).vector;
    if (plan.peel) {
      EXPECT_GT(plan.vector, 1);
      EXPECT_NE(n % plan.vector, 0);
      EXPECT_TRUE(plan.resident());
      EXPECT_EQ(plan.clusterCtas, 1);
      EXPECT_GE(plan.threadsPerRow, plan.vector);
      EXPECT_GE(plan.threadsPerRow * plan.chunksPerThread * plan.vector, n);
    } else if (plan.vector > 1) {
      EXPECT_EQ(n % plan.vector, 0);
    }
    options.peelRows = false;
    KernelPlan scalar = planKernel(op, options, target);
    EXPECT_FALSE(scalar.peel);
    // Without peeling, a misaligned N is the scalar kernel's alone.
    if (plan.peel) {
      EXPECT_EQ(width, 1);
    }
  }
}

// Long 16-bit rows over the space of N past one CTA: the looped kernel
// where its bulk ring stages whole rows of under 48 KiB (sm_90+), else a
// cluster of parts
// of at most 128 lanes (two CTAs per SM) with a cp.async ring of at most 2
// rows, where a cluster holds the row with at most a tenth of its lanes'
// chunks idle (N = 24576, 32768: none; 20000: 19%, looped); looped
// everywhere on sm_8x and with max-cluster-ctas=1.
/// `plan` on `op` is refused where the builders read it (readKernelPlan
/// runs the attribute's verifier), with an error that says `what`.
void expectRefused(MixedReductionOp op, const KernelPlan &plan,
                   StringRef what) {
  std::string error;
  {
    ScopedDiagnosticHandler capture(op->getContext(), [&](Diagnostic &d) {
      error = d.str();
      return success();
    });
    op->setAttr(kKernelPlanAttrName,
                kernelPlanAttr(op->getContext(), "f_0", plan));
    EXPECT_TRUE(failed(readKernelPlan(op)));
  }
  EXPECT_NE(error.find(what.str()), std::string::npos) << error;
}

TEST_P(KernelPlanTest, LongRowsStageWholeOrTakeNarrowClusters) {
  Case c = GetParam();
  if (std::string(c.config) == "f32")
    return;
  GpuTarget target = *lookupGpuTarget(c.chip);
  for (int64_t n : {12288, 16384, 20000, 24576, 32768, 40960, 65536}) {
    c.n = n;
    SCOPED_TRACE("N = " + std::to_string(n));
    MixedReductionOp op = fused(c);
    ASSERT_TRUE(op);
    KernelPlan plan = planKernel(op, KernelPlanOptions(), target);
    KernelPlanOptions noClusters;
    noClusters.maxClusterCTAs = 1;
    KernelPlan looped = planKernel(op, noClusters, target);
    EXPECT_FALSE(looped.resident());
    // rows-per-cta is the resident variant's: a looped row and a
    // cluster's row parts take one row per CTA whatever it asks (two read
    // out of bounds at 1024x32768); a looped plan that says otherwise is
    // refused where the builders read it.
    for (int64_t clusters : {1, 8}) {
      KernelPlanOptions twoRows;
      twoRows.rowsPerCTA = 2;
      twoRows.maxClusterCTAs = clusters;
      KernelPlan asked = planKernel(op, twoRows, target);
      if (!asked.resident() || asked.clusterCtas > 1)
        EXPECT_EQ(asked.rowsPerCta, 1);
    }
    KernelPlan twoLooped = looped;
    twoLooped.rowsPerCta = 2;
    expectRefused(op, twoLooped, "the looped variant takes one row per CTA");
    // The clusters' st.async needs PTX 8.1.
    KernelPlanOptions ptx80;
    ptx80.features = "+ptx80";
    EXPECT_EQ(planKernel(op, ptx80, target).clusterCtas, 1);
    if (!target.hasClusters) {
      EXPECT_EQ(plan.clusterCtas, 1);
      EXPECT_FALSE(plan.resident());
      continue;
    }
    // x and dy: 4 bytes a column.
    if (looped.bulkStages >= 2 && 4 * n < 48 * 1024) {
      EXPECT_EQ(plan.clusterCtas, 1);
      EXPECT_EQ(plan.bulkStages, looped.bulkStages);
    } else if (plan.clusterCtas > 1) {
      EXPECT_TRUE(plan.resident());
      EXPECT_LE(plan.threadsPerRow, 128);
      // LayerNorm's two row sums go a row ahead, with a third ring row.
      bool twoSums = std::string(c.kind) == "layer";
      EXPECT_EQ(plan.clusterSumsAhead, twoSums);
      EXPECT_EQ(plan.asyncStages, twoSums ? 3 : 2);
      // Without room for the third row (async-stages=2): the sums wait in
      // their own row.
      KernelPlanOptions twoStages;
      twoStages.asyncStages = 2;
      KernelPlan shallow = planKernel(op, twoStages, target);
      EXPECT_EQ(shallow.asyncStages, 2);
      EXPECT_FALSE(shallow.clusterSumsAhead);
      KernelPlan twoClustered = plan;
      twoClustered.rowsPerCta = 2;
      expectRefused(op, twoClustered, "one row per CTA");
      int64_t slots = plan.clusterCtas * plan.threadsPerRow *
                      plan.chunksPerThread * plan.vector;
      EXPECT_GE(slots, n);
      EXPECT_GE(10 * n, 9 * slots);
    } else {
      // No cluster of 8 holds it, or one would leave chunks idle.
      EXPECT_FALSE(plan.resident());
      EXPECT_TRUE(n > 8 * 128 * 32 || n == 20000);
    }
    if (n == 24576 || n == 32768) {
      EXPECT_EQ(plan.clusterCtas, 8);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, KernelPlanTest, ::testing::ValuesIn(kCases),
    [](const ::testing::TestParamInfo<Case> &info) {
      return std::string(info.param.kind) + "_" + info.param.config + "_" +
             std::to_string(info.param.n) + "_" + info.param.chip;
    });

// A run-time N: the looped plan plus resident tiers, each the plan a static
// N = its capacity gets (capacities m, 1.5m, 2m, 3m, ... from tier-min-cols,
// up to the largest N the resident variant holds).
class KernelPlanTierTest : public KernelPlanTest {};

TEST_P(KernelPlanTierTest, TiersAreTheStaticPlans) {
  Case dynamic = GetParam();
  dynamic.n = -1;
  MixedReductionOp op = fused(dynamic);
  ASSERT_TRUE(op) << source(dynamic);
  GpuTarget target = *lookupGpuTarget(dynamic.chip);
  KernelPlanOptions options;
  KernelPlan plan = planKernel(op, options, target);
  EXPECT_FALSE(plan.resident());
  EXPECT_FALSE(plan.staticCols);
  ASSERT_FALSE(plan.tiers.empty());
  EXPECT_EQ(plan.tiers.front().cols, options.tierMinCols);
  int64_t previous = 0;
  for (const KernelPlan &tier : plan.tiers) {
    SCOPED_TRACE("tier " + std::to_string(tier.cols));
    EXPECT_GT(tier.cols, previous);
    EXPECT_TRUE(tier.cols == 2 * previous || 2 * tier.cols == 3 * previous ||
                tier.cols == 4 * previous / 3 || previous == 0);
    previous = tier.cols;
    EXPECT_TRUE(tier.resident());
    EXPECT_FALSE(tier.staticCols); // its kernels read N at run time
    EXPECT_TRUE(tier.tiers.empty());
    EXPECT_EQ(tier.vector, plan.vector);
    EXPECT_GE(tier.threadsPerRow * tier.chunksPerThread * tier.vector,
              tier.cols);
    // Every tier of a vector plan also peels rows (a run-time N need not
    // be a multiple of the vector); its `_main` kernel is the static one.
    EXPECT_EQ(tier.peel, tier.vector > 1);
    Case fixed = GetParam();
    fixed.n = tier.cols;
    MixedReductionOp staticOp = fused(fixed);
    ASSERT_TRUE(staticOp);
    KernelPlan same = planKernel(staticOp, options, target);
    EXPECT_EQ(same.vector, tier.vector);
    EXPECT_FALSE(same.peel);
    EXPECT_EQ(same.threadsPerRow, tier.threadsPerRow);
    EXPECT_EQ(same.chunksPerThread, tier.chunksPerThread);
    EXPECT_EQ(same.prefetch, tier.prefetch);
    EXPECT_EQ(same.asyncStages, tier.asyncStages);
    EXPECT_EQ(same.singleLaunch, tier.singleLaunch);
    // Rows of 128 lanes: a static N takes two per CTA (partials combined),
    // a tier one (its masked scalar kernel would spill at 256 threads).
    if (same.threadsPerRow == 128 && same.combineInCta) {
      EXPECT_EQ(same.rowsPerCta, 2);
      EXPECT_EQ(tier.rowsPerCta, 1);
      EXPECT_FALSE(tier.combineInCta);
    } else {
      EXPECT_EQ(same.rowsPerCta, tier.rowsPerCta);
      EXPECT_EQ(same.combineInCta, tier.combineInCta);
      EXPECT_EQ(same.dynamicSharedBytes, tier.dynamicSharedBytes);
    }
    EXPECT_LE(tier.dynamicSharedBytes, maxAccumulatorSharedBytes(target));
  }
  // The next capacity up is looped: the tiers go as far as they can.
  int64_t last = plan.tiers.back().cols;
  bool lastIsPowerOfTwo = (last & (last - 1)) == 0;
  Case beyond = GetParam();
  beyond.n = lastIsPowerOfTwo ? last + last / 2 : last / 3 * 4;
  MixedReductionOp beyondOp = fused(beyond);
  ASSERT_TRUE(beyondOp);
  // (in one CTA; a cluster holds it)
  KernelPlanOptions oneCTA = options;
  oneCTA.maxClusterCTAs = 1;
  EXPECT_FALSE(planKernel(beyondOp, oneCTA, target).resident())
      << "N = " << beyond.n;
  KernelPlan clustered = planKernel(beyondOp, options, target);
  // Only a cluster holds it: 32-bit rows on sm_90+ (16-bit rows stay
  // looped, see pickCluster, but for rows of 48 KiB: N = 12288 in 4 parts
  // of 128 lanes).
  bool wide = std::string(dynamic.config) == "f32";
  bool over48K = !wide && 4 * beyond.n >= 48 * 1024;
  EXPECT_EQ(clustered.resident(), target.hasClusters && (wide || over48K))
      << "N = " << beyond.n;
  EXPECT_EQ(clustered.clusterCtas,
            !clustered.resident() ? 1 : wide ? 2 : 4);
  // No tiers for a static N, nor with tier-min-cols = 0.
  EXPECT_TRUE(planKernel(beyondOp, options, target).tiers.empty());
  options.tierMinCols = 0;
  MixedReductionOp again = fused(dynamic);
  ASSERT_TRUE(again);
  EXPECT_TRUE(planKernel(again, options, target).tiers.empty());
}

const Case kTierCases[] = {
    {"layer", "bf16", 0, "sm_90a", {}},
    {"rms", "bf16", 0, "sm_90a", {}},
    {"layer", "f32", 0, "sm_90a", {}},
    {"layer", "bf16w32", 0, "sm_90a", {}},
    {"rms", "bf16", 0, "sm_86", {}},
};

INSTANTIATE_TEST_SUITE_P(
    RunTimeN, KernelPlanTierTest, ::testing::ValuesIn(kTierCases),
    [](const ::testing::TestParamInfo<Case> &info) {
      return std::string(info.param.kind) + "_" + info.param.config + "_" +
             info.param.chip;
    });

TEST(GpuTargetTest, KnownChips) {
  for (llvm::StringRef chip : knownGpuChips()) {
    std::optional<GpuTarget> target = lookupGpuTarget(chip);
    ASSERT_TRUE(target) << chip.str();
    EXPECT_EQ(target->chip, chip);
    EXPECT_TRUE(target->hasAsyncCopy);
  }
  EXPECT_FALSE(lookupGpuTarget("sm_75"));
  EXPECT_FALSE(lookupGpuTarget(""));
  EXPECT_EQ(lookupGpuTarget("sm_80")->sharedBytesPerBlock, 163 * 1024);
  EXPECT_EQ(lookupGpuTarget("sm_90a")->sharedBytesPerBlock, 227 * 1024);
  EXPECT_FALSE(lookupGpuTarget("sm_80")->hasBulkCopy);
  EXPECT_TRUE(lookupGpuTarget("sm_90a")->hasClusters);
  EXPECT_FALSE(lookupGpuTarget("sm_80")->hasDependentLaunch);
  EXPECT_FALSE(lookupGpuTarget("sm_89")->hasDependentLaunch);
  EXPECT_TRUE(lookupGpuTarget("sm_90")->hasDependentLaunch);
  EXPECT_TRUE(lookupGpuTarget("sm_100a")->hasDependentLaunch);
  EXPECT_TRUE(lookupGpuTarget("sm_120a")->hasDependentLaunch);
}

// The option validation takes its chips and ranges from the same table:
// each chip it describes is accepted with its own minimum PTX version, and
// the ranges in the messages are its limits.
TEST(GpuTargetTest, OptionsValidatedAgainstTheTarget) {
  for (llvm::StringRef chip : knownGpuChips()) {
    GpuTarget target = *lookupGpuTarget(chip);
    NormGpuOptions options;
    options.chip = chip.str();
    options.features = "+ptx" + std::to_string(target.minPTXVersion);
    options.programsPerSM = target.maxCTAsPerSM;
    std::string problems;
    auto collect = [&](StringRef argument, StringRef, const Twine &problem) {
      problems += (argument + ": " + problem + "\n").str();
    };
    EXPECT_TRUE(succeeded(validateGpuOptions(options, collect)))
        << chip.str() << ": " << problems;
    options.programsPerSM = target.maxCTAsPerSM + 1;
    options.features = "+ptx60"; // older than every chip's minimum
    problems.clear();
    EXPECT_TRUE(failed(validateGpuOptions(options, collect)));
    EXPECT_NE(problems.find("[1, " + std::to_string(target.maxCTAsPerSM) +
                            "]"),
              std::string::npos)
        << problems;
    EXPECT_NE(problems.find("it needs +ptx" +
                            std::to_string(target.minPTXVersion)),
              std::string::npos)
        << problems;
  }
}

} // namespace

namespace {
/// A channels-first LayerNorm-like group over x [B, C, S] (n_dim = 1).
std::string channelsFirstSource(int64_t c, const char *elem) {
  std::string t = "tensor<?x" + std::to_string(c) + "x?x" + elem + ">";
  std::string r = "tensor<?x?xf32>", w = "tensor<" + std::to_string(c) + "xf32>";
  std::string e = elem;
  std::string ext = e == "f32" ? "%a" : "%xa";
  std::string conv = e == "f32" ? "" : "    %xa = arith.extf %a : " + e + " to f32\n";
  return "func.func @f(%x: " + t + ", %r: " + r + ", %z: " + w + ") -> (" +
         t + ", " + w + ") {\n  %dx, %c = norm.mixed_reduction full(%x : " +
         t + ") row(%r : " + r + ") col_init(%z : " + w +
         ")\n  row_stages {\n  ^bb0(%a: " + e + ", %b: f32):\n" + conv +
         "    %p = arith.mulf " + ext + ", %b : f32\n    norm.yield %p : f32\n"
         "  } elementwise {\n  ^bb0(%a: " + e + ", %b: f32, %s: f32):\n" +
         "    norm.yield %a : " + e + "\n  } columns {\n  ^bb0(%a: " + e +
         ", %b: f32, %s: f32):\n    norm.yield %s : f32\n  } {n_dim = 1 : "
         "i64} -> full(" + t + ") col(" + w + ")\n  return %dx, %c : " + t +
         ", " + w + "\n}\n";
}
} // namespace

// Channels-first plans (planStridedRows): W = N / 12 warps (at most 16) in
// 512-thread CTAs, the warp's columns held where K x V <= 24 (V halved until
// they are), and the plan round-trips through the attribute.
TEST(KernelPlanChannelsFirst, PlansAndRoundTrips) {
  MLIRContext context;
  loadNormDialects(context);
  struct {
    int64_t c;
    const char *elem;
    int64_t vector, warps, groups, held;
  } cases[] = {{96, "f32", 2, 8, 2, 12},   {192, "bf16", 2, 16, 1, 12},
               {384, "f32", 1, 16, 1, 24}, {768, "bf16", 4, 16, 1, 0},
               {3, "f32", 4, 1, 16, 3}};
  for (const auto &c : cases) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(channelsFirstSource(c.c, c.elem), &context);
    ASSERT_TRUE(module) << c.c;
    MixedReductionOp op;
    module->walk([&](MixedReductionOp found) { op = found; });
    KernelPlan decided =
        planKernel(op, KernelPlanOptions(), *lookupGpuTarget("sm_90a"));
    KernelPlanAttr attr = kernelPlanAttr(&context, "f_0", decided);
    EXPECT_TRUE(attr.getStridedRows()) << c.c;
    EXPECT_EQ(attr.getVector(), c.vector) << c.c;
    EXPECT_EQ(attr.getThreadsPerRow(), 32 * c.warps) << c.c;
    EXPECT_EQ(attr.getRowsPerCta(), c.groups) << c.c;
    EXPECT_EQ(attr.getChunksPerThread(), c.held) << c.c;
    EXPECT_EQ(attr.getCombineInCta().getValue(), true);
    EXPECT_EQ(attr.getDynamicSharedBytes(), c.groups * c.c * 4) << c.c;
    op->setAttr(kKernelPlanAttrName, attr);
    FailureOr<KernelPlan> read = readKernelPlan(op);
    ASSERT_TRUE(succeeded(read));
    expectSameForBuilders(*read, decided);
  }
}

namespace {
/// GroupNorm's backward (weight and bias, G = 32, N at run time) over
/// x [N, C, H, W], or [N, H, W, C] channels last.
std::string groupNormSource(int64_t c, int64_t hw, const char *elem,
                            bool channelsLast) {
  std::string s = std::to_string(hw), cs = std::to_string(c);
  std::string t = channelsLast
                      ? "tensor<?x" + s + "x" + s + "x" + cs + "x" + elem + ">"
                      : "tensor<?x" + cs + "x" + s + "x" + s + "x" + elem + ">";
  std::string r = "tensor<?x32xf32>";
  std::string w = "tensor<" + cs + "x" + elem + ">";
  return "func.func @f(%dy: " + t + ", %x: " + t + ", %m: " + r +
         ", %rs: " + r + ", %w: " + w + ", %b: " + w + ") -> (" + t + ", " +
         w + ", " + w + ") {\n  %dx, %dw, %db = norm.group_norm_grad %dy, %x, "
         "%m, %rs weight(%w : " + w + ") bias(%b : " + w +
         ") {groups = 32 : i64" + (channelsLast ? ", channels_last" : "") +
         "} : " + t + ", " + r + " -> " + t + ", " + w + ", " + w +
         "\n  return %dx, %dw, %db : " + t + ", " + w + ", " + w + "\n}\n";
}
} // namespace

// GroupNorm slab plans (planSlabRows): channels last takes the fewest
// adjacent groups whose runs make 128 bytes; on sm_90a the split kernels
// (a cluster per unit: 2 CTAs NCHW, 8 channels last) unless
// max-cluster-ctas is 1; none on sm_80. The plan round-trips through the
// attribute.
TEST(KernelPlanSlabs, GroupsPerCtaAndSplitKernels) {
  MLIRContext context;
  loadNormDialects(context);
  struct {
    int64_t c, hw;
    const char *elem;
    bool channelsLast;
    const char *chip;
    int64_t maxCluster;
    int64_t vector, groups, split;
  } cases[] = {
      // NCHW: one slab per CTA, 16-byte accesses, clusters of 2.
      {320, 64, "bf16", false, "sm_90a", 8, 8, 1, 2},
      {512, 128, "f32", false, "sm_90a", 8, 4, 1, 2},
      {320, 64, "bf16", false, "sm_80", 8, 8, 1, 0},
      {320, 64, "bf16", false, "sm_90a", 1, 8, 1, 0},
      // Channels last: C/G = 10 (V = 2: 20 / 40-byte runs, 8 / 4 groups),
      // 16 bf16 (32 bytes: 4), 40 bf16 (80 bytes: 2), 40 f32 (160: 1).
      {320, 64, "bf16", true, "sm_90a", 8, 2, 8, 8},
      {320, 64, "f32", true, "sm_90a", 8, 2, 4, 8},
      {512, 128, "bf16", true, "sm_90a", 8, 8, 4, 8},
      {1280, 16, "bf16", true, "sm_90a", 8, 8, 2, 8},
      {1280, 16, "f32", true, "sm_90a", 8, 4, 1, 8},
      {512, 128, "bf16", true, "sm_90a", 4, 8, 4, 4},
      {512, 128, "bf16", true, "sm_80", 8, 8, 4, 0},
  };
  for (const auto &c : cases) {
    std::string label = std::to_string(c.c) + "x" + std::to_string(c.hw) +
                        " " + c.elem + (c.channelsLast ? " NHWC " : " NCHW ") +
                        c.chip + " max " + std::to_string(c.maxCluster);
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
        groupNormSource(c.c, c.hw, c.elem, c.channelsLast), &context);
    ASSERT_TRUE(module) << label;
    PassManager pm(&context);
    pm.addPass(createNormDecompose());
    NormFuseMixedReductionsOptions fuse;
    fuse.multiAxis = "gpu";
    pm.nest<func::FuncOp>().addPass(createNormFuseMixedReductions(fuse));
    ASSERT_TRUE(succeeded(pm.run(*module))) << label;
    MixedReductionOp op;
    module->walk([&](MixedReductionOp found) { op = found; });
    ASSERT_TRUE(op) << label;
    KernelPlanOptions options;
    options.maxClusterCTAs = c.maxCluster;
    KernelPlan decided = planKernel(op, options, *lookupGpuTarget(c.chip));
    KernelPlanAttr attr = kernelPlanAttr(&context, "f_0", decided);
    EXPECT_TRUE(attr.getSlabRows()) << label;
    EXPECT_EQ(attr.getVector(), c.vector) << label;
    EXPECT_EQ(attr.getSlabGroups(), c.groups) << label;
    EXPECT_EQ(attr.getSplitColumnGroups(), c.split) << label;
    // The launcher splits only where each split CTA walks 32 KiB of an
    // input (slab-split-min-bytes); no split kernels, no rule.
    EXPECT_EQ(attr.getSplitMinBytes(), c.split ? 32768 : 0) << label;
    // A position's runs fit the CTA.
    EXPECT_LE(c.groups * (c.c / 32) / c.vector, attr.getBlock()) << label;
    op->setAttr(kKernelPlanAttrName, attr);
    std::string readError;
    FailureOr<KernelPlan> read = failure();
    {
      ScopedDiagnosticHandler capture(&context, [&](Diagnostic &d) {
        readError = d.str();
        return success();
      });
      read = readKernelPlan(op);
    }
    ASSERT_TRUE(succeeded(read)) << label << ": " << readError;
    expectSameForBuilders(*read, decided);
    // The split pair is among the main kernels exactly with a split.
    bool hasSplit = false;
    for (const MainKernel &k : mainKernels(*read, "f_0"))
      hasSplit |= k.split;
    EXPECT_EQ(hasSplit, c.split > 0) << label;
    // A hand-written plan whose groups per CTA do not divide G (or are not
    // channels last) is a located error, not a kernel over the wrong slabs.
    KernelPlan wrong = decided;
    wrong.slabGroups = 3;
    op->setAttr(kKernelPlanAttrName, kernelPlanAttr(&context, "f_0", wrong));
    std::string error;
    ScopedDiagnosticHandler capture(&context, [&](Diagnostic &d) {
      error = d.str();
      return success();
    });
    EXPECT_TRUE(failed(readKernelPlan(op))) << label;
    EXPECT_NE(error.find("slab_groups (3) needs a channels-last slab domain"),
              std::string::npos)
        << label << ": " << error;
  }
}
