//===- SlabKernel.h - The slab kernel's steps -------------------*- C++ -*-===//
//
// Part of norm-opt. The slab kernel of a GroupNorm-like op (SlabKernel.cpp
// has the algorithm) is built in two steps that pass values:
//   SlabPrologueBuilder (SlabPrologue.cpp): the arguments, the thread's
//     ids, the slab and part the CTA works on, the captured values and the
//     shared memory -> SlabEntry
//   SlabKernelBuilder (SlabKernel.cpp): from a SlabEntry, the row stages
//     and the elementwise pass
// Both read the same SlabShape, decided once from the plan.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_LIB_CONVERSION_NORMTOGPU_SLABKERNEL_H
#define NORM_LIB_CONVERSION_NORMTOGPU_SLABKERNEL_H

#include "KernelBuilder.h"

namespace mlir::norm {

/// How the threads walk a slab (SlabKernel.cpp's header).
enum class SlabWalk { WarpPerChannel, CtaPerChannel, PositionRuns };

/// The walk a slab kernel of `warps` warps takes.
SlabWalk slabWalkOf(const SlabDomain &slab, int64_t warps);

/// The slab kernel's sizes, from its plan.
struct SlabShape {
  SlabShape(const KernelPlan &plan, const SlabDomain &slab, int64_t vector,
            int64_t parts, unsigned numCol)
      : T(plan.block()), W(plan.block() / 32), V(vector), Q(parts),
        K(plan.slabGroups), runThreads(K * slab.cSize / vector),
        numCol(numCol), walk(slabWalkOf(slab, plan.block() / 32)) {}

  const int64_t T, W, V;
  const int64_t Q;          // CTAs (a cluster) per slab
  const int64_t K;          // PositionRuns: slabs (adjacent groups) per CTA
  const int64_t runThreads; // PositionRuns: threads per position
  const unsigned numCol;
  const SlabWalk walk;
};

/// The kernel's arguments (mainKernelParams' list: rows = the slabs M,
/// cols = a slab's elements L).
struct SlabArgs {
  SmallVector<Value> fullIn, rowIn, colIn, fullOut, scalars;
  Value partial, rows, cols;
};

/// Where the CTA's slab (the thread's, K > 1) and its part lie.
struct SlabPlace {
  Value row;        // r: the slab, and the row inputs' index (the
                    // thread's group's where a CTA takes K > 1)
  Value sample;     // n
  Value firstGroup; // a0: the CTA's first group (K > 1), else a
  Value partialRow; // n x Q + q: the partial row it writes
  Value group;      // a: its column slots start at a x C
  Value base;       // the slab's first element
  Value spatial;    // D = L / C: elements per channel
  Value dBegin, dEnd; // the CTA's part [dBegin, dEnd) of D
  Value cStride, dStride;
};

/// What the prologue made: everything the kernel's steps read.
struct SlabEntry {
  SlabArgs args;
  IRMapping captured; // the values from above the op, cloned at the entry
  Value tid, lane, warp;
  SlabPlace at;
  Value slots;       // the workgroup buffer (slabSharedFloats)
  Value clusterSums; // Q > 1: [row stage][K][sum] of this CTA's totals
  int64_t maxStageSums = 1;
};

/// What both builders share: the op, its slab, the kernel and its shape.
class SlabBuilderBase : public KernelBuilderBase {
public:
  SlabBuilderBase(OpBuilder &b, MixedReductionOp op, const SlabDomain &slab,
                  const SlabShape &shape, gpu::GPUFuncOp func,
                  IRMapping captured = {})
      : KernelBuilderBase(b, op.getLoc(), std::move(captured)), op(op), slab(slab), func(func),
        T(shape.T), W(shape.W), V(shape.V), Q(shape.Q), K(shape.K),
        runThreads(shape.runThreads), numCol(shape.numCol),
        walk(shape.walk) {}

protected:
  /// The CTA's group of thread `t` (PositionRuns: (t % runThreads) x V /
  /// C; 0 for the channel walks).
  Value groupOfThread(Value t);

  MixedReductionOp op;
  const SlabDomain slab;
  gpu::GPUFuncOp func;
  const int64_t T, W, V, Q, K, runThreads;
  const unsigned numCol;
  const SlabWalk walk;
};

/// The kernel's entry block up to its first row stage.
class SlabPrologueBuilder : public SlabBuilderBase {
public:
  using SlabBuilderBase::SlabBuilderBase;
  /// Fails (a located error) on a captured value it cannot clone.
  FailureOr<SlabEntry> build();

private:
  SlabArgs unpackArguments();
  SlabPlace placeSlab(const SlabArgs &args, Value tid);
  /// `products`: those of two or more run-time dims of a run, known only
  /// together.
  DenseMap<int64_t, Value>
  dimSizes(const SlabArgs &args, const SlabPlace &at,
           SmallVector<std::pair<SmallVector<int64_t>, Value>> &products);
};

} // namespace mlir::norm

#endif // NORM_LIB_CONVERSION_NORMTOGPU_SLABKERNEL_H
