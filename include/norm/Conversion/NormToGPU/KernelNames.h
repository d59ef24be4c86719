//===- KernelNames.h - Names of the GPU kernels and symbols -----*- C++ -*-===//
//
// Part of norm-opt. The names --convert-norm-to-gpu gives the kernels of
// one norm.mixed_reduction (`<prefix><suffix>`, prefix = the kernel_plan's
// `kernel` field) and the module-level symbols; the launcher writer
// (lib/Compile/Launcher.cpp) looks the kernels up by these names.
// test/Conversion/check_ptx.py keeps a Python copy of the suffixes.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_CONVERSION_NORMTOGPU_KERNELNAMES_H
#define NORM_CONVERSION_NORMTOGPU_KERNELNAMES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <string>

namespace mlir::norm {

/// The vector main kernel (16-byte accesses; N a multiple of the vector).
inline constexpr llvm::StringLiteral kMainKernelSuffix = "_main";
/// The vector main kernel that peels rows (plan `peel`): 16-byte accesses
/// between a scalar head and tail per row; any N, 16-byte aligned base
/// pointers, strides that agree modulo the vector.
inline constexpr llvm::StringLiteral kMainPeelKernelSuffix = "_main_peel";
/// The scalar main kernel (any N, strides and base pointers).
inline constexpr llvm::StringLiteral kMainScalarKernelSuffix = "_main_scalar";
/// The looped variant's kernels with more CTAs per row (few rows).
inline constexpr llvm::StringLiteral kMainSplitKernelSuffix = "_main_split";
inline constexpr llvm::StringLiteral kMainSplitScalarKernelSuffix =
    "_main_split_scalar";
/// The latency kernels (plan latency_ctas): one cluster for small calls,
/// finishing the column results itself; 16-byte accesses (N a multiple of
/// the vector) and the scalar one.
inline constexpr llvm::StringLiteral kLatencyKernelSuffix = "_latency";
inline constexpr llvm::StringLiteral kLatencyScalarKernelSuffix =
    "_latency_scalar";
/// The final reduction of the partial buffer (two-launch path).
inline constexpr llvm::StringLiteral kFinalKernelSuffix = "_final";

/// The prefix of the kernels of a resident tier (a #norm.resident_tier of
/// a run-time N, holding up to `cols` columns): `<prefix>_tier<cols>`, then
/// kMainKernelSuffix, kMainPeelKernelSuffix or kMainScalarKernelSuffix.
inline std::string residentTierPrefix(llvm::StringRef prefix, int64_t cols) {
  return (prefix + "_tier" + llvm::Twine(cols)).str();
}

/// The final kernel of `threads` threads (the two-launch path of a main
/// kernel whose block is `threads`, so that both paths sum alike):
/// `<prefix>_final` for the plan's own final_threads (`planThreads`),
/// `<prefix>_final_<threads>` for resident tiers whose block differs.
inline std::string finalKernelName(llvm::StringRef prefix, int64_t threads,
                                   int64_t planThreads) {
  if (threads == planThreads)
    return (prefix + kFinalKernelSuffix).str();
  return (prefix + kFinalKernelSuffix + "_" + llvm::Twine(threads)).str();
}

/// The attribute (a #norm.kernel_plan) on each norm.mixed_reduction.
inline constexpr llvm::StringLiteral kKernelPlanAttrName = "norm.gpu";

/// The gpu.module holding every kernel.
inline constexpr llvm::StringLiteral kKernelModuleName = "norm_kernels";
/// The dynamic shared memory of every kernel (an extern shared array).
inline constexpr llvm::StringLiteral kDynamicSharedMemoryName =
    "norm_dynamic_smem";

} // namespace mlir::norm

#endif // NORM_CONVERSION_NORMTOGPU_KERNELNAMES_H
