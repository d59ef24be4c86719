//===- LaunchPlan.cpp - How a fused group's kernels launch ----------------===//
//
// Part of norm-opt. Reads the `#norm.kernel_plan` that --convert-norm-to-gpu
// left on a fused op into the launch plan the host lowering builds from.
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/NormToLaunch/HostLaunch.h"

#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/NormToGPU/KernelNames.h"

using namespace mlir;
using namespace mlir::norm;

bool GroupLaunchPlan::anyPeel() const {
  return kernels.peel ||
         llvm::any_of(tiers, [](const KernelLaunch &t) { return t.peel; });
}

namespace {
/// What a plan and a resident tier both say (#norm.kernel_plan and
/// #norm.resident_tier share these parameters).
template <typename PlanOrTier>
void readShape(PlanOrTier attr, KernelLaunch &k) {
  k.block = attr.getBlock();
  k.rowsPerCTA = attr.getRowsPerCta();
  k.dynamicSharedBytes = attr.getDynamicSharedBytes();
  k.combineInCTA = attr.getCombineInCta().getValue();
  k.singleLaunch = attr.getSingleLaunch().getValue();
  k.finalThreads = attr.getFinalThreads();
  k.peel = attr.getPeel();
}

/// The launch of a resident tier of the plan whose own kernels are `own`.
KernelLaunch tierLaunch(ResidentTierAttr tier, const KernelLaunch &own,
                        StringRef prefix, int64_t vector) {
  KernelLaunch k;
  k.prefix = residentTierPrefix(prefix, tier.getCols());
  readShape(tier, k);
  k.finalKernel = finalKernelName(prefix, k.finalThreads, own.finalThreads);
  k.tierCols = tier.getCols();
  k.alignedKernel = vector > 1;
  return k;
}
} // namespace

FailureOr<GroupLaunchPlan> mlir::norm::readLaunchPlan(MixedReductionOp op) {
  auto planAttr = op->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName);
  if (!planAttr)
    return op.emitError("fused op has no kernels (--convert-norm-to-gpu did "
                        "not run)");
  GroupLaunchPlan launch;
  launch.vector = planAttr.getVector();
  launch.programsPerSM = planAttr.getProgramsPerSm();
  launch.dependentFinal = planAttr.getDependentLaunch();
  launch.numColumnResults = op.getColResults().size();
  StringRef prefix = planAttr.getKernel();
  KernelLaunch &own = launch.kernels;
  own.prefix = prefix.str();
  readShape(planAttr, own);
  own.finalKernel = finalKernelName(prefix, own.finalThreads, own.finalThreads);
  own.columnGroups = planAttr.getColumnGroups();
  own.splitColumnGroups = planAttr.getSplitColumnGroups();
  own.splitSharedBytes = planAttr.getSplitSharedBytes();
  own.clusterCTAs = planAttr.getClusterCtas();
  int64_t staticCols = op.getStaticCols();
  own.alignedKernel =
      launch.vector > 1 &&
      (ShapedType::isDynamic(staticCols) || staticCols % launch.vector == 0);
  if (ArrayAttr tiers = planAttr.getTiers()) {
    if (!ShapedType::isDynamic(staticCols))
      return op.emitError("resident tiers in the kernel plan of an op with a "
                          "static N");
    for (auto tier : tiers.getAsRange<ResidentTierAttr>())
      launch.tiers.push_back(tierLaunch(tier, own, prefix, launch.vector));
  }
  return launch;
}
