//===- GpuTarget.cpp - The chips norm-opt knows ---------------------------===//
//
// Part of norm-opt. Limits from the CUDA C Programming Guide's table of
// compute capabilities (shared memory per SM / the most a CTA may opt in
// to, which includes its static shared memory; resident CTAs per SM); the
// PTX minimum is the one LLVM 22's NVPTX back end requires for the chip.
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/NormToGPU/GpuTarget.h"

#include "llvm/ADT/StringExtras.h"

#include <array>
#include <iterator>

using namespace mlir;
using namespace mlir::norm;

namespace {
constexpr int64_t KiB = 1024;

/// One row of the chip table; the fields not listed keep GpuTarget's
/// defaults (the same on every chip here: 255 registers per thread, 64K per
/// SM, 1024 threads and 48 KiB of static shared memory per CTA, cp.async).
struct ChipRow {
  const char *chip;
  int64_t minPTXVersion;
  int64_t sharedKiBPerSM;
  int64_t sharedKiBPerBlock;
  int64_t maxCTAsPerSM;
  bool hopperCopies; // cp.async.bulk (TMA) and clusters
};

// Ampere data center and Jetson Orin (sm_80, sm_87): 164 KiB of shared
// memory per SM, 163 per CTA. Ampere / Ada / Blackwell consumer parts
// (sm_86, sm_88, sm_89, sm_12x): 100 / 99. Hopper and Blackwell data center
// (sm_90, sm_10x, sm_110): 228 / 227, bulk copies and clusters.
// clang-format off
constexpr ChipRow kChips[] = {
  // chip      PTX  shared/SM  shared/CTA  CTAs/SM  bulk copies, clusters
  {"sm_80",    70,  164,       163,        32,      false},
  {"sm_86",    71,  100,        99,        16,      false},
  {"sm_87",    74,  164,       163,        16,      false},
  {"sm_88",    90,  100,        99,        24,      false},
  {"sm_89",    78,  100,        99,        24,      false},
  {"sm_90",    78,  228,       227,        32,      true},
  {"sm_90a",   80,  228,       227,        32,      true},
  {"sm_100",   86,  228,       227,        32,      true},
  {"sm_100a",  86,  228,       227,        32,      true},
  {"sm_100f",  88,  228,       227,        32,      true},
  {"sm_101",   86,  228,       227,        32,      true},
  {"sm_101a",  86,  228,       227,        32,      true},
  {"sm_101f",  88,  228,       227,        32,      true},
  {"sm_103",   88,  228,       227,        32,      true},
  {"sm_103a",  88,  228,       227,        32,      true},
  {"sm_103f",  88,  228,       227,        32,      true},
  {"sm_110",   90,  228,       227,        32,      true},
  {"sm_110a",  90,  228,       227,        32,      true},
  {"sm_110f",  90,  228,       227,        32,      true},
  {"sm_120",   87,  100,        99,        24,      false},
  {"sm_120a",  87,  100,        99,        24,      false},
  {"sm_120f",  88,  100,        99,        24,      false},
  {"sm_121",   88,  100,        99,        24,      false},
  {"sm_121a",  88,  100,        99,        24,      false},
  {"sm_121f",  88,  100,        99,        24,      false},
};
// clang-format on

GpuTarget makeTarget(const ChipRow &row) {
  GpuTarget t;
  t.chip = row.chip;
  t.minPTXVersion = row.minPTXVersion;
  t.sharedBytesPerSM = row.sharedKiBPerSM * KiB;
  t.sharedBytesPerBlock = row.sharedKiBPerBlock * KiB;
  t.maxCTAsPerSM = row.maxCTAsPerSM;
  t.hasAsyncCopy = true;
  t.hasBulkCopy = row.hopperCopies;
  t.hasClusters = row.hopperCopies;
  // griddepcontrol: PTX 7.8, sm_90 and newer (sm_12x included).
  llvm::StringRef digits = llvm::StringRef(row.chip).drop_front(3).take_while(
      [](char c) { return llvm::isDigit(c); });
  unsigned arch = 0;
  t.hasDependentLaunch = !digits.getAsInteger(10, arch) && arch >= 90;
  return t;
}
} // namespace

llvm::ArrayRef<llvm::StringRef> mlir::norm::knownGpuChips() {
  static const auto chips = [] {
    std::array<llvm::StringRef, std::size(kChips)> names;
    for (size_t i = 0; i < names.size(); ++i)
      names[i] = kChips[i].chip;
    return names;
  }();
  return chips;
}

std::optional<GpuTarget> mlir::norm::lookupGpuTarget(llvm::StringRef chip) {
  // The chip's StringRef is the table's, which outlives the caller's.
  for (const ChipRow &row : kChips)
    if (chip == row.chip)
      return makeTarget(row);
  return std::nullopt;
}

int64_t mlir::norm::ptxVersionOf(llvm::StringRef features,
                                 const GpuTarget &target) {
  int64_t newest = 0;
  llvm::SmallVector<llvm::StringRef> items;
  features.split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    llvm::StringRef name = item.trim();
    int64_t version;
    if (name.consume_front("+ptx") && !name.getAsInteger(10, version))
      newest = std::max(newest, version);
  }
  return newest ? newest : target.minPTXVersion;
}
