//===- StridedKernel.cpp - The main kernel of a channels-first domain -----===//
//
// Part of norm-opt. A domain whose N is not the last dim (`n_dim`: x
// [B, C, S] normalised over C) has rows that are not contiguous: element
// (row, n) of a contiguous tensor is at
//
//   (row / I) * N * I + row % I + n * I     (I: the dims after N)
//
// so consecutive rows are consecutive in memory and a row's columns are I
// apart. The kernel is shaped for that layout (docs/gpu.md, "Channels-first
// rows"):
//
//   tile t = 32 x V consecutive rows; lane l of every warp takes the V rows
//     from (32t + l) x V, with V-wide loads (V = 1: the scalar kernel; the
//     vector kernel needs I a multiple of V, so V rows share one outer
//     index, and V-element aligned pointers, as the launcher checks)
//   a CTA holds R groups of W warps; each group takes its own tiles (the
//     same trip count everywhere) and syncs on its own named barrier; its
//     W warps split N: warp w takes columns w, w + W, ...
//   held columns (plan.chunksPerThread = K > 0): the warp's K columns are
//     loaded once per tile and kept for every pass; else each pass loops
//     over them, unroll() columns per iteration, loads issued together, and
//     the second pass re-reads the tile (from L2)
//   row stages: a lane's f32 sums over its warp's columns -> shared slots
//     [group][stage sum][warp][lane][V] -> every warp adds its group's W
//     slots in warp order
//   elementwise: results stored at (row, n), 32 x V contiguous elements per
//     warp; column contributions summed over the lane's V rows, then over
//     the warp's lanes by a reduce-scatter (up to 32 sums per round, one
//     per lane), then added by their lanes into the group's accumulators
//     [group][C][N] in dynamic shared memory (each column owned by one
//     warp: no races)
//   the groups' accumulators added in group order -> the CTA's partial row
//     of [C, P, N]; the single-launch tail or the final kernel adds the P
//     rows in a fixed order (deterministic).
//
// Every load is a warp-wide coalesced access along the contiguous dim.
//
//===----------------------------------------------------------------------===//

#include "MainKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::norm;

namespace {
/// Elements per input a lane loads per loop iteration (the columns of an
/// iteration x V rows), at least one column (perf-notes, "Channels-first
/// rows": 16 against 8 or 24).
constexpr int64_t kStridedLoadsInFlight = 16;
} // namespace

int64_t StridedKernelBuilder::unroll() const {
  // Held columns: all of a warp's at once.
  if (plan.chunksPerThread > 0)
    return plan.chunksPerThread;
  return std::max<int64_t>(1, kStridedLoadsInFlight / V);
}

void StridedKernelBuilder::groupBarrier() {
  KernelBuilderBase::groupBarrier(strided.group, R, G);
}

StridedKernelBuilder::StridedKernelBuilder(OpBuilder &b, MixedReductionOp op,
                                           const KernelPlan &plan,
                                           int64_t vector, gpu::GPUFuncOp func,
                                           MainKernelPrologue prologue)
    : MainKernelBuilder(b, op, plan, vector, func, std::move(prologue)),
      W(G / 32), strided(computeStridedLayout()) {}

StridedKernelBuilder::StridedLayout
StridedKernelBuilder::computeStridedLayout() {
  StridedLayout layout;
  layout.laneInWarp = arith::RemUIOp::create(b, loc, tid, c64(32));
  layout.group = arith::DivUIOp::create(b, loc, tid, c64(G));
  layout.warp = arith::RemUIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, tid, c64(32)), c64(W));
  layout.inner = args.strideIn.front();
  layout.rowStride = mul(args.cols, layout.inner);
  return layout;
}

void StridedKernelBuilder::build() {
  if (numCol > 0)
    sweepAccumulators(R, [&](Value idx) {
      memref::StoreOp::create(b, loc, zeroF32(), shared.accumulators,
                              toIndex(idx));
    });
  gpu::BarrierOp::create(b, loc);
  // Tile it * (P x R) + program of every group, it < ceil(tiles / (P x R)).
  Value tiles = arith::CeilDivUIOp::create(b, loc, args.rows, c64(32 * V));
  Value programs = mul(gridDim(), c64(R)); // groups of the grid
  Value program = add(mul(blockId(), c64(R)), strided.group);
  Value iters = arith::CeilDivUIOp::create(b, loc, tiles, programs);
  auto tileLoop = scf::ForOp::create(b, loc, zero64, iters, one64);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(tileLoop.getBody());
    processTile(add(mul(tileLoop.getInductionVar(), programs), program));
  }
  gpu::BarrierOp::create(b, loc);
  if (numCol > 0)
    writePartialRow();
  signalDependents();
  if (plan.singleLaunch && numCol > 0)
    emitSingleLaunchTail(gridDim());
  gpu::ReturnOp::create(b, loc);
}

