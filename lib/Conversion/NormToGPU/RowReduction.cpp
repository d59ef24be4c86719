//===- RowReduction.cpp - The row stages' reductions ----------------------===//
//
// Part of norm-opt. A row stage's sums (e.g. sum(dy * w), sum(dy * w * x̂))
// over the row, in a fixed order:
//
//   accumulateStage    reduce within the thread: the lane's chunks
//   reduceWithinWarp   shuffle-xor butterfly (every lane gets the sum)
//   reduceAcrossWarps  G > 32: per-warp slots in shared memory, read back
//                      in warp order by every lane of the program
//   reduceAcrossCluster  a row shared by the CTAs of a cluster: per-CTA
//                      slots, read back in rank order through distributed
//                      shared memory by every thread of the cluster
//
//===----------------------------------------------------------------------===//

#include "MainKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::norm;

void MainKernelBuilder::accumulateStage(Region &stage, const RowState &row,
                                        const Chunk &chunk,
                                        ArrayRef<SmallVector<Value>> vals,
                                        SmallVector<Value> &sums) {
  for (int64_t e = 0; e < chunk.width; ++e) {
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
  if (plan.clusterCTAs > 1)
    reduceAcrossCluster(sums, row.iteration,
                        stage.getRegionNumber() -
                            op.getRowStages().front().getRegionNumber());
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
  // The program's own warps only: its slots are its own.
  groupBarrier(group, R, G);
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
  groupBarrier(group, R, G); // the slots are reused by the next reduction
  sums = totals;
}

/// Slots [set][sum] of f32 per CTA, two sets per row stage: a set written
/// at row `it` is written again at row it + 2, after the cluster barrier
/// of row it + 1, which no CTA reaches before it has read the set (so one
/// barrier per exchange).
void MainKernelBuilder::declareClusterSlots(gpu::GPUFuncOp func) {
  clusterSlots = sharedF32Array(func, "_cluster_sums",
                                2 * op.getRowStages().size() * maxSums);
}

Value MainKernelBuilder::sharedF32Array(gpu::GPUFuncOp func,
                                        StringRef suffix, int64_t count) {
  auto module = func->getParentOfType<gpu::GPUModuleOp>();
  std::string name = (func.getName() + suffix).str();
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(f32, count),
                           /*isConstant=*/false, LLVM::Linkage::Internal, name,
                           Attribute(), kSharedAlignment, /*addrSpace=*/3);
  }
  Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  return LLVM::AddressOfOp::create(b, loc, ptr3, name);
}

void MainKernelBuilder::clusterBarrier() {
  NVVM::ClusterArriveOp::create(b, loc, /*aligned=*/b.getUnitAttr());
  NVVM::ClusterWaitOp::create(b, loc, /*aligned=*/b.getUnitAttr());
}

void MainKernelBuilder::reduceAcrossCluster(SmallVector<Value> &sums,
                                            Value iteration,
                                            int64_t stageIndex) {
  int64_t stages = op.getRowStages().size();
  Value parity = arith::RemUIOp::create(b, loc, iteration, c64(2));
  Value first = mul(add(mul(parity, c64(stages)), c64(stageIndex)),
                    c64(maxSums));
  Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  Type ptr7 = LLVM::LLVMPointerType::get(b.getContext(), 7);
  auto slot = [&](unsigned j) {
    return LLVM::GEPOp::create(b, loc, ptr3, f32, clusterSlots,
                               ValueRange{add(first, c64(j))})
        .getResult();
  };
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                        c64(0));
  ifThen(isFirst, [&] {
    for (auto [j, s] : llvm::enumerate(sums))
      LLVM::StoreOp::create(b, loc, s, slot(j), /*alignment=*/4);
  });
  clusterBarrier();
  for (auto [j, s] : llvm::enumerate(sums)) {
    Value local = slot(j);
    Value total;
    for (int64_t r = 0; r < plan.clusterCTAs; ++r) {
      Value rank = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(r));
      Value remote = NVVM::MapaOp::create(b, loc, ptr7, local, rank);
      Value part = LLVM::LoadOp::create(b, loc, f32, remote, /*alignment=*/4);
      total = total ? arith::AddFOp::create(b, loc, total, part).getResult()
                    : part;
    }
    s = total;
  }
}
