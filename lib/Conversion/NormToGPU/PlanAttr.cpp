//===- PlanAttr.cpp - The kernel plan as the op's #norm.kernel_plan -------===//
//
// Part of norm-opt. The plan planKernel decides is written once, as the
// op's `#norm.kernel_plan`, before any kernel is built; the kernel builders
// (NormToGPUPass) and the host lowering (NormToLaunch) read it back from
// there, so the attribute is the one description of the op's kernels.
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/NormToGPU/KernelNames.h"

using namespace mlir;
using namespace mlir::norm;

namespace {
#define GEN_KERNEL_PLAN_CONVERSIONS
#include "norm/Dialect/Norm/IR/KernelPlanFields.h.inc"

/// A tier's plan: what its attribute says, and what every tier shares
/// with its plan (the grid and the dependent final launch).
KernelPlan tierPlan(ResidentTierAttr attr, const KernelPlan &own) {
  KernelPlan tier;
  readFields(attr, tier);
  tier.programsPerSm = own.programsPerSm;
  tier.dependentLaunch = own.dependentLaunch;
  return tier;
}
} // namespace

KernelPlanAttr mlir::norm::kernelPlanAttr(MLIRContext *ctx, StringRef prefix,
                                          const KernelPlan &plan) {
  ArrayAttr tiers;
  if (!plan.tiers.empty()) {
    SmallVector<Attribute> elements;
    for (const KernelPlan &tier : plan.tiers)
      elements.push_back(getResidentTierAttr(ctx, tier));
    tiers = ArrayAttr::get(ctx, elements);
  }
  return getKernelPlanAttr(ctx, plan, prefix, tiers);
}

FailureOr<KernelPlan> mlir::norm::readKernelPlan(MixedReductionOp op) {
  auto attr = op->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName);
  if (!attr)
    return op.emitError("fused op has no kernel plan (--convert-norm-to-gpu "
                        "did not run)");
  // What a hand-written attribute's parse verified, for the planner's too:
  // an invalid plan is a located error, not a kernel that reads out of
  // bounds (rows_per_cta 2 on a looped plan once did).
  if (failed(verifyFields(attr, [&] { return op.emitError(); })))
    return failure();
  KernelPlan plan;
  readFields(attr, plan);
  // (A slab plan's row is a slab, not the domain's last dim: no static N,
  // as the planner leaves it.)
  if (!plan.slabRows && !ShapedType::isDynamic(op.getStaticCols()))
    plan.staticCols = op.getStaticCols();
  if (StringRef field = derivedFieldMismatch(attr, plan); !field.empty())
    return op.emitError("kernel plan: ")
           << field << " disagrees with threads_per_row x rows_per_cta";
  // Several slabs per CTA: channels last only, whole units of the groups,
  // and a position's K runs within the CTA (the slab kernel's walk).
  if (plan.slabGroups > 1) {
    std::optional<SlabDomain> slab = op.getSlabDomain();
    if (!plan.slabRows || !slab || !slab->channelsLast ||
        slab->aSize % plan.slabGroups != 0 ||
        plan.slabGroups * slab->cSize > plan.block() * plan.vector)
      return op.emitError("kernel plan: slab_groups (")
             << plan.slabGroups
             << ") needs a channels-last slab domain whose groups it divides "
                "and whose runs of a position fit the CTA";
  }
  if (ArrayAttr tiers = attr.getTiers()) {
    if (plan.staticCols)
      return op.emitError("resident tiers in the kernel plan of an op with a "
                          "static N");
    for (auto tierAttr : tiers.getAsRange<ResidentTierAttr>()) {
      KernelPlan tier = tierPlan(tierAttr, plan);
      if (StringRef field = derivedFieldMismatch(tierAttr, tier);
          !field.empty())
        return op.emitError("kernel plan: the tier of ")
               << tier.cols << " columns' " << field
               << " disagrees with threads_per_row x rows_per_cta";
      plan.tiers.push_back(std::move(tier));
    }
  }
  return plan;
}