void StridedKernelBuilder::sweepAccumulators(int64_t groups,
                                             function_ref<void(Value)> body) {
  int64_t count = groups * numCol * *plan.staticCols;
  auto loop = scf::ForOp::create(b, loc, tid, c64(count), c64(G * R));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  body(loop.getInductionVar());
}

void StridedKernelBuilder::processTile(Value index) {
  // The lane's V rows: all valid or none (rows is a multiple of V where
  // V > 1, I being one).
  Value first = mul(add(mul(index, c64(32)), strided.laneInWarp), c64(V));
  TileRows tile;
  tile.valid = ult(first, args.rows);
  Value clamped = minU(first, arith::SubIOp::create(b, loc, args.rows, c64(V)));
  // Element offset of (row, column 0).
  Value outer = arith::DivUIOp::create(b, loc, clamped, strided.inner);
  Value within = arith::RemUIOp::create(b, loc, clamped, strided.inner);
  tile.base = add(mul(outer, strided.rowStride), within);
  SmallVector<RowState> lanes(V);
  for (int64_t v = 0; v < V; ++v)
    lanes[v].inputs = loadRowInputs(add(clamped, c64(v)));
  // Held columns (plan.chunksPerThread): the warp's K columns loaded once,
  // for every stage and the second pass.
  std::optional<Columns> held;
  if (plan.chunksPerThread > 0)
    held = loadColumns(tile, strided.warp);
  for (Region &stage : op.getRowStages())
    reduceStage(stage, tile, lanes, held ? &*held : nullptr);
  columnPass(tile, lanes, held ? &*held : nullptr);
}

StridedKernelBuilder::Columns
StridedKernelBuilder::loadColumns(const TileRows &tile, Value first) {
  Columns c;
  c.first = first;
  for (int64_t u = 0; u < unroll(); ++u) {
    Value n = add(first, c64(u * W));
    c.valid.push_back(ult(n, args.cols));
    Value column = minU(n, c64(*plan.staticCols - 1));
    c.column.push_back(column);
    Value at = add(tile.base, mul(column, strided.inner));
    SmallVector<SmallVector<Value>> full;
    SmallVector<Value> colVals;
    for (auto [i, in] : llvm::enumerate(args.fullIn))
      full.push_back(load(in, elementTypeOf(op.getFull()[i]), at, V));
    for (auto [j, in] : llvm::enumerate(args.colIn))
      colVals.push_back(load(in, elementTypeOf(op.getCol()[j]), column, 1)[0]);
    c.full.push_back(full);
    c.col.push_back(colVals);
  }
  return c;
}

SmallVector<Value> StridedKernelBuilder::argsAt(const RowState &row,
                                                const Columns &c, int64_t u,
                                                int64_t v) {
  SmallVector<Value> args;
  for (const SmallVector<Value> &in : c.full[u])
    args.push_back(in[v]);
  llvm::append_range(args, row.inputs);
  llvm::append_range(args, c.col[u]);
  llvm::append_range(args, row.results);
  return args;
}

scf::ForOp StridedKernelBuilder::columnLoop(ValueRange init) {
  return scf::ForOp::create(b, loc, strided.warp, args.cols, c64(W * unroll()),
                            init);
}

