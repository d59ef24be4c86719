//===- SlabKernel.cpp - The slab kernel of a GroupNorm-like op -----------===//
//
// Part of norm-opt. A multi-axis op whose domain is a slab domain
// (norm::slabDomainOf: GroupNorm's [N, G, C/G, HW] or channels last
// [N, HW, G, C/G]; docs/gpu.md, "GroupNorm slabs") runs the slab kernel:
// a slab (n, g) is a row of the op, C/G x HW elements.
//
//   r = n x A + a                             (A = G, C = C/G static)
//   base = n x rStride + a x aStride          (element (c, d) at
//                                              base + c x cStride +
//                                              d x dStride)
//
// A CTA's unit is a slab, or K adjacent slabs channels last (below). Where
// the units are at most half the SMs the launcher takes the split kernels
// (plan.splitColumnGroups = Q > 1, a thread-block cluster of Q CTAs per
// unit): CTA q walks part q of the spatial extent D (whole vectors), the
// row sums are the cluster's (each CTA's totals in its shared slots, a
// cluster barrier, the Q slots read in rank order through distributed
// shared memory: every CTA adds them alike), and part q's column sums go
// to partial row n x Q + q.
//
//   u = blockIdx.x / Q; q = blockIdx.x % Q   (Q = 1: u = blockIdx.x, q = 0)
//   n = u / (A / K); a0 = (u % (A / K)) x K
//
// The threads walk the slab (SlabWalk), V elements per access (a channel
// walk issues the loads of kSlabAccessesInFlight accesses before it uses
// the first, then the rest one at a time):
//   WarpPerChannel (NCHW, C >= warps): warp w takes channels w, w + W, ...;
//     its lanes stride over the channel's D contiguous elements
//   CtaPerChannel (NCHW, few channels): every thread strides over each
//     channel in turn
//   PositionRuns (channels last): a CTA takes K adjacent slabs (groups
//     a0 .. a0 + K - 1 of a sample, plan.slabGroups: their runs of a
//     position are one contiguous run of K x C elements); a thread keeps
//     V channels [c0, c0 + V) of one group's run and strides over the
//     spatial positions (K x C / V threads per position); its row sums
//     are its group's (each group's threads' sums in thread order through
//     shared memory)
//
//   per row stage: the walk's contributions -> per-thread sums -> a CTA
//     reduction (warp butterfly, the warps' slots in warp order): every
//     thread holds the row results
//   the elementwise pass: the full results stored, the column
//     contributions summed per channel (a warp's or the CTA's reduction
//     at each channel's end; PositionRuns: per thread over the slab, then
//     each channel's threads in order through shared memory); one writer
//     per (k, n, a x C + c) slot of the partial rows
//   each pass walks the other way from the one before (channels and
//     positions descending): it starts on what that one read last, most
//     likely still in L2
//
// The final kernel (ColumnReduction.cpp) then reduces the P = N x Q
// partial rows of A x C columns in a fixed order: every result is bitwise
// equal between runs.
//
//===----------------------------------------------------------------------===//

#include "SlabKernel.h"

#include "norm/Dialect/Norm/IR/GroupBoundary.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::norm;

namespace {

/// Accesses a thread of a channel walk loads before it uses the first
/// (memory-level parallelism: 4 x 16 bytes per full input in flight).
constexpr int64_t kSlabAccessesInFlight = 4;

/// The column values at one access: [col input][element].
using ColumnValues = SmallVector<SmallVector<Value>>;

/// The slab kernel from its prologue's values (SlabKernel.h).
class SlabKernelBuilder : public SlabBuilderBase {
public:
  SlabKernelBuilder(OpBuilder &b, MixedReductionOp op, const SlabDomain &slab,
                    const SlabShape &shape, gpu::GPUFuncOp func,
                    const SlabEntry &entry)
      : SlabBuilderBase(b, op, slab, shape, func, entry.captured),
        tid(entry.tid),
        lane(entry.lane), warp(entry.warp), slots(entry.slots),
        clusterSums(entry.clusterSums), maxStageSums(entry.maxStageSums) {}

