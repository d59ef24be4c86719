//===- PartialAccumulate.cpp - norm.mixed_reduction to a persistent loop --===//
//
// Part of norm-opt.
//
// Rewrites each norm.mixed_reduction into a target-independent persistent
// loop on tensors:
//
//   scf.forall (%p) in (%P)            // P programs
//     scf.for %r = lo(p) to hi(p)      // a contiguous block of rows
//       scf.for %n ...                 // each row stage: row sums in f32
//       scf.for %n ...                 // elementwise results, and the column
//                                      // contributions added into fp32
//                                      // loop-carried accumulators [N]
//     in_parallel: the block of full results, and the accumulators as row p
//                  of the fp32 partial buffer [P, N]
//   scf.for %n { scf.for %q = 0 to P } // fixed-order final reduction + init
//
// A channels-first domain (N not the last dim, `n_dim`) is transposed to
// [rows..., N] first and its full results back: this is the portable
// reference path; the GPU kernels read such a domain in place.
//
// A multi-axis domain (`row_sum_dims`, `col_dims`: GroupNorm, adaLN) is
// taken the same way, with "N" the dims the row sums run over: the full
// inputs transposed to [row dims..., summed dims...] and collapsed to
// [M, L]. Its column accumulators are indexed by the point's `col_dims`
// (linearised: [|C|] per program, partials [P, |C|]), so a program whose
// rows cross a sample or a group adds each row's contributions into that
// sample's or channel's slots.
//
// Rows are split into P contiguous blocks (ceil(M / P) rows each) rather
// than strided by P: each program then owns one contiguous slice of every
// full result, which tensor semantics can express with one
// tensor.parallel_insert_slice, and its rows are adjacent in memory.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormOps.h"
#include "norm/Transforms/Passes.h"
#include "norm/Utils/PayloadUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::norm {
#define GEN_PASS_DEF_NORMPARTIALACCUMULATE
#include "norm/Transforms/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

/// `v` expanded to `type` by `groups`, with the sizes of `like`. Where a
/// group has two dynamic sizes, tensor.reshape instead: LLVM 22's
/// expand-strided-metadata crashes on such a memref.expand_shape
/// (llvm-project#186830; adaLN's [B, N] column results with both dynamic).
static Value expandLike(OpBuilder &b, Location loc, Value v,
                        RankedTensorType type,
                        ArrayRef<ReassociationIndices> groups, Value like) {
  bool manyDynamic = llvm::any_of(groups, [&](const ReassociationIndices &g) {
    return llvm::count_if(g, [&](int64_t d) { return type.isDynamicDim(d); }) >
           1;
  });
  if (!manyDynamic)
    return tensor::ExpandShapeOp::create(b, loc, type, v, groups,
                                         tensor::getMixedSizes(b, loc, like));
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    sizes.push_back(tensor::DimOp::create(b, loc, like, d).getResult());
  Value shape = tensor::FromElementsOp::create(b, loc, sizes);
  return tensor::ReshapeOp::create(b, loc, type, v, shape);
}

namespace {

/// Builds the loop nest for one op. Full inputs/results are handled as 2-D
/// [M, L] (the row dims collapsed, then the summed dims: N in 2-D), row
/// inputs as [M], col inputs and accumulators as [|C|] (C: the col dims; N
/// in 2-D).
class LoopBuilder {
public:
  LoopBuilder(RewriterBase &b, MixedReductionOp op, Value programs)
      : b(b), op(op), loc(op.getLoc()), programs(programs),
        f32(b.getF32Type()) {}

  /// The steps: the destinations, the programs' forall (each: its rows'
  /// stages, then one pass over n for the full results and the column
  /// partials), the full results back to the domain's shape, the final
  /// reductions.
  SmallVector<Value> build();

private:
  /// `v` with dims [0, split) collapsed into one and [split, rank) into
  /// another (split = rank: all into one); `v` where that changes nothing.
  Value collapseAt(Value v, int64_t split) {
    int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
    SmallVector<ReassociationIndices> groups = splitGroups(rank, split);
    if (int64_t(groups.size()) == rank)
      return v;
    return tensor::CollapseShapeOp::create(b, loc, v, groups);
  }
  static SmallVector<ReassociationIndices> splitGroups(int64_t rank,
                                                       int64_t split) {
    SmallVector<ReassociationIndices> groups(1);
    for (int64_t d = 0; d < rank; ++d) {
      if (d == split)
        groups.emplace_back();
      groups.back().push_back(d);
    }
    return groups;
  }

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value zeroF32() {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  }
  Value toF32(OpBuilder &nb, Value v) { return norm::toF32(nb, loc, v); }
  Value fromF32(OpBuilder &nb, Value v, Type to) {
    return norm::fromF32(nb, loc, v, to);
  }