SmallVector<Value> StridedKernelBuilder::stageSums(Region &stage,
                                                   const TileRows &tile,
                                                   ArrayRef<RowState> lanes,
                                                   const Columns *held) {
  int64_t numSums = stage.front().getTerminator()->getNumOperands();
  auto addColumns = [&](const Columns &c, SmallVector<Value> sums) {
    for (int64_t u = 0; u < unroll(); ++u)
      for (int64_t v = 0; v < V; ++v) {
        SmallVector<Value> contrib =
            inlineRegion(stage, argsAt(lanes[v], c, u, v));
        for (auto [j, x] : llvm::enumerate(contrib)) {
          Value &sum = sums[v * numSums + j];
          sum = arith::AddFOp::create(b, loc, sum, select(c.valid[u], toF32(x)));
        }
      }
    return sums;
  };
  SmallVector<Value> init(numSums * V, zeroF32());
  if (held)
    return addColumns(*held, init);
  scf::ForOp loop = columnLoop(init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Columns c = loadColumns(tile, loop.getInductionVar());
  scf::YieldOp::create(
      b, loc, addColumns(c, SmallVector<Value>(loop.getRegionIterArgs())));
  return SmallVector<Value>(loop.getResults());
}

void StridedKernelBuilder::reduceStage(Region &stage, const TileRows &tile,
                                       MutableArrayRef<RowState> lanes,
                                       const Columns *held) {
  auto yieldTypes = stage.front().getTerminator()->getOperandTypes();
  int64_t numSums = yieldTypes.size();
  SmallVector<Value> sums = stageSums(stage, tile, lanes, held);
  if (W == 1) { // one warp per tile: a lane's sums are its rows'
    for (int64_t v = 0; v < V; ++v)
      for (auto [j, type] : llvm::enumerate(yieldTypes))
        lanes[v].results.push_back(fromF32(sums[v * numSums + j], type));
    return;
  }
  // The warps' sums of each row, added in warp order by every warp.
  auto slot = [&](int64_t j, Value w, int64_t v) {
    Value groupBase = mul(strided.group, c64(maxSums * W));
    Value lane = add(mul(add(groupBase, add(c64(j * W), w)), c64(32)),
                     strided.laneInWarp);
    return toIndex(add(mul(lane, c64(V)), c64(v)));
  };
  for (int64_t v = 0; v < V; ++v)
    for (int64_t j = 0; j < numSums; ++j)
      memref::StoreOp::create(b, loc, sums[v * numSums + j], shared.warpSlots,
                              slot(j, strided.warp, v));
  groupBarrier();
  for (int64_t v = 0; v < V; ++v)
    for (auto [j, type] : llvm::enumerate(yieldTypes)) {
      Value total;
      for (int64_t w = 0; w < W; ++w) {
        Value part = memref::LoadOp::create(b, loc, shared.warpSlots,
                                            slot(j, c64(w), v));
        total = total ? arith::AddFOp::create(b, loc, total, part).getResult()
                      : part;
      }
      lanes[v].results.push_back(fromF32(total, type));
    }
  groupBarrier(); // the slots are reused by the next stage
}

void StridedKernelBuilder::columnPass(const TileRows &tile,
                                      ArrayRef<RowState> lanes,
                                      const Columns *held) {
  if (held)
    return finishColumns(tile, lanes, *held);
  scf::ForOp loop = columnLoop({});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  finishColumns(tile, lanes, loadColumns(tile, loop.getInductionVar()));
}

void StridedKernelBuilder::finishColumns(const TileRows &tile,
                                         ArrayRef<RowState> lanes,
                                         const Columns &c) {
  // contribs[u x numCol + k]: the lane's column sum k of column u.
  SmallVector<Value> contribs;
  for (int64_t u = 0; u < unroll(); ++u) {
    SmallVector<SmallVector<Value>> outs(args.fullOut.size());
    SmallVector<Value> sums(numCol);
    for (int64_t v = 0; v < V; ++v) {
      SmallVector<Value> args = argsAt(lanes[v], c, u, v);
      for (auto [i, x] : llvm::enumerate(inlineRegion(op.getElementwise(), args)))
        outs[i].push_back(x);
      // The lane's V rows in order.
      for (auto [k, x] : llvm::enumerate(inlineRegion(op.getColumns(), args)))
        sums[k] = sums[k] ? arith::AddFOp::create(b, loc, sums[k], toF32(x))
                                .getResult()
                          : toF32(x);
    }
    Value live = arith::AndIOp::create(b, loc, tile.valid, c.valid[u]);
    for (Value x : sums)
      contribs.push_back(select(live, x));
    Value at = add(tile.base, mul(c.column[u], strided.inner));
    ifThen(live, [&] {
      for (auto [i, out] : llvm::enumerate(args.fullOut))
        store(out, elementTypeOf(op.getFullResults()[i]), at, outs[i]);
    });
  }
  addColumnSums(contribs, c.first);
}

void StridedKernelBuilder::addColumnSums(ArrayRef<Value> contribs,
                                         Value first) {
  // 32 values at a time: a reduce-scatter over the warp's lanes leaves
  // each value's warp total with its own lanes, so the lanes add to the
  // group's accumulators side by side (each column owned by one warp).
  for (size_t base = 0; base < contribs.size(); base += 32) {
    SmallVector<Value> values(
        contribs.slice(base, std::min<size_t>(32, contribs.size() - base)));
    auto [total, index, owner] = reduceScatterWithinWarp(values);
    Value idx = add(index, c64(base));
    Value u = arith::DivUIOp::create(b, loc, idx, c64(numCol));
    Value k = arith::RemUIOp::create(b, loc, idx, c64(numCol));
    Value column = add(first, mul(u, c64(W)));
    Value owns = arith::AndIOp::create(
        b, loc, owner,
        arith::AndIOp::create(b, loc, ult(idx, c64(contribs.size())),
                              ult(column, args.cols)));
    ifThen(owns, [&] {
      Value at = toIndex(add(
          mul(add(mul(strided.group, c64(numCol)), k), c64(*plan.staticCols)),
          column));
      Value old = memref::LoadOp::create(b, loc, shared.accumulators, at);
      memref::StoreOp::create(b, loc, arith::AddFOp::create(b, loc, old, total),
                              shared.accumulators, at);
    });
  }
}

std::tuple<Value, Value, Value>
StridedKernelBuilder::reduceScatterWithinWarp(SmallVector<Value> values) {
  // Pad to a power of two; each level halves the values a lane keeps: the
  // lane whose bit `mask` is set keeps the upper half and sends the lower,
  // its partner the reverse, and each adds what it receives (one lane
  // order per value: deterministic).
  int64_t count = llvm::PowerOf2Ceil(values.size());
  values.resize(count, zeroF32());
  Value index = zero64;
  int64_t mask = 16;
  for (; count > 1; count /= 2, mask /= 2) {
    int64_t half = count / 2;
    Value upper = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(b, loc, strided.laneInWarp, c64(mask)), zero64);
    for (int64_t i = 0; i < half; ++i) {
      Value keep =
          arith::SelectOp::create(b, loc, upper, values[i + half], values[i]);
      Value send =
          arith::SelectOp::create(b, loc, upper, values[i], values[i + half]);
      auto got =
          gpu::ShuffleOp::create(b, loc, send, mask, 32, gpu::ShuffleMode::XOR);
      values[i] = arith::AddFOp::create(b, loc, keep, got.getShuffleResult());
    }
    values.resize(half);
    index =
        add(index, arith::SelectOp::create(b, loc, upper, c64(half), zero64));
  }
  // The lanes that share the upper bits hold the same partial: a butterfly
  // over the rest (a + b and b + a round alike), lane bits below zero own.
  Value total = values.front();
  for (int64_t rest = mask; rest >= 1; rest /= 2) {
    auto got =
        gpu::ShuffleOp::create(b, loc, total, rest, 32, gpu::ShuffleMode::XOR);
    total = arith::AddFOp::create(b, loc, total, got.getShuffleResult());
  }
  Value owner = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::AndIOp::create(b, loc, strided.laneInWarp,
                            c64(mask > 0 ? 2 * mask - 1 : 0)),
      zero64);
  return {total, index, owner};
}

void StridedKernelBuilder::writePartialRow() {
  int64_t n = *plan.staticCols, groupSize = numCol * n;
  sweepAccumulators(1, [&](Value idx) {
    Value c = arith::DivUIOp::create(b, loc, idx, c64(n));
    Value column = arith::RemUIOp::create(b, loc, idx, c64(n));
    Value at = add(mul(add(mul(c, gridDim()), blockId()), c64(n)), column);
    Value v;
    for (int64_t g = 0; g < R; ++g) {
      Value part = memref::LoadOp::create(
          b, loc, shared.accumulators, toIndex(add(idx, c64(g * groupSize))));
      v = v ? arith::AddFOp::create(b, loc, v, part).getResult() : part;
    }
    store(args.partial, f32, at, {v});
  });
}