  /// The row stages and the elementwise pass, after the prologue.
  void build(const SlabArgs &args, const SlabPlace &at);

private:
  /// The col inputs of channels [c, c + count) (count 1: one channel for
  /// all V elements).
  ColumnValues loadColumnInputs(const SlabArgs &args, const SlabPlace &at,
                                Value c, int64_t count);
  /// V elements of every full input at `index`: [input][element].
  SmallVector<SmallVector<Value>> loadFull(const SlabArgs &args, Value index);
  SmallVector<Value> regionArgs(ArrayRef<SmallVector<Value>> full,
                                ArrayRef<Value> rowIn,
                                const ColumnValues &colVals,
                                ArrayRef<Value> rowResults, int64_t e);

  /// The thread's accesses of the slab (the walk), `carried` threaded
  /// through: `perAccess` at each (V elements of every full input, loaded
  /// at `index`; `valid`: whether the access counts, true for every access
  /// the walks make), `endChannel` after each channel of a channel walk.
  using AccessFn = function_ref<SmallVector<Value>(
      Value index, Value valid, ArrayRef<SmallVector<Value>> full,
      const ColumnValues &colVals, ValueRange carried)>;
  using ChannelEndFn =
      function_ref<SmallVector<Value>(Value c, ValueRange carried)>;
  /// `backward`: every walk in the reverse order (channels and positions
  /// descending), so that the elementwise pass first reads what the row
  /// stage read last, most likely still in L2.
  SmallVector<Value> walkSlab(const SlabArgs &args, const SlabPlace &at,
                              ValueRange init, AccessFn perAccess,
                              ChannelEndFn endChannel, bool backward);
  /// first + last of the positions first, first + step, ... below end
  /// (position p is taken as mirror - p: the same positions, descending).
  Value mirrorOf(Value first, Value step, Value end);
  /// The accesses `step` apart from `first` up to `end` (at base +
  /// position x stride): `inFlight` loaded before the first is used while
  /// a whole group fits, then one at a time.
  SmallVector<Value> stridedAccesses(const SlabArgs &args, Value first,
                                     Value step, Value end, Value stride,
                                     Value base, const ColumnValues &colVals,
                                     ValueRange carried, int64_t inFlight,
                                     AccessFn perAccess, bool backward);
  SmallVector<Value> walkChannels(const SlabArgs &args, const SlabPlace &at,
                                  ValueRange init, Value firstChannel,
                                  Value channelStep, Value firstElement,
                                  Value elementStep, AccessFn perAccess,
                                  ChannelEndFn endChannel,
                                  bool backward);
  /// PositionRuns: the thread's first channel and first position, and the
  /// positions' step (threads past the last whole run take none).
  struct Runs {
    Value channel, position, step;
  };
  Runs positionRuns(const SlabPlace &at);

  /// The row stages: every thread ends with the row results.
  SmallVector<Value> reduceRowStages(const SlabArgs &args,
                                     const SlabPlace &at,
                                     ArrayRef<Value> rowIn);
  /// The elementwise pass: full results stored, column sums per channel
  /// into the partial rows.
  void elementwisePass(const SlabArgs &args, const SlabPlace &at,
                       ArrayRef<Value> rowIn, ArrayRef<Value> rowResults);
  /// PositionRuns: each channel's threads' sums in thread order (through
  /// shared memory), into the partial rows.
  void sumRunsPerChannel(const SlabArgs &args, const SlabPlace &at,
                         ValueRange accumulators);
  /// Sums across the CTA (warp butterfly, then the warps' slots in warp
  /// order): every thread gets the same totals.
  SmallVector<Value> reduceAcrossCta(ArrayRef<Value> sums);
  /// PositionRuns with K > 1: each group's threads' sums in thread order
  /// (through shared memory): every thread gets its group's totals.
  SmallVector<Value> reduceAcrossGroups(ArrayRef<Value> sums);
  /// The warp butterfly: every lane gets the warp's totals.
  SmallVector<Value> reduceAcrossWarp(ArrayRef<Value> sums);
  /// Sums across the Q CTAs of the slab's cluster (row stage `stage`):
  /// every CTA gets the same totals, added in rank order.
  SmallVector<Value> reduceAcrossCluster(ArrayRef<Value> totals,
                                         int64_t stage);
  /// Partial row slot (k, n x Q + q, `slot`) of [numCol, P = N x Q,
  /// A x C].
  void storePartial(const SlabArgs &args, const SlabPlace &at, Value k,
                    Value slot, Value v);

