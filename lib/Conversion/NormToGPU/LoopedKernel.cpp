//===- LoopedKernel.cpp - The looped main kernel (long rows) --------------===//
//
// Part of norm-opt. Rows too long for registers: each row stage loops over
// the row (`unroll` chunks per iteration, their loads issued before the
// first use, so the row streams), then the elementwise pass loops over the
// program's part of the row. `colGroups` programs (CTAs) share a row, each
// owning a part of the columns for the elementwise pass and the column
// sums; the column accumulators live in shared memory when the part fits
// (plan.sharedAccumulators), else in the program's partial row.
//
//   build:
//     prologue (unpack, captures, shared memory, program ids)
//     computeColumnParts     progRow, rowPrograms, [partBegin, partEnd)
//     zeroAccumulators
//     row loop (RowState):
//       reduceRowStages      per stage: looped within thread, warp, warps
//       finishRow            elementwise results, column contributions
//     copySharedAccumulators shared memory -> the partial row
//     single-launch tail (plan.singleLaunch)
//
//===----------------------------------------------------------------------===//

#include "MainKernel.h"

using namespace mlir;
using namespace mlir::norm;

LogicalResult LoopedKernelBuilder::build(gpu::GPUFuncOp func) {
  unpackArguments(func);
  // A compile-time constant: at run time it costs ~35 registers (and a CTA
  // per SM).
  colGroups = c64(plan.minColumnGroups);
  if (failed(cloneCaptures()))
    return failure();
  layoutSharedMemory(func);
  computeProgramIds();
  computeColumnParts();
  computeRowBounds();
  // The shared-memory accumulators hold the program's part of the row.
  partCols = mul(partChunks, c64(V));
  partFirstCol = mul(partBegin, c64(V));
  // Chunks per lane at run time (over the whole row for the row sums, over
  // the part for the rest).
  loopedChunks = arith::CeilDivUIOp::create(b, loc, chunks, c64(G));
  partLoopedChunks = arith::CeilDivUIOp::create(b, loc, partChunks, c64(G));
  unroll = plan.loopUnroll(op, V);
  zeroAccumulators();

  scf::ForOp::create(
      b, loc, zero64, iters, one64, ValueRange{},
      [&](OpBuilder &, Location, Value it, ValueRange) {
        RowState row;
        row.iteration = it;
        row.row = add(mul(it, rowPrograms), progRow);
        row.valid = ult(row.row, rows);
        row.clamped = minU(row.row, lastRow);
        row.inputs = loadRowInputs(row.clamped);
        reduceRowStages(row);
        finishRow(row);
        scf::YieldOp::create(b, loc);
      });

  if (plan.sharedAccumulators)
    copySharedAccumulators();
  if (plan.singleLaunch)
    emitSingleLaunchTail(func, rowPrograms);
  gpu::ReturnOp::create(b, loc);
  return success();
}

void LoopedKernelBuilder::computeColumnParts() {
  progRow = arith::DivUIOp::create(b, loc, prog, colGroups);
  rowPrograms = arith::DivUIOp::create(b, loc, programs, colGroups);
  partChunks = arith::CeilDivUIOp::create(b, loc, chunks, colGroups);
  partBegin = mul(arith::RemUIOp::create(b, loc, prog, colGroups), partChunks);
  partEnd = minU(add(partBegin, partChunks), chunks);
}

/// The program's part of its accumulators starts at zero.
void LoopedKernelBuilder::zeroAccumulators() {
  scf::ForOp::create(
      b, loc, zero64, partLoopedChunks, one64, ValueRange{},
      [&](OpBuilder &, Location, Value k, ValueRange) {
        Value c = add(add(mul(k, c64(G)), lane), partBegin);
        ifThen(ult(c, partEnd), [&] {
          SmallVector<Value> zeros(V, zeroF32());
          for (unsigned ci = 0; ci < numCol; ++ci) {
            if (plan.sharedAccumulators)
              storeShared(sharedIndex(ci, mul(c, c64(V))), zeros);
            else
              store(partial, f32, partialIndex(ci, mul(c, c64(V))), zeros);
          }
        });
        scf::YieldOp::create(b, loc);
      });
}

void LoopedKernelBuilder::reduceRowStages(RowState &row) {
  for (Region &stage : op.getRowStages()) {
    SmallVector<Value> sums(stage.front().getTerminator()->getNumOperands(),
                            zeroF32());
    auto loop = scf::ForOp::create(
        b, loc, zero64, loopedChunks, c64(unroll), sums,
        [&](OpBuilder &, Location, Value k, ValueRange carried) {
          SmallVector<Chunk> group;
          SmallVector<ChunkValues> vals;
          for (int64_t u = 0; u < unroll; ++u) {
            group.push_back(chunkAt(add(k, c64(u))));
            vals.push_back(loadFull(row, group.back()));
          }
          SmallVector<Value> next(carried);
          for (int64_t u = 0; u < unroll; ++u)
            accumulateStage(stage, row, group[u], vals[u], next);
          scf::YieldOp::create(b, loc, next);
        });
    finishStage(stage, SmallVector<Value>(loop.getResults()), row);
  }
}

/// The elementwise pass over the program's part: results stored, column
/// contributions added to the accumulators in memory.
void LoopedKernelBuilder::finishRow(const RowState &row) {
  scf::ForOp::create(
      b, loc, zero64, partLoopedChunks, c64(unroll), ValueRange{},
      [&](OpBuilder &, Location, Value k, ValueRange) {
        SmallVector<Chunk> group;
        SmallVector<ChunkValues> vals;
        for (int64_t u = 0; u < unroll; ++u) {
          group.push_back(chunkAt(add(k, c64(u)), /*inPart=*/true));
          vals.push_back(loadFull(row, group.back()));
        }
        for (int64_t u = 0; u < unroll; ++u) {
          ChunkResults results = computeElementwise(row, group[u], vals[u]);
          Value live = isLive(row, group[u]);
          ifThen(live, [&] {
            storeFullResults(row, group[u], results.outs);
            accumulateColumns(group[u], results.contribs);
          });
        }
        scf::YieldOp::create(b, loc);
      });
}

void LoopedKernelBuilder::accumulateColumns(
    const Chunk &chunk, ArrayRef<SmallVector<Value>> contribs) {
  for (unsigned c = 0; c < numCol; ++c) {
    bool shared = plan.sharedAccumulators;
    Value index = shared ? sharedIndex(c, chunk.column)
                         : partialIndex(c, chunk.column);
    SmallVector<Value> sums =
        shared ? loadShared(index, V) : load(partial, f32, index, V);
    for (int64_t e = 0; e < V; ++e)
      sums[e] = arith::AddFOp::create(b, loc, sums[e], contribs[c][e]);
    if (shared)
      storeShared(index, sums);
    else
      store(partial, f32, index, sums);
  }
}

/// Each lane copies the columns it owns (no barrier: nobody else wrote
/// them) to the program's partial row.
void LoopedKernelBuilder::copySharedAccumulators() {
  scf::ForOp::create(
      b, loc, zero64, partLoopedChunks, one64, ValueRange{},
      [&](OpBuilder &, Location, Value k, ValueRange) {
        Value c = add(add(mul(k, c64(G)), lane), partBegin);
        ifThen(ult(c, partEnd), [&] {
          for (unsigned ci = 0; ci < numCol; ++ci) {
            Value column = mul(c, c64(V));
            store(partial, f32, partialIndex(ci, column),
                  loadShared(sharedIndex(ci, column), V));
          }
        });
        scf::YieldOp::create(b, loc);
      });
}
