//===- NormDialect.cpp - The norm dialect ---------------------------------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormDialect.h"
#include "norm/Dialect/Norm/IR/NormAttrs.h"
#include "norm/Dialect/Norm/IR/NormOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::norm;

#include "norm/Dialect/Norm/IR/NormOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "norm/Dialect/Norm/IR/NormAttrs.cpp.inc"

void NormDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "norm/Dialect/Norm/IR/NormAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "norm/Dialect/Norm/IR/NormOps.cpp.inc"
      >();
}

LogicalResult
KernelPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       StringRef kernel, int64_t vector, int64_t threadsPerRow,
                       int64_t rowsPerCta, int64_t chunksPerThread,
                       int64_t programsPerSm, int64_t block,
                       BoolAttr combineInCta, BoolAttr singleLaunch,
                       int64_t asyncStages, int64_t columnGroups,
                       int64_t splitColumnGroups, int64_t splitSharedBytes,
                       int64_t finalThreads, int64_t dynamicSharedBytes) {
  auto powerOfTwo = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
  if (kernel.empty())
    return emitError() << "kernel_plan: empty kernel name";
  if (!powerOfTwo(vector) || vector > 16)
    return emitError() << "kernel_plan: vector must be a power of two "
                          "<= 16, got "
                       << vector;
  if (!powerOfTwo(threadsPerRow) || threadsPerRow > 1024)
    return emitError() << "kernel_plan: threads_per_row must be a power of "
                          "two <= 1024, got "
                       << threadsPerRow;
  if (rowsPerCta < 1 || block != threadsPerRow * rowsPerCta || block > 1024)
    return emitError() << "kernel_plan: block (" << block
                       << ") must be threads_per_row x rows_per_cta (<= 1024)";
  if (chunksPerThread < 0 || programsPerSm < 0 || asyncStages < 0 ||
      columnGroups < 0 || splitColumnGroups < 0 || splitSharedBytes < 0 ||
      dynamicSharedBytes < 0)
    return emitError() << "kernel_plan: negative count or size";
  bool resident = chunksPerThread > 0;
  if (resident && (columnGroups != 0 || splitColumnGroups != 0))
    return emitError() << "kernel_plan: a resident plan has no column groups";
  if (!resident && (asyncStages != 0 || combineInCta.getValue()))
    return emitError() << "kernel_plan: the looped variant has no cp.async "
                          "ring and no CTA-combined partials";
  if (asyncStages == 1)
    return emitError() << "kernel_plan: a cp.async ring has at least 2 "
                          "stages";
  if (finalThreads < 32 || finalThreads % 32 != 0 || finalThreads > 1024)
    return emitError() << "kernel_plan: final_threads must be a multiple of "
                          "32 in [32, 1024], got "
                       << finalThreads;
  if (dynamicSharedBytes % 4 != 0 || splitSharedBytes % 4 != 0)
    return emitError() << "kernel_plan: shared-memory sizes are f32 counts";
  return success();
}