  // The prologue's (SlabEntry).
  const Value tid, lane, warp, slots, clusterSums;
  const int64_t maxStageSums;
};

} // namespace

ColumnValues SlabKernelBuilder::loadColumnInputs(const SlabArgs &args,
                                                 const SlabPlace &at, Value c,
                                                 int64_t count) {
  Value slot = add(mul(at.group, c64(slab.cSize)), c);
  ColumnValues vals;
  for (auto [ptrArg, v] : llvm::zip(args.colIn, op.getCol())) {
    SmallVector<Value> elems;
    for (int64_t e = 0; e < count; ++e)
      elems.push_back(load(ptrArg, elementTypeOf(v), add(slot, c64(e)), 1)[0]);
    vals.push_back(elems);
  }
  return vals;
}

SmallVector<SmallVector<Value>>
SlabKernelBuilder::loadFull(const SlabArgs &args, Value index) {
  SmallVector<SmallVector<Value>> vals;
  for (auto [ptrArg, v] : llvm::zip(args.fullIn, op.getFull()))
    vals.push_back(load(ptrArg, elementTypeOf(v), index, V));
  return vals;
}

SmallVector<Value> SlabKernelBuilder::regionArgs(
    ArrayRef<SmallVector<Value>> full, ArrayRef<Value> rowIn,
    const ColumnValues &colVals, ArrayRef<Value> rowResults, int64_t e) {
  SmallVector<Value> a;
  for (const SmallVector<Value> &f : full)
    a.push_back(f[e]);
  llvm::append_range(a, rowIn);
  for (const SmallVector<Value> &c : colVals)
    a.push_back(c.size() == 1 ? c[0] : c[e]);
  llvm::append_range(a, rowResults);
  return a;
}

SmallVector<Value> SlabKernelBuilder::stridedAccesses(
    const SlabArgs &args, Value first, Value step, Value end, Value stride,
    Value base, const ColumnValues &colVals, ValueRange carried,
    int64_t inFlight, AccessFn perAccess, bool backward) {
  Value always = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
  Value mirror = backward ? mirrorOf(first, step, end) : Value();
  // `count` accesses from `at`, all inside: loaded, then used in order.
  auto accesses = [&](Value at, int64_t count, ValueRange state) {
    SmallVector<Value> indices;
    SmallVector<SmallVector<SmallVector<Value>>> loaded;
    for (int64_t u = 0; u < count; ++u) {
      Value position = add(at, mul(step, c64(u)));
      if (mirror)
        position = arith::SubIOp::create(b, loc, mirror, position);
      indices.push_back(add(base, mul(position, stride)));
      loaded.push_back(loadFull(args, indices.back()));
    }
    SmallVector<Value> next(state);
    for (int64_t u = 0; u < count; ++u)
      next = perAccess(indices[u], always, loaded[u], colVals, next);
    return next;
  };
  auto loop = [&](Value from, Value to, Value by, int64_t count,
                  ValueRange state) {
    return scf::ForOp::create(
               b, loc, from, to, by, state,
               [&](OpBuilder &, Location, Value at, ValueRange inner) {
                 scf::YieldOp::create(b, loc, accesses(at, count, inner));
               })
        .getResults();
  };
  if (inFlight == 1)
    return loop(first, end, step, 1, carried);
  // Whole groups of `inFlight` accesses while the last of a group is
  // inside, then the rest one at a time.
  Value group = mul(step, c64(inFlight));
  Value span = mul(step, c64(inFlight - 1));
  Value groupEnd = arith::SelectOp::create(
      b, loc, ult(span, end), arith::SubIOp::create(b, loc, end, span),
      c64(0));
  SmallVector<Value> state = loop(first, groupEnd, group, inFlight, carried);
  Value groups = arith::SelectOp::create(
      b, loc, ult(first, groupEnd),
      arith::DivUIOp::create(
          b, loc,
          add(arith::SubIOp::create(b, loc, groupEnd, first),
              arith::SubIOp::create(b, loc, group, c64(1))),
          group),
      c64(0));
  return loop(add(first, mul(groups, group)), end, step, 1, state);
}

