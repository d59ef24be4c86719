//===- GpuTarget.cpp - The chips the kernel plan knows --------------------===//
//
// Part of norm-opt. Limits from the CUDA C Programming Guide's table of
// compute capabilities (shared memory per SM / the most a CTA may opt in
// to, which includes its static shared memory).
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/NormToGPU/GpuTarget.h"

using namespace mlir;
using namespace mlir::norm;

namespace {
constexpr int64_t KiB = 1024;

/// Ampere A100 (sm_80): 164 KiB of shared memory per SM, 163 per CTA.
GpuTarget ampereDataCenter(llvm::StringRef chip) {
  GpuTarget t;
  t.chip = chip;
  t.sharedBytesPerSM = 164 * KiB;
  t.sharedBytesPerBlock = 163 * KiB;
  t.hasAsyncCopy = true;
  return t;
}

/// Ampere / Ada consumer and Blackwell consumer parts (sm_86, sm_89,
/// sm_120): 100 KiB per SM, 99 per CTA.
GpuTarget smallSharedMemory(llvm::StringRef chip) {
  GpuTarget t = ampereDataCenter(chip);
  t.sharedBytesPerSM = 100 * KiB;
  t.sharedBytesPerBlock = 99 * KiB;
  return t;
}

/// Hopper (sm_90, sm_90a) and Blackwell data center (sm_100, sm_100a):
/// 228 KiB per SM, 227 per CTA; bulk copies and clusters.
GpuTarget hopper(llvm::StringRef chip) {
  GpuTarget t = ampereDataCenter(chip);
  t.sharedBytesPerSM = 228 * KiB;
  t.sharedBytesPerBlock = 227 * KiB;
  t.hasBulkCopy = true;
  t.hasClusters = true;
  return t;
}
} // namespace

llvm::ArrayRef<llvm::StringRef> mlir::norm::knownGpuChips() {
  static const llvm::StringRef chips[] = {"sm_80",  "sm_86",   "sm_89",
                                          "sm_90",  "sm_90a",  "sm_100",
                                          "sm_100a", "sm_120"};
  return chips;
}

std::optional<GpuTarget> mlir::norm::lookupGpuTarget(llvm::StringRef chip) {
  // The StringRef of the table, which outlives the caller's.
  for (llvm::StringRef known : knownGpuChips()) {
    if (known != chip)
      continue;
    if (known == "sm_80")
      return ampereDataCenter(known);
    if (known == "sm_86" || known == "sm_89" || known == "sm_120")
      return smallSharedMemory(known);
    return hopper(known);
  }
  return std::nullopt;
}
