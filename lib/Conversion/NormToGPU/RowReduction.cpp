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
  reduceWithinProgram(sums);
  if (plan.clusterCtas > 1)
    reduceAcrossCluster(sums, row.iteration,
                        stage.getRegionNumber() -
                            op.getRowStages().front().getRegionNumber());
  for (auto [total, type] : llvm::zip(sums, yieldTypes))
    row.results.push_back(fromF32(total, type));
}

void MainKernelBuilder::reduceWithinProgram(SmallVector<Value> &sums) {
  reduceWithinWarp(sums);
  if (G > 32)
    reduceAcrossWarps(sums);
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
  Value laneInWarp = arith::RemUIOp::create(b, loc, layout.lane, c64(32));
  Value warp = arith::DivUIOp::create(b, loc, layout.lane, c64(32));
  Value base = mul(layout.group, c64(maxSums * warps));
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        laneInWarp, c64(0));
  ifThen(isFirst, [&] {
    for (auto [j, s] : llvm::enumerate(sums))
      memref::StoreOp::create(
          b, loc, s, shared.warpSlots,
          ValueRange{toIndex(add(base, add(c64(j * warps), warp)))});
  });
  // The program's own warps only: its slots are its own.
  groupBarrier(layout.group, R, G);
  SmallVector<Value> totals;
  for (unsigned j = 0; j < sums.size(); ++j) {
    Value total;
    for (int64_t w = 0; w < warps; ++w) {
      Value idx = toIndex(add(base, c64(j * warps + w)));
      Value part =
          memref::LoadOp::create(b, loc, shared.warpSlots, ValueRange{idx});
      total = total ? arith::AddFOp::create(b, loc, total, part).getResult()
                    : part;
    }
    totals.push_back(total);
  }
  groupBarrier(layout.group, R,
               G); // the slots are reused by the next reduction
  sums = totals;
}

/// Slots [set][rank][sum] of f32 and one mbarrier per set, a set per row
/// stage and row parity. Rank r's sums reach every CTA's [set][r] slots by
/// `st.async`, each store completing its bytes on the receiver's mbarrier
/// of the set; the receiver's thread 0 has armed the phase with the bytes
/// of all C CTAs (arrive.expect_tx, the one arrival a phase), so a CTA
/// waits only on its own mbarrier and reads its own shared memory. No
/// cluster barrier, no remote read and no cluster-scope fence per row: an
/// acquire at cluster scope invalidated the whole L1 at every row
/// (`CCTL.IVALL`: 37-48% of the stall samples, perf-notes "Cluster rows").
/// A set is written again two rows later, which no peer does before this
/// CTA's push of the row between, after every thread of it has read the
/// set and thread 0 has re-armed it (the cross-warp barrier of that row).
ClusterSlots MainKernelBuilder::declareClusterSlots() {
  int64_t stages = op.getRowStages().size();
  int64_t sets = clusterSetsPerStage * stages;
  ClusterSlots slots;
  slots.sums =
      sharedF32Array("_cluster_sums", sets * plan.clusterCtas * maxSums);
  // 8 bytes per mbarrier (two f32 slots; the array is 16-byte aligned).
  slots.barriers = sharedF32Array("_cluster_barriers", 2 * sets);
  Value isFirst = isThreadZero();
  ifThen(isFirst, [&] {
    Value one = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1));
    for (int64_t set = 0; set < sets; ++set)
      NVVM::MBarrierInitOp::create(
          b, loc, clusterBarrierAt(slots.barriers, c64(set)), one, Value());
    NVVM::FenceMbarrierInitOp::create(b, loc);
  });
  // The CTA barrier orders the inits before the first phases' arming (for
  // compute-sanitizer's racecheck too: ptxas issues the inits on the
  // uniform datapath).
  gpu::BarrierOp::create(b, loc);
  ifThen(isFirst, [&] {
    for (int64_t set = 0; set < sets; ++set)
      armClusterSet(clusterBarrierAt(slots.barriers, c64(set)), set % stages);
  });
  // No peer pushes to a mbarrier before its CTA has initialised and armed
  // it: the arrival here (release), the wait (waitForClusterSlots) after
  // the first loads are issued, so the barrier's latency hides behind
  // theirs.
  NVVM::ClusterArriveOp::create(b, loc, /*aligned=*/b.getUnitAttr());
  return slots;
}