SmallVector<Value> SlabKernelBuilder::walkChannels(
    const SlabArgs &args, const SlabPlace &at, ValueRange init,
    Value firstChannel, Value channelStep, Value firstElement,
    Value elementStep, AccessFn perAccess, ChannelEndFn endChannel,
    bool backward) {
  Value mirror =
      backward ? mirrorOf(firstChannel, channelStep, c64(slab.cSize)) : Value();
  auto channels = scf::ForOp::create(
      b, loc, firstChannel, c64(slab.cSize), channelStep, init,
      [&](OpBuilder &, Location, Value c, ValueRange carried) {
        if (mirror)
          c = arith::SubIOp::create(b, loc, mirror, c);
        ColumnValues colVals = loadColumnInputs(args, at, c, 1);
        Value channelBase = add(at.base, mul(c, at.cStride));
        SmallVector<Value> elements = stridedAccesses(
            args, add(at.dBegin, firstElement), elementStep, at.dEnd,
            at.dStride, channelBase, colVals, carried, kSlabAccessesInFlight,
            perAccess, backward);
        scf::YieldOp::create(b, loc, endChannel(c, elements));
      });
  return channels.getResults();
}

SlabKernelBuilder::Runs SlabKernelBuilder::positionRuns(const SlabPlace &at) {
  // G' = K x C / V threads per position; the CTA's whole runs cover
  // floor(T / G') positions at a time; a thread's V channels are in its
  // group's run.
  int64_t positions = T / runThreads;
  Runs runs;
  runs.channel = arith::RemUIOp::create(
      b, loc,
      mul(arith::RemUIOp::create(b, loc, tid, c64(runThreads)), c64(V)),
      c64(slab.cSize));
  Value first = arith::DivUIOp::create(b, loc, tid, c64(runThreads));
  // Threads past the last whole run start past the end.
  runs.position = arith::SelectOp::create(
      b, loc, ult(first, c64(positions)), add(at.dBegin, first), at.dEnd);
  runs.step = c64(positions);
  return runs;
}

Value SlabKernelBuilder::mirrorOf(Value first, Value step, Value end) {
  // last = first + (K - 1) x step, K = ceil((end - first) / step); only
  // used inside a loop that runs, so K >= 1 there.
  Value span = arith::SubIOp::create(b, loc, end, first);
  Value k = arith::DivUIOp::create(
      b, loc, add(span, arith::SubIOp::create(b, loc, step, c64(1))), step);
  Value last = add(first, mul(arith::SubIOp::create(b, loc, k, c64(1)), step));
  return add(first, last);
}

SmallVector<Value> SlabKernelBuilder::walkSlab(const SlabArgs &args,
                                               const SlabPlace &at,
                                               ValueRange init,
                                               AccessFn perAccess,
                                               ChannelEndFn endChannel,
                                               bool backward) {
  switch (walk) {
  case SlabWalk::WarpPerChannel:
    return walkChannels(args, at, init, warp, c64(W), mul(lane, c64(V)),
                        c64(32 * V), perAccess, endChannel, backward);
  case SlabWalk::CtaPerChannel:
    return walkChannels(args, at, init, c64(0), c64(1), mul(tid, c64(V)),
                        c64(T * V), perAccess, endChannel, backward);
  case SlabWalk::PositionRuns: {
    Runs runs = positionRuns(at);
    ColumnValues colVals = loadColumnInputs(args, at, runs.channel, V);
    Value runBase = add(at.base, runs.channel);
    // Four accesses in flight: with K groups' runs of >= 128 bytes, 2-12%
    // faster on 7 of 8 points (one run of 20-80 bytes a CTA was slower;
    // perf-notes, "GroupNorm slabs").
    return stridedAccesses(args, runs.position, runs.step, at.dEnd,
                           at.dStride, runBase, colVals, init,
                           kSlabAccessesInFlight, perAccess, backward);
  }
  }
  llvm_unreachable("unknown slab walk");
}

