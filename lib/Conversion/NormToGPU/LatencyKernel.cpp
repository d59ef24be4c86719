//===- LatencyKernel.cpp - The one-cluster kernel of small calls ----------===//
//
// Part of norm-opt. A small call (plan latency_rows) runs on one thread-block
// cluster of C CTAs instead of the persistent grid: CTA r owns the r-th
// part of every row, its R groups of G lanes take rows group, group + R,
// ... (U rows per unrolled step, so that a step's loads are in flight
// together), and nothing leaves the cluster but the results.
//
//   constructor           the lane's chunks of the part (column inputs
//                         loaded once); the static arrays of row sums
//   build:
//     (one step: loadRows once, its values held through every pass)
//     per row stage s:
//       rowSumsPass       the rows' sums over the CTA's part (within the
//                         thread, the group) -> parts[row]
//       cluster barrier   every CTA's parts written
//       addClusterParts   totals[row] = the C CTAs' parts in rank order
//                         (reads of distributed shared memory)
//       cluster barrier   the totals seen by the CTA; no peer still reads
//                         the parts (the next stage rewrites them, and a
//                         CTA's shared memory goes when it exits)
//     elementwisePass     the rows again: full results stored, column
//                         contributions summed per thread in row order
//     finishColumns       the groups' sums in group order, then the
//                         initial value and epilogue: the column results
//
// Every sum has a fixed order (rank, group, row), so results are bitwise
// equal from run to run. Rows are read once per pass (the second read of a
// small call comes from L2), or once in all where they fit one step.
// The cluster's SMs issue every instruction of the call, so it pays only
// for few rows (KernelPlanner::withLatencyKernels; perf-notes, "Latency
// kernels").
//
//===----------------------------------------------------------------------===//

#include "MainKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::norm;

LatencyKernelBuilder::LatencyKernelBuilder(OpBuilder &b, MixedReductionOp op,
                                           const KernelPlan &plan,
                                           int64_t vector, gpu::GPUFuncOp func,
                                           MainKernelPrologue prologue)
    : MainKernelBuilder(b, op, plan, vector, func, std::move(prologue)),
      K(plan.chunksPerThread), U(plan.latencyUnroll),
      arrays(declareRowSumArrays()) {
  for (int64_t k = 0; k < K; ++k)
    owned.push_back(chunkAt(c64(k), /*inPart=*/true));
  ownedWidth = K * V;
}

LatencyKernelBuilder::RowSumArrays LatencyKernelBuilder::declareRowSumArrays() {
  for (Region &stage : op.getRowStages()) {
    stageOffsets.push_back(totalSums);
    totalSums += stage.front().getTerminator()->getNumOperands();
  }
  RowSumArrays a;
  a.parts = sharedF32Array("_latency_parts", plan.latencyRows * maxSums);
  a.totals =
      sharedF32Array("_latency_totals", plan.latencyRows * totalsWidth());
  return a;
}

void LatencyKernelBuilder::build() {
  // Where every call's rows fit one unrolled step, each thread's rows are
  // loaded once and held through the passes (no second read, no loop).
  HeldRows held;
  if (oneStep()) {
    held.rows = rowsOfStep(zero64, /*stages=*/0);
    held.vals = loadRows(held.rows);
  }
  const HeldRows *heldRows = oneStep() ? &held : nullptr;
  for (int64_t s = 0, e = op.getRowStages().size(); s < e; ++s) {
    rowSumsPass(s, heldRows);
    clusterBarrier();
    addClusterParts(s, stageOffsets[s]);
    clusterBarrier();
  }
  SmallVector<Value> accs = elementwisePass(heldRows);
  if (numCol > 0)
    finishColumns(accs);
  gpu::ReturnOp::create(b, loc);
}

//===----------------------------------------------------------------------===//
// Passes over the rows
//===----------------------------------------------------------------------===//

Value LatencyKernelBuilder::addInOrder(ArrayRef<Value> vals) {
  Value total;
  for (Value v : vals)
    total = total ? arith::AddFOp::create(b, loc, total, v).getResult() : v;
  return total;
}

Value LatencyKernelBuilder::slotOf(Value array, int64_t width, Value row,
                                   Value j) {
  Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  return LLVM::GEPOp::create(b, loc, ptr3, f32, array,
                             ValueRange{add(mul(row, c64(width)), j)});
}