SmallVector<MainKernel> mlir::norm::mainKernels(const KernelPlan &plan,
                                                StringRef prefix) {
  SmallVector<MainKernel> kernels;
  auto add = [&](StringRef suffix, int64_t vector, bool split,
                 bool peel = false) {
    kernels.push_back({(prefix + suffix).str(), vector, split, peel});
  };
  // The vector kernel of aligned rows (not for a static N that is not a
  // multiple of the vector), the peeled one for rows at any phase, the
  // scalar one; the split pair for few rows.
  // (A slab plan's vector kernel is chosen by its slabs at run time.)
  if (plan.vector > 1 && (plan.slabRows || !plan.staticCols ||
                          *plan.staticCols % plan.vector == 0))
    add(kMainKernelSuffix, plan.vector, false);
  if (plan.peel && !plan.stridedRows)
    add(kMainPeelKernelSuffix, plan.vector, false, /*peel=*/true);
  add(kMainScalarKernelSuffix, 1, false);
  if (plan.splitColumnGroups > 0) {
    if (plan.vector > 1)
      add(kMainSplitKernelSuffix, plan.vector, true);
    add(kMainSplitScalarKernelSuffix, 1, true);
  }
  // The latency pair for small calls (a static N: see latencyKernelPlan).
  if (plan.latencyCtas > 1) {
    if (plan.vector > 1 && *plan.staticCols % plan.vector == 0) {
      add(kLatencyKernelSuffix, plan.vector, false);
      kernels.back().latency = true;
    }
    add(kLatencyScalarKernelSuffix, 1, false);
    kernels.back().latency = true;
  }
  return kernels;
}

KernelPlan mlir::norm::latencyKernelPlan(MixedReductionOp op,
                                         const KernelPlan &plan,
                                         int64_t vector) {
  KernelPlan k = plan;
  k.tiers.clear();
  const int64_t C = plan.latencyCtas;
  const int64_t chunks = llvm::divideCeil(*plan.staticCols, vector);
  const int64_t part = llvm::divideCeil(chunks, C);
  int64_t lanes = kLatencyMinLanes;
  while (lanes < kLatencyThreads &&
         llvm::divideCeil(part, lanes) * vector > kLatencyMaxColumns)
    lanes *= 2;
  k.vector = vector;
  k.clusterCtas = C;
  k.threadsPerRow = lanes;
  k.rowsPerCta = kLatencyThreads / lanes;
  k.chunksPerThread = llvm::divideCeil(part, lanes);
  // Raw loads of one row per thread, in 32-bit registers (a scalar
  // access takes one whatever its width).
  double perRow = 0;
  for (Value v : op.getFull())
    perRow += vector == 1 ? 1.0 : elementBytes(v.getType()) * vector / 4.0;
  perRow *= k.chunksPerThread;
  // Rows of more than a warp keep their sums across the cross-warp
  // barriers: one row a step (LayerNorm bf16 N = 65536 spilled with two).
  k.latencyUnroll =
      lanes > 32 ? 1
                 : std::clamp<int64_t>(
                       static_cast<int64_t>(kLatencyLoadRegisters / perRow), 1,
                       kLatencyUnroll);
  // No more rows a step than a call has per group.
  k.latencyUnroll = std::min(
      k.latencyUnroll,
      std::max<int64_t>(1, llvm::divideCeil(plan.latencyRows, k.rowsPerCta)));
  // The groups' column sums: [group][column result][part column].
  k.dynamicSharedBytes = llvm::alignTo(
      k.rowsPerCta * int64_t(op.getColResults().size()) * part * vector * 4,
      16);
  k.columnGroups = k.splitColumnGroups = k.splitSharedBytes = 0;
  k.asyncStages = k.bulkStages = k.asyncRingOffset = k.bulkRingOffset = 0;
  k.prefetch = k.scalarPrefetch = k.ringRowInputs = false;
  k.clusterSumsAhead = k.combineInCta = k.singleLaunch = false;
  k.dependentLaunch = k.peel = k.twoCtasPerSm = k.sharedAccumulators = false;
  k.programsPerSm = 0;
  return k;
}

