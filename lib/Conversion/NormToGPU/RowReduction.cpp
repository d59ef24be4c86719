//===- RowReduction.cpp - The row stages' reductions ----------------------===//
//
// Part of norm-opt. A row stage's sums (e.g. sum(dy * w), sum(dy * w * x̂))
// over the row, in a fixed order:
//
//   accumulateStage    reduce within the thread: the lane's chunks
//   reduceWithinWarp   shuffle-xor butterfly (every lane gets the sum)
//   reduceAcrossWarps  G > 32: per-warp slots in shared memory, read back
//                      in warp order by every lane of the program
//
//===----------------------------------------------------------------------===//

#include "MainKernel.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::norm;

void MainKernelBuilder::accumulateStage(Region &stage, const RowState &row,
                                        const Chunk &chunk,
                                        ArrayRef<SmallVector<Value>> vals,
                                        SmallVector<Value> &sums) {
  for (int64_t e = 0; e < V; ++e) {
    SmallVector<Value> contrib =
        inlineRegion(stage, regionArgs(row, vals, chunk, e));
    for (auto [sum, c] : llvm::zip(sums, contrib))
      sum = arith::AddFOp::create(b, loc, sum, select(chunk.valid, toF32(c)));
  }
}

void MainKernelBuilder::finishStage(Region &stage, SmallVector<Value> sums,
                                    RowState &row) {
  TypeRange yieldTypes = stage.front().getTerminator()->getOperandTypes();
  reduceWithinWarp(sums);
  if (G > 32)
    reduceAcrossWarps(sums);
  for (auto [total, type] : llvm::zip(sums, yieldTypes))
    row.results.push_back(fromF32(total, type));
}

void MainKernelBuilder::reduceWithinWarp(SmallVector<Value> &sums) {
  // a + b and b + a round alike, so every lane ends with the same sum.
  for (int64_t off = std::min<int64_t>(G, 32) / 2; off >= 1; off /= 2)
    for (Value &s : sums) {
      auto shuffled =
          gpu::ShuffleOp::create(b, loc, s, off, 32, gpu::ShuffleMode::XOR);
      s = arith::AddFOp::create(b, loc, s, shuffled.getShuffleResult());
    }
}

void MainKernelBuilder::reduceAcrossWarps(SmallVector<Value> &sums) {
  int64_t warps = G / 32;
  Value laneInWarp = arith::RemUIOp::create(b, loc, lane, c64(32));
  Value warp = arith::DivUIOp::create(b, loc, lane, c64(32));
  Value base = mul(group, c64(maxSums * warps));
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        laneInWarp, c64(0));
  ifThen(isFirst, [&] {
    for (auto [j, s] : llvm::enumerate(sums))
      memref::StoreOp::create(
          b, loc, s, smem,
          ValueRange{toIndex(add(base, add(c64(j * warps), warp)))});
  });
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> totals;
  for (unsigned j = 0; j < sums.size(); ++j) {
    Value total;
    for (int64_t w = 0; w < warps; ++w) {
      Value idx = toIndex(add(base, c64(j * warps + w)));
      Value part = memref::LoadOp::create(b, loc, smem, ValueRange{idx});
      total = total ? arith::AddFOp::create(b, loc, total, part).getResult()
                    : part;
    }
    totals.push_back(total);
  }
  gpu::BarrierOp::create(b, loc); // smem is reused by the next reduction
  sums = totals;
}