SmallVector<Value> SlabKernelBuilder::reduceAcrossWarp(ArrayRef<Value> sums) {
  SmallVector<Value> totals(sums);
  for (int64_t off = 16; off >= 1; off /= 2)
    for (Value &s : totals) {
      auto shuffled =
          gpu::ShuffleOp::create(b, loc, s, off, 32, gpu::ShuffleMode::XOR);
      s = arith::AddFOp::create(b, loc, s, shuffled.getShuffleResult());
    }
  return totals;
}

SmallVector<Value> SlabKernelBuilder::reduceAcrossCta(ArrayRef<Value> sums) {
  SmallVector<Value> totals = reduceAcrossWarp(sums);
  if (W == 1)
    return totals;
  ifThen(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, c64(0)),
         [&] {
           for (auto [j, s] : llvm::enumerate(totals))
             memref::StoreOp::create(
                 b, loc, s, slots, ValueRange{toIndex(add(c64(j * W), warp))});
         });
  gpu::BarrierOp::create(b, loc);
  for (auto [j, s] : llvm::enumerate(totals)) {
    Value total;
    for (int64_t w = 0; w < W; ++w) {
      Value part = memref::LoadOp::create(b, loc, slots,
                                          ValueRange{toIndex(c64(j * W + w))});
      total = total ? arith::AddFOp::create(b, loc, total, part).getResult()
                    : part;
    }
    s = total;
  }
  gpu::BarrierOp::create(b, loc); // the slots are reused
  return totals;
}

SmallVector<Value>
SlabKernelBuilder::reduceAcrossCluster(ArrayRef<Value> totals, int64_t stage) {
  // Each stage has its own slots, so no stage's writes race a peer's reads
  // of the one before; the barrier at the kernel's end keeps every CTA's
  // slots alive until its peers have read them.
  Type ptr7 = LLVM::LLVMPointerType::get(b.getContext(), 7);
  // Slots [stage][group][sum]; a group's first thread writes its totals.
  Value group = K > 1 ? groupOfThread(tid) : c64(0);
  auto slot = [&](unsigned j) -> Value {
    Value index = add(mul(add(c64(stage * K), group), c64(maxStageSums)),
                      c64(j));
    return LLVM::GEPOp::create(b, loc, clusterSums.getType(), f32, clusterSums,
                               ValueRange{index});
  };
  Value writer =
      K > 1 ? arith::AndIOp::create(
                  b, loc, ult(tid, c64(runThreads)),
                  arith::CmpIOp::create(
                      b, loc, arith::CmpIPredicate::eq,
                      arith::RemUIOp::create(b, loc, mul(tid, c64(V)),
                                             c64(slab.cSize)),
                      c64(0)))
                  .getResult()
            : arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                    c64(0))
                  .getResult();
  ifThen(writer, [&] {
    for (auto [j, t] : llvm::enumerate(totals))
      LLVM::StoreOp::create(b, loc, t, slot(j), /*alignment=*/4);
  });
  // Arrive (release) and wait (acquire): every CTA's slots are written.
  NVVM::ClusterArriveOp::create(b, loc, /*aligned=*/b.getUnitAttr());
  NVVM::ClusterWaitOp::create(b, loc, /*aligned=*/b.getUnitAttr());
  SmallVector<Value> sums;
  for (unsigned j = 0; j < totals.size(); ++j) {
    Value total;
    for (int64_t r = 0; r < Q; ++r) {
      Value peer = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(r));
      Value remote = NVVM::MapaOp::create(b, loc, ptr7, slot(j), peer);
      Value part = LLVM::LoadOp::create(b, loc, f32, remote, /*alignment=*/4);
      total = total ? arith::AddFOp::create(b, loc, total, part).getResult()
                    : part;
    }
    sums.push_back(total);
  }
  return sums;
}