SmallVector<RowState> LatencyKernelBuilder::rowsOfStep(Value step,
                                                       int64_t stages) {
  SmallVector<RowState> rows;
  for (int64_t u = 0; u < U; ++u) {
    RowState row;
    row.iteration = add(mul(step, c64(U)), c64(u));
    row.row = add(mul(row.iteration, layout.rowPrograms), layout.progRow);
    row.valid = ult(row.row, args.rows);
    row.clamped = minU(row.row, layout.lastRow);
    row.inputs = loadRowInputs(row.clamped);
    rows.push_back(withTotals(std::move(row), stages));
  }
  return rows;
}

RowState LatencyKernelBuilder::withTotals(RowState row, int64_t stages) {
  row.results.clear();
  for (int64_t s = 0; s < stages; ++s) {
    Region &stage = op.getRowStages()[s];
    TypeRange types = stage.front().getTerminator()->getOperandTypes();
    for (auto [j, type] : llvm::enumerate(types)) {
      Value total = LLVM::LoadOp::create(
          b, loc, f32, totalSlot(row.clamped, c64(stageOffsets[s] + j)),
          /*alignment=*/4);
      row.results.push_back(fromF32(total, type));
    }
  }
  return row;
}

SmallVector<SmallVector<ChunkValues>>
LatencyKernelBuilder::loadRows(ArrayRef<RowState> rows) {
  SmallVector<SmallVector<ChunkValues>> vals;
  for (const RowState &row : rows) {
    SmallVector<ChunkValues> chunks;
    for (const Chunk &chunk : owned)
      chunks.push_back(loadFull(row, chunk));
    vals.push_back(std::move(chunks));
  }
  return vals;
}

/// Every thread runs the same steps (ceil(ceil(rows / R) / U)), so the
/// barriers of a group's cross-warp sums stay uniform; rows past the last
/// load it and count nothing. `held`: the one step's rows, loaded before
/// the first pass (their totals read again for this one).
SmallVector<Value> LatencyKernelBuilder::passOverRows(int64_t stages,
                                                      ValueRange init,
                                                      StepBody body,
                                                      const HeldRows *held) {
  if (held) {
    SmallVector<RowState> rows;
    for (const RowState &row : held->rows)
      rows.push_back(withTotals(row, stages));
    return body(rows, held->vals, init);
  }
  Value steps = arith::CeilDivUIOp::create(b, loc, layout.iters, c64(U));
  auto loop = scf::ForOp::create(
      b, loc, zero64, steps, one64, init,
      [&](OpBuilder &, Location, Value step, ValueRange carried) {
        SmallVector<RowState> rows = rowsOfStep(step, stages);
        SmallVector<SmallVector<ChunkValues>> vals = loadRows(rows);
        scf::YieldOp::create(b, loc, body(rows, vals, carried));
      });
  return SmallVector<Value>(loop.getResults());
}

void LatencyKernelBuilder::rowSumsPass(int64_t s, const HeldRows *held) {
  Region &stage = op.getRowStages()[s];
  unsigned count = stage.front().getTerminator()->getNumOperands();
  Value isFirstLane = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            layout.lane, c64(0));
  passOverRows(
      s, ValueRange{},
      [&](ArrayRef<RowState> rows, ArrayRef<SmallVector<ChunkValues>> vals,
          ValueRange) {
        for (auto [u, row] : llvm::enumerate(rows)) {
          SmallVector<Value> sums(count, zeroF32());
          for (auto [k, chunk] : llvm::enumerate(owned))
            accumulateStage(stage, row, chunk, vals[u][k], sums);
          reduceWithinProgram(sums);
          Value writer = arith::AndIOp::create(b, loc, isFirstLane, row.valid);
          ifThen(writer, [&] {
            for (auto [j, sum] : llvm::enumerate(sums))
              LLVM::StoreOp::create(b, loc, sum, partSlot(row.row, c64(j)),
                                    /*alignment=*/4);
          });
        }
        return SmallVector<Value>();
      },
      held);
}

