//===- SlabPrologue.cpp - The slab kernel's entry -------------------------===//
//
// Part of norm-opt. The slab kernel's first step (SlabKernel.h): from the
// kernel's arguments and ids, the slab and part the CTA works on, the
// captured values cloned into the kernel, and the shared memory the row
// stages exchange their sums through. In this order, which the kernel's
// PTX follows:
//   unpackArguments -> SlabArgs
//   the thread's id, lane and warp
//   placeSlab -> SlabPlace
//   dimSizes, cloneCapturedValues: the captured values
//   the workgroup slots; Q > 1: the cluster's sums
//
//===----------------------------------------------------------------------===//

#include "SlabKernel.h"

using namespace mlir;
using namespace mlir::norm;

SlabWalk mlir::norm::slabWalkOf(const SlabDomain &slab, int64_t warps) {
  if (slab.channelsLast)
    return SlabWalk::PositionRuns;
  return slab.cSize >= warps ? SlabWalk::WarpPerChannel
                             : SlabWalk::CtaPerChannel;
}

Value SlabBuilderBase::groupOfThread(Value t) {
  return arith::DivUIOp::create(
      b, loc,
      mul(arith::RemUIOp::create(b, loc, t, c64(runThreads)), c64(V)),
      c64(slab.cSize));
}

SlabArgs SlabPrologueBuilder::unpackArguments() {
  Block &entry = func.getBody().front();
  SlabArgs args;
  for (auto [group, values] :
       groupArguments(mainKernelParams(op), entry.getArguments())) {
    using K = KernelParam;
    switch (group.kind) {
    case K::FullIn: args.fullIn = values; break;
    case K::RowIn: args.rowIn = values; break;
    case K::ColIn: args.colIn = values; break;
    case K::FullOut: args.fullOut = values; break;
    case K::Partial: args.partial = values[0]; break;
    case K::Rows: args.rows = values[0]; break;
    case K::Cols: args.cols = values[0]; break;
    case K::Scalar: args.scalars = values; break;
    default: break; // strides (contiguous slabs), the single launch's
    }
  }
  return args;
}

SlabPlace SlabPrologueBuilder::placeSlab(const SlabArgs &args, Value tid) {
  SlabPlace at;
  Value A = c64(slab.aSize), C = c64(slab.cSize);
  Value id = blockId();
  // The CTA's unit: K slabs (groups a0 .. a0 + K - 1 of sample n).
  Value unit =
      Q > 1 ? arith::DivUIOp::create(b, loc, id, c64(Q)).getResult() : id;
  Value part =
      Q > 1 ? arith::RemUIOp::create(b, loc, id, c64(Q)).getResult() : c64(0);
  Value units = c64(slab.aSize / K);
  at.sample = arith::DivUIOp::create(b, loc, unit, units);
  at.firstGroup =
      mul(arith::RemUIOp::create(b, loc, unit, units).getResult(), c64(K));
  at.group = K > 1 ? add(at.firstGroup, groupOfThread(tid)) : at.firstGroup;
  at.row = add(mul(at.sample, A), at.group);
  at.partialRow = add(mul(at.sample, c64(Q)), part);
  at.spatial = arith::DivUIOp::create(b, loc, args.cols, C);
  // Part q: ceil(D / Q) positions, whole vectors where the walk's accesses
  // run along D (the vector kernel's D is a multiple of V).
  at.dBegin = c64(0);
  at.dEnd = at.spatial;
  if (Q > 1) {
    int64_t grain = walk == SlabWalk::PositionRuns ? 1 : V;
    Value grains = arith::DivUIOp::create(
        b, loc, add(at.spatial, c64(grain - 1)), c64(grain));
    Value per = mul(arith::DivUIOp::create(b, loc, add(grains, c64(Q - 1)),
                                           c64(Q)),
                    c64(grain));
    at.dBegin = minU(mul(part, per), at.spatial);
    at.dEnd = minU(add(at.dBegin, per), at.spatial);
  }
  if (!slab.channelsLast) {
    // [R, A, C, D]: the slab is contiguous.
    at.base = mul(at.row, args.cols);
    at.cStride = at.spatial;
    at.dStride = c64(1);
  } else {
    // [R, D, A, C]: C/G runs of one spatial point, A x C apart.
    at.base = add(mul(at.sample, mul(args.cols, A)), mul(at.group, C));
    at.cStride = c64(1);
    at.dStride = c64(slab.aSize * slab.cSize);
  }
  return at;
}

DenseMap<int64_t, Value> SlabPrologueBuilder::dimSizes(
    const SlabArgs &args, const SlabPlace &at,
    SmallVector<std::pair<SmallVector<int64_t>, Value>> &products) {
  ArrayRef<int64_t> domain = op.getDomainShape();
  auto runOf = [&](int64_t first, int64_t count, Value total) {
    DenseMap<int64_t, Value> sizes;
    SmallVector<int64_t> dynamic;
    int64_t known = 1;
    for (int64_t d = first; d < first + count; ++d) {
      if (!ShapedType::isDynamic(domain[d])) {
        sizes[d] = c64(domain[d]);
        known *= domain[d];
      } else {
        dynamic.push_back(d);
      }
    }
    Value rest = dynamic.empty()
                     ? Value()
                     : arith::DivUIOp::create(b, loc, total, c64(known));
    if (dynamic.size() == 1)
      sizes[dynamic.front()] = rest;
    else if (dynamic.size() > 1) // only their product is known
      products.emplace_back(dynamic, rest);
    return sizes;
  };
  Value samples = arith::DivUIOp::create(b, loc, args.rows, c64(slab.aSize));
  int64_t dFirst = slab.channelsLast ? slab.rRank
                                     : slab.rRank + slab.aRank + slab.cRank;
  DenseMap<int64_t, Value> sizes = runOf(0, slab.rRank, samples);
  for (auto [d, v] : runOf(dFirst, slab.dRank, at.spatial))
    sizes[d] = v;
  return sizes;
}

FailureOr<SlabEntry> SlabPrologueBuilder::build() {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  SlabEntry e;
  e.args = unpackArguments();
  e.tid = threadId();
  e.lane = arith::RemUIOp::create(b, loc, e.tid, c64(32));
  e.warp = arith::DivUIOp::create(b, loc, e.tid, c64(32));
  e.at = placeSlab(e.args, e.tid);
  CaptureSources sources;
  sources.domainRank = op.getDomainShape().size();
  for (auto [extract, pointer] : llvm::zip(getCapturedScalars(op),
                                           e.args.scalars))
    sources.scalarPointers[extract.getResult()] = pointer;
  sources.dimSizes = dimSizes(e.args, e.at, sources.dimProducts);
  for (Value full : op.getFull())
    if (auto expand = full.getDefiningOp<tensor::ExpandShapeOp>())
      sources.expandedSources[expand.getSrc()] =
          expand.getReassociationIndices();
  // Any other dim is refused by cloneCapturedValues (a located error).
  if (failed(cloneCapturedValues(op, sources)))
    return failure();
  e.captured = above;
  e.slots = func.getWorkgroupAttributions().front();
  if (Q > 1) {
    for (Region &stage : op.getRowStages())
      e.maxStageSums = std::max<int64_t>(
          e.maxStageSums, stage.front().getTerminator()->getNumOperands());
    e.clusterSums = staticSharedF32Array(
        func, "_cluster_sums", op.getRowStages().size() * K * e.maxStageSums);
  }
  return e;
}