SmallVector<Value>
SlabKernelBuilder::reduceAcrossGroups(ArrayRef<Value> sums) {
  // slots[j x T + t]: thread t's sum j; then slots[J x T + g x J + j]:
  // group g's total, by thread g x J + j over the group's threads of the
  // whole runs (positions p, its C / V threads of each) in order.
  const int64_t J = sums.size();
  for (auto [j, s] : llvm::enumerate(sums))
    memref::StoreOp::create(
        b, loc, s, slots, ValueRange{toIndex(add(c64(j * T), tid))});
  gpu::BarrierOp::create(b, loc);
  const int64_t positions = T / runThreads, perGroup = slab.cSize / V;
  ifThen(ult(tid, c64(K * J)), [&] {
    Value g = arith::DivUIOp::create(b, loc, tid, c64(J));
    Value j = arith::RemUIOp::create(b, loc, tid, c64(J));
    Value first = add(mul(j, c64(T)), mul(g, c64(perGroup)));
    auto total = scf::ForOp::create(
        b, loc, c64(0), c64(positions), c64(1), ValueRange{zeroF32()},
        [&](OpBuilder &, Location, Value p, ValueRange acc) {
          Value rowStart = add(first, mul(p, c64(runThreads)));
          Value sum = acc[0];
          for (int64_t v = 0; v < perGroup; ++v)
            sum = arith::AddFOp::create(
                b, loc, sum,
                memref::LoadOp::create(
                    b, loc, slots,
                    ValueRange{toIndex(add(rowStart, c64(v)))}));
          scf::YieldOp::create(b, loc, ValueRange{sum});
        });
    memref::StoreOp::create(b, loc, total.getResult(0), slots,
                            ValueRange{toIndex(add(c64(J * T), tid))});
  });
  gpu::BarrierOp::create(b, loc);
  Value mine = add(c64(J * T), mul(groupOfThread(tid), c64(J)));
  SmallVector<Value> totals;
  for (int64_t j = 0; j < J; ++j)
    totals.push_back(memref::LoadOp::create(
        b, loc, slots, ValueRange{toIndex(add(mine, c64(j)))}));
  gpu::BarrierOp::create(b, loc); // the slots are reused
  return totals;
}

SmallVector<Value> SlabKernelBuilder::reduceRowStages(const SlabArgs &args,
                                                      const SlabPlace &at,
                                                      ArrayRef<Value> rowIn) {
  SmallVector<Value> rowResults;
  for (auto [stageIndex, stage] : llvm::enumerate(op.getRowStages())) {
    TypeRange yields = stage.front().getTerminator()->getOperandTypes();
    SmallVector<Value> zeros(yields.size(), zeroF32());
    SmallVector<Value> sums = walkSlab(
        args, at, zeros,
        [&](Value, Value valid, ArrayRef<SmallVector<Value>> full,
            const ColumnValues &colVals, ValueRange carried) {
          SmallVector<Value> next(carried);
          for (int64_t e = 0; e < V; ++e)
            for (auto [s, v] : llvm::zip(
                     next, inlineRegion(stage, regionArgs(full, rowIn, colVals,
                                                          rowResults, e))))
              s = arith::AddFOp::create(
                  b, loc, s,
                  arith::SelectOp::create(b, loc, valid, toF32(v),
                                          zeroF32()));
          return next;
        },
        [&](Value, ValueRange carried) {
          return SmallVector<Value>(carried);
        },
        /*backward=*/stageIndex % 2 == 1);
    SmallVector<Value> totals =
        K > 1 ? reduceAcrossGroups(sums) : reduceAcrossCta(sums);
    if (Q > 1)
      totals = reduceAcrossCluster(totals, stageIndex);
    for (auto [total, type] : llvm::zip(totals, yields))
      rowResults.push_back(fromF32(total, type));
  }
  return rowResults;
}

