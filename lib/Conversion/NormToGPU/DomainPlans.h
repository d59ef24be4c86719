//===- DomainPlans.h - Slab and channels-first plans ------------*- C++ -*-===//
//
// Part of norm-opt. planKernel's steps for the domains that are not
// row-major rows (DomainPlans.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef NORM_LIB_CONVERSION_NORMTOGPU_DOMAINPLANS_H
#define NORM_LIB_CONVERSION_NORMTOGPU_DOMAINPLANS_H

#include "norm/Conversion/NormToGPU.h"

namespace mlir::norm {

/// A slab domain (GroupNorm): one CTA per slab, or on sm_90+ the split
/// kernels for few slabs (a cluster of CTAs per slab).
KernelPlan planSlabRows(MixedReductionOp op, const SlabDomain &slab,
                        const KernelPlanOptions &options,
                        const GpuTarget &target);

/// A channels-first domain (static N): W warps of a tile split N.
KernelPlan planStridedRows(MixedReductionOp op,
                           const KernelPlanOptions &options);

} // namespace mlir::norm

#endif // NORM_LIB_CONVERSION_NORMTOGPU_DOMAINPLANS_H
