//===- SlabKernel.cpp - The slab kernel of a GroupNorm-like op -----------===//
//
// Part of norm-opt. A multi-axis op whose domain is a slab domain
// (norm::slabDomainOf: GroupNorm's [N, G, C/G, HW] or channels last
// [N, HW, G, C/G]; docs/gpu.md, "GroupNorm slabs") runs one CTA per slab
// (n, g), a row of the op: C/G x HW elements, in one of two layouts.
//
//   r = blockIdx.x; n = r / A; a = r % A      (A = G, C = C/G static)
//   base = n x rStride + a x aStride          (element (c, d) at
//                                              base + c x cStride +
//                                              d x dStride)
//   per row stage: for c in [0, C): for d = tid; d < D; d += T: the
//     stage's contributions -> per-thread sums -> block reduction (warp
//     butterfly, then the warps' slots in warp order): every thread
//     holds the row results
//   the elementwise pass: for c in [0, C): for d = tid; d < D; d += T:
//     the full results stored, the column contributions summed per
//     thread; a block reduction per channel c; thread 0 writes the
//     partial rows' slot [k][n][a x C + c]
//
// The final kernel (ColumnReduction.cpp) then reduces the P = N partial
// rows of A x C columns in a fixed order: every result is bitwise equal
// between runs.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "norm/Dialect/Norm/IR/GroupBoundary.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::norm;

namespace {

/// The kernel's arguments (mainKernelParams' list: rows = the slabs M,
/// cols = a slab's elements L).
struct SlabArgs {
  SmallVector<Value> fullIn, rowIn, colIn, fullOut, scalars;
  Value partial, rows, cols;
};

/// Where the CTA's slab lies.
struct SlabPlace {
  Value row;        // r: the slab, and the row inputs' index
  Value sample;     // n: the partial row it writes
  Value group;      // a: its column slots start at a x C
  Value base;       // the slab's first element
  Value spatial;    // D = L / C: elements per channel
  Value cStride, dStride;
};

class SlabKernelBuilder : public KernelBuilderBase {
public:
  SlabKernelBuilder(OpBuilder &b, MixedReductionOp op, const KernelPlan &plan,
                    const SlabDomain &slab, gpu::GPUFuncOp func)
      : KernelBuilderBase(b, op.getLoc()), op(op), slab(slab), func(func),
        T(plan.block()), numCol(op.getColResults().size()) {}

  LogicalResult build();

private:
  SlabArgs unpackArguments();
  SlabPlace placeSlab(const SlabArgs &args);
  SmallVector<Value> loadColumnInputs(const SlabArgs &args,
                                      const SlabPlace &at, Value c);
  SmallVector<Value> loadFull(const SlabArgs &args, Value index);
  /// The loop over the slab: for each channel c, `perChannel(c)` (values
  /// loop-invariant in d), then `perElement` at each of the thread's
  /// elements, threading `carried` through both loops; `endChannel`
  /// after each channel's elements (may replace the carried values).
  using ElementFn = function_ref<SmallVector<Value>(
      Value index, ArrayRef<Value> colVals, ValueRange carried)>;
  using ChannelEndFn =
      function_ref<SmallVector<Value>(Value c, ValueRange carried)>;
  SmallVector<Value> loopOverSlab(const SlabArgs &args, const SlabPlace &at,
                                  ValueRange init, ElementFn perElement,
                                  ChannelEndFn endChannel);
  /// The row stages: every thread ends with the row results.
  SmallVector<Value> reduceRowStages(const SlabArgs &args,
                                     const SlabPlace &at,
                                     ArrayRef<Value> rowIn);
  /// The elementwise pass: full results stored, column sums per channel
  /// into the partial rows.
  void elementwisePass(const SlabArgs &args, const SlabPlace &at,
                       ArrayRef<Value> rowIn, ArrayRef<Value> rowResults);
  /// Sums across the CTA (warp butterfly, then the warps' slots in warp
  /// order): every thread gets the same totals.
  SmallVector<Value> reduceAcrossCta(ArrayRef<Value> sums);
  DenseMap<int64_t, Value> dimSizes(const SlabArgs &args,
                                    const SlabPlace &at);
  SmallVector<Value> regionArgs(ArrayRef<Value> full, ArrayRef<Value> rowIn,
                                ArrayRef<Value> colVals,
                                ArrayRef<Value> rowResults);

  MixedReductionOp op;
  SlabDomain slab;
  gpu::GPUFuncOp func;
  const int64_t T;
  const unsigned numCol;
  Value tid, slots;
};

} // namespace

