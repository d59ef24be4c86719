//===- GpuTarget.h - What norm-opt knows about a GPU ------------*- C++ -*-===//
//
// Part of norm-opt. The target description of a GPU (`--chip`), the one
// table of chip facts: the kernel plan (planKernel) is made from it, the
// option validation (validateGpuOptions) takes its ranges from it and the
// kernels written are checked against it (checkKernelResources): the PTX
// version, register, thread and shared-memory limits, resident CTAs and the
// copy features. The SM count is not here: the launcher reads it at run time.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_CONVERSION_NORMTOGPU_GPUTARGET_H
#define NORM_CONVERSION_NORMTOGPU_GPUTARGET_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace mlir::norm {

/// One chip. The numbers are the CUDA programming guide's per compute
/// capability; the PTX minimum is LLVM 22's NVPTX back end's.
struct GpuTarget {
  llvm::StringRef chip;              // e.g. "sm_90a" (NVPTX's name)
  int64_t minPTXVersion = 70;        // +ptxNN below this: LLVM refuses it
  int64_t registersPerThread = 255;  // most 32-bit registers of a thread
  int64_t registersPerSM = 65536;    // the register file of an SM
  int64_t sharedBytesPerBlock = 0;   // most shared memory of a CTA (opt-in,
                                     // static + dynamic)
  int64_t sharedBytesPerSM = 0;      // shared memory of an SM
  int64_t staticSharedBytesPerBlock = 48 * 1024; // ptxas's static limit
  int64_t maxThreadsPerBlock = 1024;
  int64_t maxCTAsPerSM = 32;         // resident CTAs per multiprocessor
  bool hasAsyncCopy = false;   // cp.async (sm_80+)
  bool hasBulkCopy = false;    // cp.async.bulk / TMA (sm_90+)
  bool hasClusters = false;    // thread-block clusters, DSMEM (sm_90+;
                               // the cluster plans also need PTX 8.1)
  bool hasDependentLaunch = false; // griddepcontrol (sm_90+)
};

/// The cluster plans' row sums travel by `st.async` (PTX 8.1).
constexpr int64_t kClusterMinPTXVersion = 81;

/// The PTX ISA version the kernels are emitted for: the newest +ptxNN of
/// `features` (a comma-separated list), else the chip's minimum.
int64_t ptxVersionOf(llvm::StringRef features, const GpuTarget &target);

/// The description of `chip` (exact, case-sensitive NVPTX name: "sm_80",
/// "sm_90a", ...), or nullopt when the chip is not one of knownGpuChips()
/// (norm-opt's kernels need sm_80 or newer: cp.async).
std::optional<GpuTarget> lookupGpuTarget(llvm::StringRef chip);

/// The chips lookupGpuTarget knows, in order.
llvm::ArrayRef<llvm::StringRef> knownGpuChips();

} // namespace mlir::norm

#endif // NORM_CONVERSION_NORMTOGPU_GPUTARGET_H