void SlabKernelBuilder::storePartial(const SlabArgs &args, const SlabPlace &at,
                                     Value k, Value slot, Value v) {
  Value P =
      mul(arith::DivUIOp::create(b, loc, args.rows, c64(slab.aSize)), c64(Q));
  Value index = add(mul(add(mul(k, P), at.partialRow),
                        c64(slab.aSize * slab.cSize)),
                    slot);
  store(args.partial, f32, index, {v});
}

void SlabKernelBuilder::elementwisePass(const SlabArgs &args,
                                        const SlabPlace &at,
                                        ArrayRef<Value> rowIn,
                                        ArrayRef<Value> rowResults) {
  // Channel walks sum a channel's contributions per thread (one
  // accumulator per column result); PositionRuns keeps one per element of
  // its V channels over the whole slab.
  const bool runs = walk == SlabWalk::PositionRuns;
  const int64_t perThread = runs ? numCol * V : numCol;
  SmallVector<Value> zeros(perThread, zeroF32());
  SmallVector<Value> accumulators = walkSlab(
      args, at, zeros,
      [&](Value index, Value valid, ArrayRef<SmallVector<Value>> full,
          const ColumnValues &colVals, ValueRange carried) {
        SmallVector<SmallVector<Value>> outs(op.getFullResults().size());
        SmallVector<Value> next(carried);
        for (int64_t e = 0; e < V; ++e) {
          SmallVector<Value> a =
              regionArgs(full, rowIn, colVals, rowResults, e);
          for (auto [i, v] : llvm::enumerate(inlineRegion(op.getElementwise(), a)))
            outs[i].push_back(v);
          for (auto [k, v] : llvm::enumerate(inlineRegion(op.getColumns(), a))) {
            Value &acc = next[runs ? k * V + e : k];
            acc = arith::AddFOp::create(
                b, loc, acc,
                arith::SelectOp::create(b, loc, valid, toF32(v), zeroF32()));
          }
        }
        ifThen(valid, [&] {
          for (auto [i, out] : llvm::enumerate(outs))
            store(args.fullOut[i], elementTypeOf(op.getFullResults()[i]),
                  index, out);
        });
        return next;
      },
      [&](Value c, ValueRange carried) {
        if (numCol == 0)
          return SmallVector<Value>();
        // The channel's sum: of the warp (WarpPerChannel) or the CTA.
        bool byWarp = walk == SlabWalk::WarpPerChannel;
        SmallVector<Value> totals =
            byWarp ? reduceAcrossWarp(SmallVector<Value>(carried))
                   : reduceAcrossCta(SmallVector<Value>(carried));
        Value writer = byWarp ? lane : tid;
        ifThen(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, writer,
                                     c64(0)),
               [&] {
                 for (auto [k, v] : llvm::enumerate(totals))
                   storePartial(args, at, c64(k),
                                add(mul(at.group, c64(slab.cSize)), c), v);
               });
        return SmallVector<Value>(zeros);
      },
      // Each pass walks the other way from the one before: it starts on
      // what that one read last (perf-notes, "GroupNorm slabs").
      /*backward=*/op.getRowStages().size() % 2 == 1);
  if (runs && numCol > 0)
    sumRunsPerChannel(args, at, accumulators);
}

void SlabKernelBuilder::sumRunsPerChannel(const SlabArgs &args,
                                          const SlabPlace &at,
                                          ValueRange accumulators) {
  // slots[(k x T + t) x V + e]: thread t's sum of its channel c0 + e.
  for (unsigned k = 0; k < numCol; ++k)
    for (int64_t e = 0; e < V; ++e)
      memref::StoreOp::create(
          b, loc, accumulators[k * V + e], slots,
          ValueRange{toIndex(add(mul(add(c64(k * T), tid), c64(V)), c64(e)))});
  gpu::BarrierOp::create(b, loc);
  // Slot (k, c) of the CTA's K x C channels: the threads t = c / V,
  // c / V + G', ... of the whole runs, in order.
  int64_t channels = K * slab.cSize;
  int64_t active = T / runThreads * runThreads;
  Value firstSlot = mul(at.firstGroup, c64(slab.cSize));
  scf::ForOp::create(
      b, loc, tid, c64(numCol * channels), c64(T), ValueRange{},
      [&](OpBuilder &, Location, Value j, ValueRange) {
        Value k = arith::DivUIOp::create(b, loc, j, c64(channels));
        Value c = arith::RemUIOp::create(b, loc, j, c64(channels));
        Value first = arith::DivUIOp::create(b, loc, c, c64(V));
        Value e = arith::RemUIOp::create(b, loc, c, c64(V));
        auto sum = scf::ForOp::create(
            b, loc, first, c64(active), c64(runThreads),
            ValueRange{zeroF32()},
            [&](OpBuilder &, Location, Value t, ValueRange total) {
              Value at = add(mul(add(mul(k, c64(T)), t), c64(V)), e);
              Value part = memref::LoadOp::create(b, loc, slots,
                                                  ValueRange{toIndex(at)});
              scf::YieldOp::create(
                  b, loc,
                  ValueRange{arith::AddFOp::create(b, loc, total[0], part)});
            });
        storePartial(args, at, k, add(firstSlot, c), sum.getResult(0));
        scf::YieldOp::create(b, loc);
      });
}