void LatencyKernelBuilder::addClusterParts(int64_t s, int64_t offset) {
  Region &stage = op.getRowStages()[s];
  int64_t count = stage.front().getTerminator()->getNumOperands();
  Type ptr7 = LLVM::LLVMPointerType::get(b.getContext(), 7);
  scf::ForOp::create(
      b, loc, tid, mul(args.rows, c64(count)), c64(plan.block()), ValueRange{},
      [&](OpBuilder &, Location, Value idx, ValueRange) {
        Value row = arith::DivUIOp::create(b, loc, idx, c64(count));
        Value j = arith::RemUIOp::create(b, loc, idx, c64(count));
        Value local = partSlot(row, j);
        // Every rank's load first, then the sum in rank order.
        SmallVector<Value> parts;
        for (int64_t r = 0; r < plan.clusterCtas; ++r) {
          Value peer =
              arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(r));
          Value remote = NVVM::MapaOp::create(b, loc, ptr7, local, peer);
          parts.push_back(
              LLVM::LoadOp::create(b, loc, f32, remote, /*alignment=*/4));
        }
        LLVM::StoreOp::create(b, loc, addInOrder(parts),
                              totalSlot(row, add(j, c64(offset))),
                              /*alignment=*/4);
        scf::YieldOp::create(b, loc);
      });
}

SmallVector<Value> LatencyKernelBuilder::elementwisePass(const HeldRows *held) {
  SmallVector<Value> init(numCol * ownedWidth, zeroF32());
  return passOverRows(
      op.getRowStages().size(), init,
      [&](ArrayRef<RowState> rows, ArrayRef<SmallVector<ChunkValues>> vals,
          ValueRange carried) {
        SmallVector<Value> accs(carried.begin(), carried.end());
        for (auto [u, row] : llvm::enumerate(rows))
          for (auto [k, chunk] : llvm::enumerate(owned)) {
            ChunkResults results = computeElementwise(row, chunk, vals[u][k]);
            Value live = isLive(row, chunk);
            ifThen(live, [&] { storeFullResults(row, chunk, results.outs); });
            for (unsigned c = 0; c < numCol; ++c)
              for (int64_t e = 0; e < chunk.width; ++e) {
                Value &acc = accs[c * ownedWidth + k * V + e];
                acc = arith::AddFOp::create(
                    b, loc, acc, select(live, results.contribs[c][e]));
              }
          }
        return accs;
      },
      held);
}

//===----------------------------------------------------------------------===//
// Column results
//===----------------------------------------------------------------------===//

/// Shared slots [group][column result][part column]; a part is
/// ceil(chunks / C) x V columns wide (the last CTA's may be narrower).
void LatencyKernelBuilder::finishColumns(ValueRange accs) {
  const int64_t partWidth =
      llvm::divideCeil(llvm::divideCeil(*plan.staticCols, V),
                       plan.clusterCtas) *
      V;
  Value partFirst = mul(layout.partBegin, c64(V));
  Value partEnd = minU(mul(layout.partEnd, c64(V)), args.cols);
  auto slotIndex = [&](Value group, unsigned c, Value offset) {
    return add(mul(add(mul(group, c64(numCol)), c64(c)), c64(partWidth)),
               offset);
  };
  for (auto [k, chunk] : llvm::enumerate(owned))
    ifThen(chunk.valid, [&] {
      Value offset = arith::SubIOp::create(b, loc, chunk.column, partFirst);
      for (unsigned c = 0; c < numCol; ++c) {
        SmallVector<Value> vals;
        for (int64_t e = 0; e < chunk.width; ++e)
          vals.push_back(accs[c * ownedWidth + k * V + e]);
        storeShared(slotIndex(layout.group, c, offset), vals);
      }
    });
  gpu::BarrierOp::create(b, loc);
  for (unsigned c = 0; c < numCol; ++c)
    scf::ForOp::create(b, loc, tid, c64(partWidth), c64(plan.block()),
                       ValueRange{},
                       [&](OpBuilder &, Location, Value j, ValueRange) {
                         Value col = add(partFirst, j);
                         ifThen(ult(col, partEnd), [&] {
                           SmallVector<Value> parts;
                           for (int64_t g = 0; g < R; ++g)
                             parts.push_back(memref::LoadOp::create(
                                 b, loc, shared.accumulators,
                                 ValueRange{toIndex(slotIndex(c64(g), c, j))}));
                           storeColumnResult(op, c, col, addInOrder(parts),
                                             args.finalInits, args.finalOuts);
                         });
                         scf::YieldOp::create(b, loc);
                       });
}
