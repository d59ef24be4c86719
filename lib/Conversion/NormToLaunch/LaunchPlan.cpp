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
  return kernels.peelKernel || llvm::any_of(tiers, [](const KernelLaunch &t) {
           return t.peelKernel;
         });
}

namespace {
/// The launch of a plan's (or a tier's) kernels: which exist comes from
/// mainKernels, the one place that says.
KernelLaunch launchOf(const KernelPlan &p, StringRef prefix) {
  KernelLaunch k;
  static_cast<KernelPlan &>(k) = p;
  k.tiers.clear();
  k.prefix = prefix.str();
  for (const MainKernel &m : mainKernels(p, prefix)) {
    if (m.vector == 1 || m.split)
      continue;
    if (m.latency)
      k.latencyVectorKernel = true;
    else
      (m.peel ? k.peelKernel : k.alignedKernel) = true;
  }
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
  launch.numColumnResults = op.getColResults().size();
  launch.kernels = launchOf(*plan, prefix);
  int64_t own = plan->finalThreads();
  launch.kernels.finalKernel = finalKernelName(prefix, own, own);
  for (const KernelPlan &tier : plan->tiers) {
    KernelLaunch k = launchOf(tier, residentTierPrefix(prefix, tier.cols));
    k.finalKernel = finalKernelName(prefix, k.finalThreads(), own);
    launch.tiers.push_back(std::move(k));
  }
  return launch;
}