/// The domain dims a payload may read (the element count of a GroupNorm's
/// mean): the static ones, and the one run-time dim of the R dims (from the
/// samples M / A) and of the D dims (from a channel's elements D); where a
/// run has several run-time dims, their product instead (H x W at run time:
/// the count H * C/G * W is still known).
void SlabKernelBuilder::build(const SlabArgs &args, const SlabPlace &at) {
  SmallVector<Value> rowIn;
  for (auto [ptrArg, v] : llvm::zip(args.rowIn, op.getRow()))
    rowIn.push_back(load(ptrArg, elementTypeOf(v), at.row, 1)[0]);
  SmallVector<Value> rowResults = reduceRowStages(args, at, rowIn);
  // Q > 1: this CTA has read its peers' slots; it leaves only when every
  // peer has read its own (a CTA's shared memory ends with it). The arrive
  // releases: a relaxed one let a CTA leave while a peer's remote load of
  // its slots was still in flight (an unspecified launch failure, one
  // call in a few hundred).
  if (Q > 1)
    NVVM::ClusterArriveOp::create(b, loc, /*aligned=*/b.getUnitAttr());
  elementwisePass(args, at, rowIn, rowResults);
  if (Q > 1)
    NVVM::ClusterWaitOp::create(b, loc, /*aligned=*/b.getUnitAttr());
  gpu::ReturnOp::create(b, loc);
}

int64_t mlir::norm::slabSharedFloats(MixedReductionOp op,
                                     const KernelPlan &plan, int64_t vector) {
  std::optional<SlabDomain> slab = op.getSlabDomain();
  int64_t maxSums = std::max<int64_t>(1, op.getColResults().size());
  for (Region &stage : op.getRowStages())
    maxSums = std::max<int64_t>(
        maxSums, stage.front().getTerminator()->getNumOperands());
  int64_t floats = maxSums * std::max<int64_t>(1, plan.block() / 32);
  if (slab && slabWalkOf(*slab, plan.block() / 32) == SlabWalk::PositionRuns)
    floats = std::max<int64_t>(
        {floats, int64_t(op.getColResults().size()) * plan.block() * vector,
         // reduceAcrossGroups: a slot per thread and sum, then the groups'
         maxSums * (plan.block() + plan.slabGroups)});
  return floats;
}

LogicalResult mlir::norm::buildSlabKernel(OpBuilder &b, MixedReductionOp op,
                                          const KernelPlan &plan,
                                          int64_t vector, int64_t parts,
                                          gpu::GPUFuncOp func) {
  std::optional<SlabDomain> slab = op.getSlabDomain();
  if (!slab)
    return op.emitError("convert-norm-to-gpu: not a slab domain");
  SlabShape shape(plan, *slab, vector, parts, op.getColResults().size());
  FailureOr<SlabEntry> entry =
      SlabPrologueBuilder(b, op, *slab, shape, func).build();
  if (failed(entry))
    return failure();
  SlabKernelBuilder(b, op, *slab, shape, func, *entry)
      .build(entry->args, entry->at);
  return success();
}
