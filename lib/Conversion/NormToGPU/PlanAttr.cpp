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
ResidentTierAttr tierAttr(MLIRContext *ctx, const KernelPlan &tier) {
  auto flag = [&](bool v) { return BoolAttr::get(ctx, v); };
  return ResidentTierAttr::get(
      ctx, tier.tierCols, tier.vector, tier.threadsPerRow, tier.rowsPerCTA,
      tier.chunksPerThread, tier.blockThreads(), flag(tier.combineInCTA),
      flag(tier.singleLaunch), tier.asyncStages, tier.finalThreads(),
      tier.dynamicSharedBytes, tier.peel, tier.prefetch, tier.scalarPrefetch,
      tier.asyncRingOffset, tier.ringRowInputs);
}

/// The fields a plan and a resident tier both have (#norm.kernel_plan and
/// #norm.resident_tier share these parameters).
template <typename PlanOrTier>
void readShared(PlanOrTier attr, KernelPlan &plan) {
  plan.vector = attr.getVector();
  plan.threadsPerRow = attr.getThreadsPerRow();
  plan.rowsPerCTA = attr.getRowsPerCta();
  plan.chunksPerThread = attr.getChunksPerThread();
  plan.combineInCTA = attr.getCombineInCta().getValue();
  plan.singleLaunch = attr.getSingleLaunch().getValue();
  plan.asyncStages = attr.getAsyncStages();
  plan.dynamicSharedBytes = attr.getDynamicSharedBytes();
  plan.peel = attr.getPeel();
  plan.prefetch = attr.getPrefetch();
  plan.scalarPrefetch = attr.getScalarPrefetch();
  plan.asyncRingOffset = attr.getAsyncRingOffset();
  plan.ringRowInputs = attr.getRingRowInputs();
}

/// A tier's plan: what its attribute says, and what every tier shares
/// with its plan (the grid and the dependent final launch).
KernelPlan tierPlan(ResidentTierAttr attr, const KernelPlan &own) {
  KernelPlan tier;
  readShared(attr, tier);
  tier.tierCols = attr.getCols();
  tier.programsPerSM = own.programsPerSM;
  tier.dependentLaunch = own.dependentLaunch;
  return tier;
}
} // namespace

KernelPlanAttr mlir::norm::kernelPlanAttr(MLIRContext *ctx, StringRef prefix,
                                          const KernelPlan &plan) {
  auto flag = [&](bool v) { return BoolAttr::get(ctx, v); };
  ArrayAttr tiers;
  if (!plan.tiers.empty()) {
    SmallVector<Attribute> elements;
    for (const KernelPlan &tier : plan.tiers)
      elements.push_back(tierAttr(ctx, tier));
    tiers = ArrayAttr::get(ctx, elements);
  }
  return KernelPlanAttr::get(
      ctx, prefix, plan.vector, plan.threadsPerRow, plan.rowsPerCTA,
      plan.chunksPerThread, plan.programsPerSM, plan.blockThreads(),
      flag(plan.combineInCTA), flag(plan.singleLaunch), plan.asyncStages,
      plan.resident() ? 0 : plan.minColumnGroups, plan.splitColumnGroups,
      plan.splitSharedBytes, plan.finalThreads(), plan.dynamicSharedBytes,
      plan.clusterCTAs, plan.bulkStages, plan.dependentLaunch, plan.peel,
      plan.prefetch, plan.scalarPrefetch, plan.sharedAccumulators,
      plan.twoCTAsPerSM, plan.asyncRingOffset, plan.ringRowInputs,
      plan.bulkRingOffset, plan.clusterSumsAhead, plan.stridedRows, tiers);
}

FailureOr<KernelPlan> mlir::norm::readKernelPlan(MixedReductionOp op) {
  auto attr = op->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName);
  if (!attr)
    return op.emitError("fused op has no kernel plan (--convert-norm-to-gpu "
                        "did not run)");
  KernelPlan plan;
  readShared(attr, plan);
  plan.programsPerSM = attr.getProgramsPerSm();
  plan.minColumnGroups = std::max<int64_t>(1, attr.getColumnGroups());
  plan.splitColumnGroups = attr.getSplitColumnGroups();
  plan.splitSharedBytes = attr.getSplitSharedBytes();
  plan.clusterCTAs = attr.getClusterCtas();
  plan.bulkStages = attr.getBulkStages();
  plan.dependentLaunch = attr.getDependentLaunch();
  plan.sharedAccumulators = attr.getSharedAccumulators();
  plan.twoCTAsPerSM = attr.getTwoCtasPerSm();
  plan.bulkRingOffset = attr.getBulkRingOffset();
  plan.clusterSumsAhead = attr.getClusterSumsAhead();
  plan.stridedRows = attr.getStridedRows();
  if (!ShapedType::isDynamic(op.getStaticCols()))
    plan.staticCols = op.getStaticCols();
  if (plan.blockThreads() != attr.getBlock() ||
      plan.finalThreads() != attr.getFinalThreads())
    return op.emitError("kernel plan: block or final_threads disagree with "
                        "threads_per_row x rows_per_cta");
  if (ArrayAttr tiers = attr.getTiers()) {
    if (plan.staticCols)
      return op.emitError("resident tiers in the kernel plan of an op with a "
                          "static N");
    for (auto tier : tiers.getAsRange<ResidentTierAttr>())
      plan.tiers.push_back(tierPlan(tier, plan));
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
  if (plan.vector > 1 &&
      (!plan.staticCols || *plan.staticCols % plan.vector == 0))
    add(kMainKernelSuffix, plan.vector, false);
  if (plan.peel && !plan.stridedRows)
    add(kMainPeelKernelSuffix, plan.vector, false, /*peel=*/true);
  add(kMainScalarKernelSuffix, 1, false);
  if (plan.splitColumnGroups > 0) {
    if (plan.vector > 1)
      add(kMainSplitKernelSuffix, plan.vector, true);
    add(kMainSplitScalarKernelSuffix, 1, true);
  }
  return kernels;
}

KernelPlan mlir::norm::splitKernelPlan(const KernelPlan &plan) {
  KernelPlan split = plan;
  split.minColumnGroups = plan.splitColumnGroups;
  split.dynamicSharedBytes = plan.splitSharedBytes;
  split.twoCTAsPerSM = false;
  split.bulkStages = 0;
  // Measured no faster with the tail (perf-notes, "Split kernels"): two
  // launches.
  split.singleLaunch = false;
  return split;
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
