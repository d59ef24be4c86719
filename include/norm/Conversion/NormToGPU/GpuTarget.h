//===- GpuTarget.h - What the kernel plan knows about a GPU -----*- C++ -*-===//
//
// Part of norm-opt. The description of a GPU that the kernel plan
// (planKernel) is made from, per chip family (`--chip`): register and
// shared-memory limits and the copy features. The SM count is not here:
// the launcher reads it at run time.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_CONVERSION_NORMTOGPU_GPUTARGET_H
#define NORM_CONVERSION_NORMTOGPU_GPUTARGET_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace mlir::norm {

struct GpuTarget {
  llvm::StringRef chip;              // e.g. "sm_90a"
  int64_t registersPerThread = 255;  // most 32-bit registers of a thread
  int64_t registersPerSM = 65536;    // the register file of an SM
  int64_t sharedBytesPerBlock = 0;   // most shared memory of a CTA (opt-in)
  int64_t sharedBytesPerSM = 0;      // shared memory of an SM
  int64_t maxThreadsPerBlock = 1024;
  bool hasAsyncCopy = false;   // cp.async (sm_80+)
  bool hasBulkCopy = false;    // cp.async.bulk / TMA (sm_90+)
  bool hasClusters = false;    // thread-block clusters, DSMEM (sm_90+)
};

/// The description of `chip` ("sm_80", "sm_90a", ...), or nullopt when
/// the chip is not one of knownGpuChips().
std::optional<GpuTarget> lookupGpuTarget(llvm::StringRef chip);

/// The chips lookupGpuTarget knows, in order.
llvm::ArrayRef<llvm::StringRef> knownGpuChips();

} // namespace mlir::norm

#endif // NORM_CONVERSION_NORMTOGPU_GPUTARGET_H
