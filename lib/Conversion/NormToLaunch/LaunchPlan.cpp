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
/// The launch of a plan's (or a tier's) kernels: which exist comes from
/// mainKernels, the one place that says.
KernelLaunch launchOf(const KernelPlan &p, StringRef prefix) {
  KernelLaunch k;
  k.prefix = prefix.str();
  k.block = p.blockThreads();
  k.rowsPerCTA = p.rowsPerCTA;
  k.dynamicSharedBytes = p.dynamicSharedBytes;
  k.combineInCTA = p.combineInCTA;
  k.singleLaunch = p.singleLaunch;
  k.finalThreads = p.finalThreads();
  k.columnGroups = p.resident() ? 0 : p.minColumnGroups;
  k.splitColumnGroups = p.splitColumnGroups;
  k.splitSharedBytes = p.splitSharedBytes;
  k.clusterCTAs = p.clusterCTAs;
  k.tierCols = p.tierCols;
  for (const MainKernel &m : mainKernels(p, prefix))
    if (!m.split && m.vector > 1)
      (m.peel ? k.peel : k.alignedKernel) = true;
  return k;
}
} // namespace

FailureOr<GroupLaunchPlan> mlir::norm::readLaunchPlan(MixedReductionOp op) {
  FailureOr<KernelPlan> plan = readKernelPlan(op);
  if (failed(plan))
    return failure();
  StringRef prefix =
      op->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName).getKernel();
  GroupLaunchPlan launch;
  launch.vector = plan->vector;
  launch.programsPerSM = plan->programsPerSM;
  launch.dependentFinal = plan->dependentLaunch;
  launch.numColumnResults = op.getColResults().size();
  launch.kernels = launchOf(*plan, prefix);
  int64_t own = plan->finalThreads();
  launch.kernels.finalKernel = finalKernelName(prefix, own, own);
  for (const KernelPlan &tier : plan->tiers) {
    KernelLaunch k =
        launchOf(tier, residentTierPrefix(prefix, tier.tierCols));
    k.finalKernel = finalKernelName(prefix, k.finalThreads, own);
    launch.tiers.push_back(std::move(k));
  }
  return launch;
}