KernelPlan mlir::norm::splitKernelPlan(const KernelPlan &plan) {
  KernelPlan split = plan;
  split.columnGroups = plan.splitColumnGroups;
  split.dynamicSharedBytes = plan.splitSharedBytes;
  split.twoCtasPerSm = false;
  split.bulkStages = 0;
  // Measured no faster with the tail (perf-notes, "Split kernels"): two
  // launches.
  split.singleLaunch = false;
  return split;
}

KernelPlan mlir::norm::mainKernelPlan(MixedReductionOp op,
                                      const KernelPlan &plan,
                                      const MainKernel &kernel) {
  if (kernel.latency)
    return latencyKernelPlan(op, plan, kernel.vector);
  KernelPlan k = kernel.split ? splitKernelPlan(plan) : plan;
  if (!kernel.split && kernel.vector > 1 && !kernel.peel)
    k.peel = false;
  // The scalar fallback of a vector plan owns as many columns per lane as
  // the vector kernel, and has its own prefetch rule.
  bool scalarFallback = kernel.vector < plan.vector;
  if (scalarFallback) {
    k.chunksPerThread = plan.chunksPerThread * (plan.vector / kernel.vector);
    k.prefetch = plan.scalarPrefetch;
    // It would spill under the cap.
    k.twoCtasPerSm = false;
  }
  k.vector = kernel.vector;
  // The rings copy 16-byte chunks: vector kernels only.
  if (kernel.vector == 1) {
    k.asyncStages = 0;
    k.bulkStages = 0;
  }
  k.prefetch = k.prefetch && k.asyncStages == 0;
  bool hasRowInputs = !op.getRow().empty();
  k.ringRowInputs = plan.ringRowInputs && k.asyncStages > 0 && hasRowInputs;
  k.clusterSumsAhead = plan.clusterSumsAhead && k.asyncStages >= 3 &&
                       !(k.peel && kernel.vector > 1) &&
                       op.getRowStages().size() == 1 &&
                       (!hasRowInputs || k.ringRowInputs);
  return k;
}

namespace {
unsigned nonConstantInits(MixedReductionOp op) {
  return llvm::count_if(op.getColInit(), [](Value init) {
    return !getConstantColumnInit(init);
  });
}
} // namespace

SmallVector<KernelParamGroup> mlir::norm::mainKernelParams(MixedReductionOp op) {
  using K = KernelParam;
  unsigned numFull = op.getFull().size(), numOut = op.getFullResults().size();
  SmallVector<KernelParamGroup> groups = {
      {K::FullIn, numFull, true},
      {K::RowIn, unsigned(op.getRow().size()), true},
      {K::ColIn, unsigned(op.getCol().size()), true},
      {K::FullOut, numOut, true},
      {K::Partial, 1, true},
      {K::Rows, 1, false},
      {K::Cols, 1, false},
      {K::StrideIn, numFull, false},
      {K::StrideOut, numOut, false},
      {K::Scalar, unsigned(getCapturedScalars(op).size()), true}};
  // The single-launch tail's (in every kernel's signature with column
  // results; read where the plan has a single launch).
  if (!op.getColResults().empty())
    groups.append({{K::Barrier, 1, true},
                   {K::InitIn, nonConstantInits(op), true},
                   {K::ColOut, unsigned(op.getColResults().size()), true},
                   {K::Finalize, 1, false}});
  return groups;
}

SmallVector<KernelParamGroup>
mlir::norm::finalKernelParams(MixedReductionOp op) {
  using K = KernelParam;
  return {{K::Partial, 1, true},
          {K::InitIn, nonConstantInits(op), true},
          {K::ColOut, unsigned(op.getColResults().size()), true},
          {K::Programs, 1, false},
          {K::Cols, 1, false}};
}