  /// Block arguments shared by every region at (row, col): the elements of
  /// the full, row and col inputs.
  SmallVector<Value> inputElements(OpBuilder &nb, Value row, Value col) {
    SmallVector<Value> args;
    for (Value v : full2d)
      args.push_back(tensor::ExtractOp::create(nb, loc, v, {row, col}));
    for (Value v : row1d)
      args.push_back(tensor::ExtractOp::create(nb, loc, v, row));
    Value slot = colSlot(nb, row, col);
    for (Value v : col1d)
      args.push_back(tensor::ExtractOp::create(nb, loc, v, slot));
    return args;
  }

  /// The accumulator slot of point (row, col) of [M, L]: col in 2-D; the
  /// point's col dims, linearised, in a multi-axis domain.
  Value colSlot(OpBuilder &nb, Value row, Value col);

  /// The number of points of the domain's `dims` (static where they are).
  OpFoldResult sizeOf(ArrayRef<int64_t> dims) {
    Value domain = op.getFull().front();
    OpFoldResult size = b.getIndexAttr(1);
    for (int64_t d : dims) {
      OpFoldResult extent = tensor::getMixedSize(b, loc, domain, d);
      std::optional<int64_t> a = getConstantIntValue(size),
                             c = getConstantIntValue(extent);
      size = a && c ? OpFoldResult(b.getIndexAttr(*a * *c))
                    : OpFoldResult(arith::MulIOp::create(
                          b, loc, getValueOrCreateConstantIndexOp(b, loc, size),
                          getValueOrCreateConstantIndexOp(b, loc, extent))
                                       .getResult());
    }
    return size;
  }

  RewriterBase &b;
  MixedReductionOp op;
  Location loc;
  Value programs;
  Type f32;
  SmallVector<Value> destinations();
  scf::ForallOp buildPrograms(ArrayRef<Value> outs);
  SmallVector<Value> rowStages(OpBuilder &rb, Value row);
  ValueRange columnPass(OpBuilder &rb, Value row, Value lo,
                        ArrayRef<Value> rowResults, ValueRange state);
  Value toDomainShape(Value v, RankedTensorType type);
  Value finalReduction(Value partials, Value init);

  /// `v` with its dims in `order` (linalg.transpose), or `v` if in order.
  Value transpose(Value v, ArrayRef<int64_t> order) {
    if (llvm::equal(order, llvm::seq<int64_t>(0, order.size())))
      return v;
    SmallVector<OpFoldResult> sizes;
    for (int64_t d : order)
      sizes.push_back(tensor::getMixedSize(b, loc, v, d));
    Value init = tensor::EmptyOp::create(b, loc, sizes, getElementTypeOrSelf(v));
    return linalg::TransposeOp::create(b, loc, v, init, order).getResult()[0];
  }

