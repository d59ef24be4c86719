//===- FuseMixedReductions.cpp - The recognition's API and its pass -------===//
//
// Part of norm-opt.
//
// The public entry points of include/norm/Transforms/MixedReductions.h and
// --norm-fuse-mixed-reductions, a thin driver over them. The recognition
// itself is in MixedReductions/: Analysis.cpp (views, slices, groups, the
// driver) and Rewrite.cpp (a group's plan and its fused op).
//
//===----------------------------------------------------------------------===//

#include "MixedReductions/Analysis.h"

#include "norm/Transforms/MixedReductions.h"
#include "norm/Transforms/Passes.h"

#include "llvm/ADT/StringSwitch.h"

namespace mlir::norm {
#define GEN_PASS_DEF_NORMFUSEMIXEDREDUCTIONS
#include "norm/Transforms/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

std::vector<MixedReductionGroup>
norm::findMixedReductionGroups(func::FuncOp func,
                               const MixedReductionOptions &options) {
  std::vector<MixedReductionGroup> found;
  mixed::Analysis(func, options, nullptr, &found, /*dryRun=*/true).run();
  return found;
}

SmallVector<MixedReductionOp>
norm::fuseMixedReductions(func::FuncOp func,
                          const MixedReductionOptions &options,
                          const ControlMixedReductionFn &control) {
  mixed::Analysis analysis(func, options, control);
  analysis.run();
  return SmallVector<MixedReductionOp>(analysis.fusedOps());
}

std::optional<MultiAxisGroups> norm::parseMultiAxisGroups(StringRef word) {
  return llvm::StringSwitch<std::optional<MultiAxisGroups>>(word)
      .Case("true", MultiAxisGroups::All)
      .Case("false", MultiAxisGroups::None)
      .Case("batched", MultiAxisGroups::BatchedRows)
      .Case("gpu", MultiAxisGroups::Gpu)
      .Default(std::nullopt);
}

namespace {
struct NormFuseMixedReductionsPass
    : norm::impl::NormFuseMixedReductionsBase<NormFuseMixedReductionsPass> {
  using Base::Base;
  void runOnOperation() override {
    MixedReductionOptions options;
    options.remarks = remarks;
    options.rowOnly = rowOnly;
    std::optional<MultiAxisGroups> groups = parseMultiAxisGroups(multiAxis);
    if (!groups) {
      getOperation().emitError()
          << "invalid value '" << multiAxis
          << "' of the option multi-axis: expected true, false, batched or "
             "gpu";
      return signalPassFailure();
    }
    options.multiAxis = *groups;
    fuseMixedReductions(getOperation(), options);
  }
};
} // namespace