SlabArgs SlabKernelBuilder::unpackArguments() {
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

SlabPlace SlabKernelBuilder::placeSlab(const SlabArgs &args) {
  SlabPlace at;
  Value A = c64(slab.aSize), C = c64(slab.cSize);
  at.row = blockId();
  at.sample = arith::DivUIOp::create(b, loc, at.row, A);
  at.group = arith::RemUIOp::create(b, loc, at.row, A);
  at.spatial = arith::DivUIOp::create(b, loc, args.cols, C);
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

SmallVector<Value> SlabKernelBuilder::loadColumnInputs(const SlabArgs &args,
                                                       const SlabPlace &at,
                                                       Value c) {
  Value slot = add(mul(at.group, c64(slab.cSize)), c);
  SmallVector<Value> vals;
  for (auto [ptrArg, v] : llvm::zip(args.colIn, op.getCol()))
    vals.push_back(load(ptrArg, elementTypeOf(v), slot, 1)[0]);
  return vals;
}

SmallVector<Value> SlabKernelBuilder::loadFull(const SlabArgs &args,
                                               Value index) {
  SmallVector<Value> vals;
  for (auto [ptrArg, v] : llvm::zip(args.fullIn, op.getFull()))
    vals.push_back(load(ptrArg, elementTypeOf(v), index, 1)[0]);
  return vals;
}

SmallVector<Value> SlabKernelBuilder::regionArgs(ArrayRef<Value> full,
                                                 ArrayRef<Value> rowIn,
                                                 ArrayRef<Value> colVals,
                                                 ArrayRef<Value> rowResults) {
  SmallVector<Value> a(full);
  llvm::append_range(a, rowIn);
  llvm::append_range(a, colVals);
  llvm::append_range(a, rowResults);
  return a;
}

SmallVector<Value>
SlabKernelBuilder::loopOverSlab(const SlabArgs &args, const SlabPlace &at,
                                ValueRange init, ElementFn perElement,
                                ChannelEndFn endChannel) {
  auto channels = scf::ForOp::create(
      b, loc, c64(0), c64(slab.cSize), c64(1), init,
      [&](OpBuilder &, Location, Value c, ValueRange carried) {
        SmallVector<Value> colVals = loadColumnInputs(args, at, c);
        Value channelBase = add(at.base, mul(c, at.cStride));
        auto elements = scf::ForOp::create(
            b, loc, tid, at.spatial, c64(T), carried,
            [&](OpBuilder &, Location, Value d, ValueRange inner) {
              Value index = add(channelBase, mul(d, at.dStride));
              scf::YieldOp::create(b, loc, perElement(index, colVals, inner));
            });
        scf::YieldOp::create(b, loc,
                             endChannel(c, elements.getResults()));
      });
  return channels.getResults();
}

SmallVector<Value> SlabKernelBuilder::reduceAcrossCta(ArrayRef<Value> sums) {
  SmallVector<Value> totals(sums);
  for (int64_t off = 16; off >= 1; off /= 2)
    for (Value &s : totals) {
      auto shuffled =
          gpu::ShuffleOp::create(b, loc, s, off, 32, gpu::ShuffleMode::XOR);
      s = arith::AddFOp::create(b, loc, s, shuffled.getShuffleResult());
    }
  int64_t warps = T / 32;
  if (warps == 1)
    return totals;
  Value lane = arith::RemUIOp::create(b, loc, tid, c64(32));
  Value warp = arith::DivUIOp::create(b, loc, tid, c64(32));
  ifThen(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, c64(0)),
         [&] {
           for (auto [j, s] : llvm::enumerate(totals))
             memref::StoreOp::create(
                 b, loc, s, slots,
                 ValueRange{toIndex(add(c64(j * warps), warp))});
         });
  gpu::BarrierOp::create(b, loc);
  for (auto [j, s] : llvm::enumerate(totals)) {
    Value total;
    for (int64_t w = 0; w < warps; ++w) {
      Value part = memref::LoadOp::create(
          b, loc, slots, ValueRange{toIndex(c64(j * warps + w))});
      total = total ? arith::AddFOp::create(b, loc, total, part).getResult()
                    : part;
    }
    s = total;
  }
  gpu::BarrierOp::create(b, loc); // the slots are reused
  return totals;
}

SmallVector<Value> SlabKernelBuilder::reduceRowStages(const SlabArgs &args,
                                                      const SlabPlace &at,
                                                      ArrayRef<Value> rowIn) {
  SmallVector<Value> rowResults;
  for (Region &stage : op.getRowStages()) {
    TypeRange yields = stage.front().getTerminator()->getOperandTypes();
    SmallVector<Value> zeros(yields.size(), zeroF32());
    SmallVector<Value> sums = loopOverSlab(
        args, at, zeros,
        [&](Value index, ArrayRef<Value> colVals, ValueRange carried) {
          SmallVector<Value> contrib = inlineRegion(
              stage, regionArgs(loadFull(args, index), rowIn, colVals,
                                rowResults));
          SmallVector<Value> next;
          for (auto [s, v] : llvm::zip(carried, contrib))
            next.push_back(arith::AddFOp::create(b, loc, s, toF32(v)));
          return next;
        },
        [&](Value, ValueRange carried) {
          return SmallVector<Value>(carried);
        });
    for (auto [total, type] : llvm::zip(reduceAcrossCta(sums), yields))
      rowResults.push_back(fromF32(total, type));
  }
  return rowResults;
}

void SlabKernelBuilder::elementwisePass(const SlabArgs &args,
                                        const SlabPlace &at,
                                        ArrayRef<Value> rowIn,
                                        ArrayRef<Value> rowResults) {
  SmallVector<Value> zeros(numCol, zeroF32());
  Value P = arith::DivUIOp::create(b, loc, args.rows, c64(slab.aSize));
  Value S = c64(slab.aSize * slab.cSize);
  loopOverSlab(
      args, at, zeros,
      [&](Value index, ArrayRef<Value> colVals, ValueRange carried) {
        SmallVector<Value> a =
            regionArgs(loadFull(args, index), rowIn, colVals, rowResults);
        for (auto [i, v] : llvm::enumerate(inlineRegion(op.getElementwise(), a)))
          store(args.fullOut[i], elementTypeOf(op.getFullResults()[i]), index,
                {v});
        SmallVector<Value> next;
        for (auto [s, v] : llvm::zip(carried, inlineRegion(op.getColumns(), a)))
          next.push_back(arith::AddFOp::create(b, loc, s, toF32(v)));
        return next;
      },
      [&](Value c, ValueRange carried) {
        if (numCol == 0)
          return SmallVector<Value>();
        SmallVector<Value> totals =
            reduceAcrossCta(SmallVector<Value>(carried));
        Value slot = add(mul(at.group, c64(slab.cSize)), c);
        ifThen(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                     c64(0)),
               [&] {
                 for (auto [k, v] : llvm::enumerate(totals)) {
                   // [k][n][a x C + c] of [numCol, P = N, A x C].
                   Value index =
                       add(mul(add(mul(c64(k), P), at.sample), S), slot);
                   store(args.partial, f32, index, {v});
                 }
               });
        return SmallVector<Value>(zeros);
      });
}