  SmallVector<int64_t> rowMajorOrder; // the row dims, then the summed dims
  unsigned numRowDims = 0;
  SmallVector<Value> rowMajor;        // the full inputs in that order
  SmallVector<Value> full2d, row1d, col1d;
  OpFoldResult rowsOfr, colsOfr, slotsOfr;
  SmallVector<Value> domainExtents; // multi-axis: each domain dim's extent
  Value numRows, numCols, numSlots;
  unsigned numFull = 0, numCol = 0;
};

SmallVector<Value> LoopBuilder::build() {
  unsigned rank = op.getDomainShape().size();
  rowMajorOrder = op.getRowDimList();
  numRowDims = rowMajorOrder.size();
  llvm::append_range(rowMajorOrder, op.getRowSumDimList());
  for (Value v : op.getFull())
    rowMajor.push_back(transpose(v, rowMajorOrder));
  for (Value v : rowMajor)
    full2d.push_back(collapseAt(v, numRowDims));
  for (Value v : op.getRow())
    row1d.push_back(collapseAt(v, numRowDims));
  for (Value v : op.getCol())
    col1d.push_back(collapseAt(v, op.getColDimList().size()));
  // Sizes stay static where the types are, so the slices keep static shapes.
  rowsOfr = tensor::getMixedSize(b, loc, full2d.front(), 0);
  colsOfr = tensor::getMixedSize(b, loc, full2d.front(), 1);
  numRows = getValueOrCreateConstantIndexOp(b, loc, rowsOfr);
  numCols = getValueOrCreateConstantIndexOp(b, loc, colsOfr);
  if (op.isMultiAxis()) // the extents the column slots are computed from
    for (int64_t d = 0; d < rank; ++d)
      domainExtents.push_back(getValueOrCreateConstantIndexOp(
          b, loc, tensor::getMixedSize(b, loc, op.getFull().front(), d)));
  slotsOfr = op.isMultiAxis() ? sizeOf(op.getColDimList()) : colsOfr;
  numSlots = op.isMultiAxis()
                 ? getValueOrCreateConstantIndexOp(b, loc, slotsOfr)
                 : numCols;
  numFull = op.getFullResults().size();
  numCol = op.getColResults().size();

  scf::ForallOp forall = buildPrograms(destinations());
  SmallVector<Value> results;
  SmallVector<int64_t> back(rank);
  for (unsigned d = 0; d < rank; ++d)
    back[rowMajorOrder[d]] = d;
  for (auto [i, r] : llvm::enumerate(op.getFullResults())) {
    auto type = cast<RankedTensorType>(r.getType());
    auto rowMajorType = RankedTensorType::get(
        cast<RankedTensorType>(rowMajor.front().getType()).getShape(),
        type.getElementType());
    results.push_back(
        transpose(toDomainShape(forall.getResult(i), rowMajorType), back));
  }
  // Column results: over [|C|], from the init collapsed to it, expanded
  // back to the col dims (multi-axis; 2-D ones are [N] already).
  for (auto [i, init] : llvm::enumerate(op.getColInit())) {
    auto type = cast<RankedTensorType>(init.getType());
    Value sums = finalReduction(forall.getResult(numFull + i),
                                collapseAt(init, type.getRank()));
    if (sums.getType() != type)
      sums = expandLike(b, loc, sums, type,
                        splitGroups(type.getRank(), type.getRank()), init);
    results.push_back(sums);
  }
  return results;
}

Value LoopBuilder::colSlot(OpBuilder &nb, Value row, Value col) {
  if (!op.isMultiAxis())
    return col;
  // The point's index along each domain dim: the row's over the row dims
  // (row-major), col's over the summed dims; then the col dims' indices,
  // linearised row-major.
  SmallVector<Value> at(domainExtents.size());
  auto delinearize = [&](Value linear, ArrayRef<int64_t> dims) {
    for (int64_t d : llvm::reverse(dims)) {
      at[d] = arith::RemUIOp::create(nb, loc, linear, domainExtents[d]);
      linear = arith::DivUIOp::create(nb, loc, linear, domainExtents[d]);
    }
  };
  ArrayRef<int64_t> order(rowMajorOrder);
  delinearize(row, order.take_front(numRowDims));
  delinearize(col, order.drop_front(numRowDims));
  Value slot = arith::ConstantIndexOp::create(nb, loc, 0);
  for (int64_t d : op.getColDimList())
    slot = arith::AddIOp::create(
        nb, loc, arith::MulIOp::create(nb, loc, slot, domainExtents[d]),
        at[d]);
  return slot;
}

SmallVector<Value> LoopBuilder::destinations() {
  // Full results as [M, N], one fp32 partial buffer [P, N] per column
  // result (the workspace lives in the IR).
  SmallVector<Value> outs;
  for (Value r : op.getFullResults()) {
    Type elem = cast<RankedTensorType>(r.getType()).getElementType();
    outs.push_back(tensor::EmptyOp::create(
        b, loc, ArrayRef<OpFoldResult>{rowsOfr, colsOfr}, elem));
  }
  for (unsigned i = 0; i < numCol; ++i)
    outs.push_back(tensor::EmptyOp::create(
        b, loc, ArrayRef<OpFoldResult>{getAsOpFoldResult(programs), slotsOfr},
        f32));
  return outs;
}

scf::ForallOp LoopBuilder::buildPrograms(ArrayRef<Value> outs) {
  OpFoldResult zeroAttr = b.getIndexAttr(0), oneAttr = b.getIndexAttr(1);
  // Rows per program: ceil(M / P).
  Value block = arith::CeilDivUIOp::create(b, loc, numRows, programs);
  auto forall = scf::ForallOp::create(
      b, loc, ArrayRef<OpFoldResult>{programs}, outs, std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(forall.getBody());
  Value p = forall.getInductionVar(0);
  ValueRange shared = forall.getRegionIterArgs();
  Value lo = arith::MinUIOp::create(
      b, loc, arith::MulIOp::create(b, loc, p, block), numRows);
  Value hi = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, lo, block), numRows);
  Value count = arith::SubIOp::create(b, loc, hi, lo);