void MainKernelBuilder::armClusterSet(Value barrier, int64_t stageIndex) {
  Region &stage = op.getRowStages()[stageIndex];
  int64_t bytes = plan.clusterCtas * 4 *
                  int64_t(stage.front().getTerminator()->getNumOperands());
  NVVM::MBarrierArriveExpectTxOp::create(
      b, loc, Type(), barrier,
      arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(bytes)),
      NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
}

void MainKernelBuilder::waitForClusterSlots() {
  NVVM::ClusterWaitOp::create(b, loc, /*aligned=*/b.getUnitAttr());
}

Value MainKernelBuilder::clusterBarrierAt(Value barriers, Value set) {
  Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  return LLVM::GEPOp::create(b, loc, ptr3, b.getI64Type(), barriers,
                             ValueRange{set});
}

Value MainKernelBuilder::sharedF32Array(StringRef suffix, int64_t count) {
  return staticSharedF32Array(func, suffix, count);
}

void MainKernelBuilder::clusterBarrier() {
  NVVM::ClusterArriveOp::create(b, loc, /*aligned=*/b.getUnitAttr());
  NVVM::ClusterWaitOp::create(b, loc, /*aligned=*/b.getUnitAttr());
}

Value MainKernelBuilder::clusterSetOf(Value use, int64_t stageIndex) {
  int64_t stages = op.getRowStages().size();
  return add(mul(arith::RemUIOp::create(b, loc, use, c64(clusterSetsPerStage)),
                 c64(stages)),
             c64(stageIndex));
}

Value MainKernelBuilder::clusterSlot(Value set, Value rank, unsigned j) {
  Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  Value index = add(mul(add(mul(set, c64(plan.clusterCtas)), rank),
                        c64(maxSums)),
                    c64(j));
  return LLVM::GEPOp::create(b, loc, ptr3, f32, cluster.sums, ValueRange{index})
      .getResult();
}

void MainKernelBuilder::reduceAcrossCluster(SmallVector<Value> &sums,
                                            Value iteration,
                                            int64_t stageIndex) {
  Value set = clusterSetOf(iteration, stageIndex);
  Value barrier = clusterBarrierAt(set);
  pushClusterSums(sums, set, barrier);
  sums = collectClusterSums(sums.size(), iteration, set, barrier, stageIndex);
}

void MainKernelBuilder::pushClusterSums(ArrayRef<Value> sums, Value set,
                                        Value barrier) {
  Type ptr7 = LLVM::LLVMPointerType::get(b.getContext(), 7);
  // G > 32: the cross-warp barrier has ordered every read of the set's
  // last use, and its re-arming, before the push (see declareClusterSlots);
  // a warp-wide row needs its own.
  if (G <= 32)
    NVVM::SyncWarpOp::create(b, loc, allLanes());
  // Every lane holds the CTA's sums: lane r < C pushes them to rank r.
  Value pusher = ult(tid, c64(plan.clusterCtas));
  ifThen(pusher, [&] {
    Value peer = arith::TruncIOp::create(b, loc, i32, tid);
    Value remoteBarrier = NVVM::MapaOp::create(b, loc, ptr7, barrier, peer);
    for (auto [j, s] : llvm::enumerate(sums)) {
      Value remote = NVVM::MapaOp::create(
          b, loc, ptr7, clusterSlot(set, layout.clusterRank, j), peer);
      NVVM::InlinePtxOp::create(
          b, loc, TypeRange{}, ValueRange{remote, s, remoteBarrier},
          ValueRange{},
          "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 "
          "[$0], $1, [$2];",
          Value());
    }
  });
}

SmallVector<Value>
MainKernelBuilder::collectClusterSums(unsigned count, Value use, Value set,
                                      Value barrier, int64_t stageIndex) {
  // The set's use / S-th phase; thread 0 then arms its next (use + S).
  waitForPhase(barrier,
               arith::DivUIOp::create(b, loc, use, c64(clusterSetsPerStage)));
  ifThen(isThreadZero(), [&] { armClusterSet(barrier, stageIndex); });
  // The slots in rank order (the order of the sums does not depend on
  // which push came first).
  SmallVector<Value> totals;
  for (unsigned j = 0; j < count; ++j) {
    Value total;
    for (int64_t r = 0; r < plan.clusterCtas; ++r) {
      Value part = LLVM::LoadOp::create(b, loc, f32, clusterSlot(set, c64(r), j),
                                        /*alignment=*/4);
      total = total ? arith::AddFOp::create(b, loc, total, part).getResult()
                    : part;
    }
    totals.push_back(total);
  }
  return totals;
}