/// The domain dims a payload may read (the element count of a GroupNorm's
/// mean): the static ones, and the one run-time dim of the R dims (from the
/// samples M / A) and of the D dims (from a channel's elements D).
DenseMap<int64_t, Value> SlabKernelBuilder::dimSizes(const SlabArgs &args,
                                                     const SlabPlace &at) {
  ArrayRef<int64_t> domain = op.getDomainShape();
  auto runOf = [&](int64_t first, int64_t count, Value total) {
    DenseMap<int64_t, Value> sizes;
    int64_t dynamic = -1, known = 1;
    for (int64_t d = first; d < first + count; ++d) {
      if (!ShapedType::isDynamic(domain[d])) {
        sizes[d] = c64(domain[d]);
        known *= domain[d];
      } else if (dynamic >= 0) {
        return sizes; // two run-time dims: neither is known
      } else {
        dynamic = d;
      }
    }
    if (dynamic >= 0)
      sizes[dynamic] = arith::DivUIOp::create(b, loc, total, c64(known));
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

LogicalResult SlabKernelBuilder::build() {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  SlabArgs args = unpackArguments();
  SlabPlace at = placeSlab(args);
  CaptureSources sources;
  sources.domainRank = op.getDomainShape().size();
  for (auto [extract, pointer] : llvm::zip(getCapturedScalars(op),
                                           args.scalars))
    sources.scalarPointers[extract.getResult()] = pointer;
  sources.dimSizes = dimSizes(args, at);
  // Any other dim is refused by cloneCapturedValues (a located error).
  if (failed(cloneCapturedValues(op, sources)))
    return failure();
  tid = threadId();
  slots = func.getWorkgroupAttributions().front();
  SmallVector<Value> rowIn;
  for (auto [ptrArg, v] : llvm::zip(args.rowIn, op.getRow()))
    rowIn.push_back(load(ptrArg, elementTypeOf(v), at.row, 1)[0]);
  SmallVector<Value> rowResults = reduceRowStages(args, at, rowIn);
  elementwisePass(args, at, rowIn, rowResults);
  gpu::ReturnOp::create(b, loc);
  return success();
}

LogicalResult mlir::norm::buildSlabKernel(OpBuilder &b, MixedReductionOp op,
                                          const KernelPlan &plan,
                                          gpu::GPUFuncOp func) {
  std::optional<SlabDomain> slab = op.getSlabDomain();
  if (!slab)
    return op.emitError("convert-norm-to-gpu: not a slab domain");
  return SlabKernelBuilder(b, op, plan, *slab, func).build();
}