  // This program's slice of every full result, and zeroed accumulators.
  SmallVector<Value> carried;
  for (unsigned i = 0; i < numFull; ++i)
    carried.push_back(tensor::ExtractSliceOp::create(
        b, loc, shared[i], ArrayRef<OpFoldResult>{lo, zeroAttr},
        ArrayRef<OpFoldResult>{count, colsOfr},
        ArrayRef<OpFoldResult>{oneAttr, oneAttr}));
  for (unsigned i = 0; i < numCol; ++i) {
    Value empty =
        tensor::EmptyOp::create(b, loc, ArrayRef<OpFoldResult>{slotsOfr}, f32);
    carried.push_back(
        linalg::FillOp::create(b, loc, zeroF32(), empty).result());
  }
  auto rowLoop = scf::ForOp::create(
      b, loc, lo, hi, index(1), carried,
      [&](OpBuilder &rb, Location, Value row, ValueRange state) {
        SmallVector<Value> rowResults = rowStages(rb, row);
        scf::YieldOp::create(
            rb, loc, columnPass(rb, row, lo, rowResults, state));
      });

  // Publish: the block of full results, the accumulators as row p.
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  for (unsigned i = 0; i < numFull; ++i)
    tensor::ParallelInsertSliceOp::create(
        b, loc, rowLoop.getResult(i), shared[i],
        ArrayRef<OpFoldResult>{lo, zeroAttr},
        ArrayRef<OpFoldResult>{count, colsOfr},
        ArrayRef<OpFoldResult>{oneAttr, oneAttr});
  for (unsigned i = 0; i < numCol; ++i)
    tensor::ParallelInsertSliceOp::create(
        b, loc, rowLoop.getResult(numFull + i), shared[numFull + i],
        ArrayRef<OpFoldResult>{p, zeroAttr},
        ArrayRef<OpFoldResult>{oneAttr, slotsOfr},
        ArrayRef<OpFoldResult>{oneAttr, oneAttr});
  return forall;
}

SmallVector<Value> LoopBuilder::rowStages(OpBuilder &rb, Value row) {
  // Sums over n in f32, each stage seeing the earlier ones' results.
  Value zero = zeroF32();
  SmallVector<Value> rowResults;
  for (Region &stage : op.getRowStages()) {
    auto yield = cast<YieldOp>(stage.front().getTerminator());
    SmallVector<Value> init(yield.getValues().size(), zero);
    auto sums = scf::ForOp::create(
        rb, loc, index(0), numCols, index(1), init,
        [&](OpBuilder &cb, Location, Value col, ValueRange acc) {
          SmallVector<Value> args = inputElements(cb, row, col);
          llvm::append_range(args, rowResults);
          SmallVector<Value> contrib = inlineRegion(cb, stage, args);
          SmallVector<Value> next;
          for (auto [a, c] : llvm::zip(acc, contrib))
            next.push_back(arith::AddFOp::create(cb, loc, a, toF32(cb, c)));
          scf::YieldOp::create(cb, loc, next);
        });
    for (auto [sum, type] :
         llvm::zip(sums.getResults(), yield.getValues().getTypes()))
      rowResults.push_back(fromF32(rb, sum, type));
  }
  return rowResults;
}

