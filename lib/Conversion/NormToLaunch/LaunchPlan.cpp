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
/// The launch of a resident tier of the plan whose own kernels are `own`.
KernelLaunch tierLaunch(ResidentTierAttr tier, const KernelLaunch &own,
                        StringRef prefix, int64_t vector) {
  KernelLaunch k;
  k.prefix = residentTierPrefix(prefix, tier.getCols());
  k.block = tier.getBlock();
  k.rowsPerCTA = tier.getRowsPerCta();
  k.dynamicSharedBytes = tier.getDynamicSharedBytes();
  k.combineInCTA = tier.getCombineInCta().getValue();
  k.singleLaunch = tier.getSingleLaunch().getValue();
  k.finalThreads = tier.getFinalThreads();
  k.finalKernel = finalKernelName(prefix, k.finalThreads, own.finalThreads);
  k.tierCols = tier.getCols();
  k.peel = tier.getPeel();
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
  own.block = planAttr.getBlock();
  own.rowsPerCTA = planAttr.getRowsPerCta();
  own.dynamicSharedBytes = planAttr.getDynamicSharedBytes();
  own.combineInCTA = planAttr.getCombineInCta().getValue();
  own.singleLaunch = planAttr.getSingleLaunch().getValue();
  own.finalThreads = planAttr.getFinalThreads();
  own.finalKernel = finalKernelName(prefix, own.finalThreads, own.finalThreads);
  own.columnGroups = planAttr.getColumnGroups();
  own.splitColumnGroups = planAttr.getSplitColumnGroups();
  own.splitSharedBytes = planAttr.getSplitSharedBytes();
  own.clusterCTAs = planAttr.getClusterCtas();
  own.peel = planAttr.getPeel();
  int64_t staticCols = op.getDomainShape().back();
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