ValueRange LoopBuilder::columnPass(OpBuilder &rb, Value row, Value lo,
                                   ArrayRef<Value> rowResults,
                                   ValueRange state) {
  // Elementwise results and column contributions, one pass over n.
  Value local = arith::SubIOp::create(rb, loc, row, lo);
  auto cols = scf::ForOp::create(
      rb, loc, index(0), numCols, index(1), state,
      [&](OpBuilder &cb, Location, Value col, ValueRange tiles) {
        SmallVector<Value> args = inputElements(cb, row, col);
        llvm::append_range(args, rowResults);
        SmallVector<Value> next;
        SmallVector<Value> elems = inlineRegion(cb, op.getElementwise(), args);
        for (auto [tile, e] : llvm::zip(tiles.take_front(numFull), elems))
          next.push_back(tensor::InsertOp::create(cb, loc, e, tile,
                                                  ValueRange{local, col}));
        SmallVector<Value> contrib = inlineRegion(cb, op.getColumns(), args);
        Value slot = colSlot(cb, row, col);
        for (auto [acc, c] : llvm::zip(tiles.drop_front(numFull), contrib)) {
          Value old = tensor::ExtractOp::create(cb, loc, acc, slot);
          Value sum = arith::AddFOp::create(cb, loc, old, toF32(cb, c));
          next.push_back(
              tensor::InsertOp::create(cb, loc, sum, acc, ValueRange{slot}));
        }
        scf::YieldOp::create(cb, loc, next);
      });
  return cols.getResults();
}

Value LoopBuilder::toDomainShape(Value v, RankedTensorType type) {
  // [M, L] back to [row dims..., summed dims...].
  SmallVector<ReassociationIndices> groups =
      splitGroups(type.getRank(), numRowDims);
  if (int64_t(groups.size()) != type.getRank())
    return expandLike(b, loc, v, type, groups, rowMajor.front());
  if (v.getType() != type)
    return tensor::CastOp::create(b, loc, type, v);
  return v;
}

Value LoopBuilder::finalReduction(Value partials, Value init) {
  // Over the P partial rows, in order q = 0, 1, ..., P-1, then added to the
  // initial value: deterministic for a given P.
  Type elem = cast<RankedTensorType>(init.getType()).getElementType();
  Value zero = zeroF32();
  auto finalLoop = scf::ForOp::create(
      b, loc, index(0), numSlots, index(1), ValueRange{init},
      [&](OpBuilder &nb, Location, Value col, ValueRange out) {
        auto sum = scf::ForOp::create(
            nb, loc, index(0), programs, index(1), ValueRange{zero},
            [&](OpBuilder &qb, Location, Value q, ValueRange acc) {
              Value part = tensor::ExtractOp::create(qb, loc, partials,
                                                     ValueRange{q, col});
              scf::YieldOp::create(
                  qb, loc,
                  ValueRange{arith::AddFOp::create(qb, loc, acc[0], part)});
            });
        Value start = tensor::ExtractOp::create(nb, loc, out[0], col);
        Value total =
            arith::AddFOp::create(nb, loc, toF32(nb, start), sum.getResult(0));
        Value stored = tensor::InsertOp::create(
            nb, loc, fromF32(nb, total, elem), out[0], ValueRange{col});
        scf::YieldOp::create(nb, loc, stored);
      });
  return finalLoop.getResult(0);
}

/// The results of an op over a statically empty domain (no rows, or N = 0):
/// empty full results, and the column results are their initial values.
SmallVector<Value> emptyDomainResults(RewriterBase &b, MixedReductionOp op) {
  SmallVector<Value> results;
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(b, op.getLoc(), op.getFull().front());
  for (Value r : op.getFullResults())
    results.push_back(tensor::EmptyOp::create(
        b, op.getLoc(), sizes, getElementTypeOrSelf(r.getType())));
  llvm::append_range(results, op.getColInit());
  return results;
}

/// Most programs: the partial buffer is [P, N] fp32 per column result.
constexpr int64_t kMaxPrograms = 65536;

struct NormPartialAccumulatePass
    : norm::impl::NormPartialAccumulateBase<NormPartialAccumulatePass> {
  using Base::Base;
  void runOnOperation() override {
    if (programs < 1 || programs > kMaxPrograms) {
      getOperation()->emitError()
          << "norm-partial-accumulate: 'programs' must be in [1, "
          << kMaxPrograms << "], got " << int64_t(programs);
      return signalPassFailure();
    }
    SmallVector<MixedReductionOp> ops;
    getOperation()->walk([&](MixedReductionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (MixedReductionOp op : ops) {
      rewriter.setInsertionPoint(op);
      if (llvm::is_contained(op.getDomainShape(), 0)) {
        rewriter.replaceOp(op, emptyDomainResults(rewriter, op));
        continue;
      }
      Value p = arith::ConstantIndexOp::create(rewriter, op.getLoc(), programs);
      rewriter.replaceOp(op, LoopBuilder(rewriter, op, p).build());
    }
  }
};

} // namespace
