//===- ResidentKernel.cpp - The register-resident main kernel -------------===//
//
// Part of norm-opt. A lane owns K chunks of the row and keeps them in
// registers between the row stages and the elementwise pass; its column
// accumulators (one per owned column and column result) are loop-carried.
//
//   prologue (makeMainKernelBuilder: arguments, captures, shared memory,
//             program layout; peeled rows: the program's phase and head)
//   constructor, in the order of the members:
//     declareClusterSlots   cluster rows: the slots and their mbarriers
//     ownChunks             the lane's chunks, column inputs loaded once
//     declareRowInputSlots  plan.ringRowInputs: the row inputs' slots
//     ringBase              cp.async ring: its base
//   build:
//     accumulators = 0
//     startAsyncRing        cp.async ring: the first stages - 1 rows
//     row loop (RowState):
//       next row's loads    register prefetch / ring copies / row inputs
//       loadRow             this row's full inputs into registers
//       reduceRowStages     per stage: within thread (laneSums), warp,
//                           across warps (reduceWithinProgram), cluster
//       finishChunks        elementwise results, column contributions
//     (rowLoopSumsAhead, cluster rows of plan.clusterSumsAhead: row it + 1's
//      sums from the ring pushed before row it's wait, row it re-read)
//     combinePartialsInCTA  R > 1: the CTA's programs add in shared memory
//     | writePartials       else: one partial row per program
//     single-launch tail
//
//===----------------------------------------------------------------------===//

#include "MainKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::norm;

ResidentKernelBuilder::ResidentKernelBuilder(OpBuilder &b, MixedReductionOp op,
                                             const KernelPlan &plan,
                                             int64_t vector,
                                             gpu::GPUFuncOp func,
                                             MainKernelPrologue prologue)
    : MainKernelBuilder(b, op, plan, vector, func, std::move(prologue)),
      K(plan.chunksPerThread), stages(plan.asyncStages),
      prefetch(plan.prefetch), owned(ownChunks()),
      rowInputs(rowInputsInRing() ? declareRowInputSlots() : RowInputSlots()),
      ring(stages > 0 ? ringBase() : Value()) {}

void ResidentKernelBuilder::build() {
  // The column accumulators, one per owned column and column result.
  SmallVector<Value> accInit(numCol * owned.width, zeroF32());
  // Row loading: the cp.async ring (vector kernel), else the register
  // prefetch of the next row (when the plan has room for it), else plain.
  if (stages > 0)
    startAsyncRing();
  scf::ForOp rowLoop = sumsAhead() ? rowLoopSumsAhead(accInit)
                                   : rowLoopHeld(accInit, rowInputsInRing());

  if (stages > 0) // no copy may still be writing the ring at exit
    NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
  // No CTA may leave while a peer can still read its slots.
  if (plan.clusterCtas > 1)
    clusterBarrier();
  if (plan.combineInCta)
    combinePartialsInCTA(rowLoop);
  else
    writePartials(rowLoop);
  if (plan.singleLaunch)
    emitSingleLaunchTail(plan.combineInCta ? gridDim() : layout.rowPrograms);
  signalDependents();
  gpu::ReturnOp::create(b, loc);
}

/// The row loop: a row's values are loaded once (ring, carried prefetch or
/// plain loads) and held in registers from the row stages to the
/// elementwise part.
scf::ForOp ResidentKernelBuilder::rowLoopHeld(ValueRange accInit, bool inRing) {
  SmallVector<Value> loopInit(accInit);
  llvm::append_range(loopInit, loadRawRow(minU(layout.prog, layout.lastRow)));
  size_t numAcc = accInit.size();
  size_t numRaw = loopInit.size() - numAcc;
  // The row inputs (mean, rstd) ride the ring, or are loaded one row ahead
  // and carried: each row's first use of them would otherwise wait a full
  // memory latency (perf-notes, "Row inputs ahead").
  if (!inRing)
    llvm::append_range(loopInit,
                       loadRowInputs(minU(layout.prog, layout.lastRow)));

  if (plan.clusterCtas > 1)
    waitForClusterSlots();
  auto rowLoop = scf::ForOp::create(
      b, loc, zero64, layout.iters, one64, loopInit,
      [&](OpBuilder &, Location, Value it, ValueRange carried) {
        RowState row = rowAt(it);
        SmallVector<Value> nextRaw =
            loadRawRow(minU(add(row.row, layout.programs), layout.lastRow));
        if (stages > 0) {
          // Then wait until this row's group (stages - 1 groups ago) has
          // landed.
          refillRing(row);
          NVVM::CpAsyncWaitGroupOp::create(b, loc, stages - 1);
        }
        SmallVector<Value> nextRowInputs;
        if (inRing) {
          row.inputs = readRowInputSlots(ringStage(it));
        } else {
          row.inputs.assign(carried.begin() + numAcc + numRaw, carried.end());
          nextRowInputs = loadRowInputs(
              minU(add(row.row, layout.programs), layout.lastRow));
        }

        SmallVector<ChunkValues> fullVals =
            loadRow(row, carried.drop_front(numAcc));
        reduceRowStages(row, fullVals);
        SmallVector<Value> next(carried.take_front(numAcc));
        finishChunks(row, fullVals, next);
        llvm::append_range(next, nextRaw);
        llvm::append_range(next, nextRowInputs);
        scf::YieldOp::create(b, loc, next);
      });
  return rowLoop;
}

//===----------------------------------------------------------------------===//
// Cluster rows: the row sums a row ahead
//===----------------------------------------------------------------------===//

RowState ResidentKernelBuilder::rowAt(Value it) {
  RowState row;
  row.iteration = it;
  row.row = add(mul(it, layout.rowPrograms), layout.progRow);
  row.valid = ult(row.row, args.rows);
  row.clamped = minU(row.row, layout.lastRow);
  return row;
}

Value ResidentKernelBuilder::ringStage(Value it) {
  return arith::RemUIOp::create(b, loc, it, c64(stages));
}

void ResidentKernelBuilder::refillRing(const RowState &row) {
  Value ahead = add(row.row, mul(c64(stages - 1), layout.programs));
  if (rowInputs.slots) // the warp's reads of that stage are done
    NVVM::SyncWarpOp::create(b, loc, allLanes());
  issueAsyncCopies(minU(ahead, layout.lastRow),
                   ringStage(add(row.iteration, c64(stages - 1))));
}

void ResidentKernelBuilder::pushRowSums(Value it) {
  Region &stage = op.getRowStages().front();
  RowState row = rowAt(it);
  if (rowInputs.slots)
    row.inputs = readRowInputSlots(ringStage(it));
  SmallVector<Value> sums =
      laneSums(stage, row, loadRow(row, ValueRange{}));
  reduceWithinProgram(sums);
  Value set = clusterSetOf(it, /*stageIndex=*/0);
  pushClusterSums(sums, set, clusterBarrierAt(set));
}

/// Iteration it: the ring's copies of row it + S - 1, row it + 1's sums
/// (read from the ring) pushed to the cluster, then row it's sums awaited
/// and its elementwise part, the row read from the ring again. The wait
/// for the slowest CTA's push of row it overlaps row it + 1's loads and
/// sums (ncu, LayerNorm bf16 1024x32768: 25% of the stall samples on
/// that wait with the sums of the same row). Rows it and it + 1 stay in
/// the ring while row it + 2 lands: S >= 3. A CTA pushes row it + 1 while
/// a slower peer may still be reading row it - 2's slots (it pushed row
/// it before), so consecutive rows take four slot sets in turn.
scf::ForOp ResidentKernelBuilder::rowLoopSumsAhead(ValueRange accInit) {
  Region &stage = op.getRowStages().front();
  TypeRange yieldTypes = stage.front().getTerminator()->getOperandTypes();
  waitForClusterSlots();
  NVVM::CpAsyncWaitGroupOp::create(b, loc, stages - 2);
  pushRowSums(zero64);
  return scf::ForOp::create(
      b, loc, zero64, layout.iters, one64, accInit,
      [&](OpBuilder &, Location, Value it, ValueRange carried) {
        RowState row = rowAt(it);
        refillRing(row);
        NVVM::CpAsyncWaitGroupOp::create(b, loc, stages - 2);
        Value next = add(it, one64);
        ifThen(ult(next, layout.iters), [&] { pushRowSums(next); });

        if (rowInputs.slots)
          row.inputs = readRowInputSlots(ringStage(it));
        Value set = clusterSetOf(it, /*stageIndex=*/0);
        SmallVector<Value> totals =
            collectClusterSums(yieldTypes.size(), it, set,
                               clusterBarrierAt(set), /*stageIndex=*/0);
        for (auto [total, type] : llvm::zip(totals, yieldTypes))
          row.results.push_back(fromF32(total, type));
        SmallVector<ChunkValues> fullVals = loadRow(row, ValueRange{});
        SmallVector<Value> accs(carried.begin(), carried.end());
        finishChunks(row, fullVals, accs);
        scf::YieldOp::create(b, loc, accs);
      });
}

ResidentKernelBuilder::OwnedChunks ResidentKernelBuilder::ownChunks() {
  OwnedChunks owned;
  for (int64_t k = 0; k < K; ++k)
    owned.chunks.push_back(chunkAt(c64(k), /*inPart=*/plan.clusterCtas > 1));
  if (peel())
    llvm::append_range(owned.chunks, edgeChunks());
  for (const Chunk &chunk : owned.chunks) {
    owned.offset.push_back(owned.width);
    owned.width += chunk.width;
  }
  return owned;
}

//===----------------------------------------------------------------------===//
// Row loading
//===----------------------------------------------------------------------===//

/// The full inputs of the next stages - 1 rows stream into a per-thread
/// ring in dynamic shared memory (after the accumulators, at
/// plan.asyncRingOffset) while this row is reduced, without holding
/// registers. Each thread reads back only the slots it filled itself, so
/// waiting for its own copy groups is enough (no barrier).
Value ResidentKernelBuilder::ringBase() {
  Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  Value base = LLVM::AddressOfOp::create(
      b, loc,
      getDynamicSharedMemory(b, func->getParentOfType<gpu::GPUModuleOp>()));
  return LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), base,
                             ValueRange{c64(plan.asyncRingOffset)});
}

void ResidentKernelBuilder::startAsyncRing() {
  for (int64_t s = 0; s + 1 < stages; ++s)
    issueAsyncCopies(
        minU(add(layout.prog, mul(c64(s), layout.programs)), layout.lastRow),
        c64(s));
}

/// Slot (stage, k, input) of thread t is 16 bytes at
/// ((stage * K + k) * F + input) * T + t: a warp's accesses to one slot
/// index are contiguous (no bank conflicts).
Value ResidentKernelBuilder::asyncSlot(Value stage, int64_t k, int64_t i) {
  const int64_t F = args.fullIn.size(), T = plan.block();
  Value index =
      add(mul(add(mul(stage, c64(K * F)), c64(k * F + i)), c64(T)), tid);
  Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  return LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), ring,
                             ValueRange{mul(index, c64(kSharedAlignment))})
      .getResult();
}

ResidentKernelBuilder::RowInputSlots
ResidentKernelBuilder::declareRowInputSlots() {
  int64_t warps = plan.block() / 32;
  RowInputSlots slots;
  slots.slots = sharedF32Array("_row_inputs",
                               stages * warps * int64_t(args.rowIn.size()));
  slots.warpInCta = arith::DivUIOp::create(b, loc, tid, c64(32));
  slots.isWarpLeader = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, loc, tid, c64(32)), c64(0));
  return slots;
}

/// Slot (stage, warp, j): 4 bytes at ((stage * warps) + warp) * J + j.
Value ResidentKernelBuilder::rowInputSlot(Value stage, int64_t j) {
  int64_t warps = plan.block() / 32, J = args.rowIn.size();
  Value index = add(
      mul(add(mul(stage, c64(warps)), rowInputs.warpInCta), c64(J)), c64(j));
  Type ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  return LLVM::GEPOp::create(b, loc, ptr3, f32, rowInputs.slots,
                             ValueRange{index})
      .getResult();
}

/// Lane 0 of each warp: the row's inputs into the warp's slots of `stage`
/// (in the row's commit group).
void ResidentKernelBuilder::issueRowInputCopies(Value rowIndex, Value stage) {
  ifThen(rowInputs.isWarpLeader, [&] {
    for (auto [j, in] : llvm::enumerate(args.rowIn)) {
      Value src = LLVM::GEPOp::create(b, loc, ptr,
                                      elementTypeOf(op.getRow()[j]), in,
                                      ValueRange{rowIndex});
      NVVM::CpAsyncOp::create(
          b, loc, rowInputSlot(stage, j), src, b.getI32IntegerAttr(4),
          NVVM::LoadCacheModifierKindAttr::get(
              b.getContext(), NVVM::LoadCacheModifierKind::CA),
          Value());
    }
  });
}

/// After the wait for the row's group: the warp syncs (lane 0's copies
/// become visible to its lanes) and every lane reads the row's inputs.
SmallVector<Value> ResidentKernelBuilder::readRowInputSlots(Value stage) {
  NVVM::SyncWarpOp::create(b, loc, allLanes());
  SmallVector<Value> vals;
  for (auto [j, in] : llvm::enumerate(op.getRow())) {
    Type elem = elementTypeOf(in);
    vals.push_back(
        LLVM::LoadOp::create(b, loc, elem, rowInputSlot(stage, j), 4));
  }
  return vals;
}

/// One commit group: the row's whole chunks of every full input (and its
/// row inputs where they ride the ring).
void ResidentKernelBuilder::issueAsyncCopies(Value rowIndex, Value stage) {
  if (rowInputs.slots)
    issueRowInputCopies(rowIndex, stage);
  for (auto [k, chunk] : llvm::enumerate(ArrayRef(owned.chunks).take_front(K)))
    for (auto [i, in] : llvm::enumerate(args.fullIn)) {
      Type elem = elementTypeOf(op.getFull()[i]);
      Value src = LLVM::GEPOp::create(
          b, loc, ptr, elem, in,
          ValueRange{add(mul(rowIndex, args.strideIn[i]), chunk.column)});
      int64_t bytes = elementBytes(elem) * V;
      auto modifier = NVVM::LoadCacheModifierKindAttr::get(
          b.getContext(), bytes == 16 ? NVVM::LoadCacheModifierKind::CG
                                      : NVVM::LoadCacheModifierKind::CA);
      Value slot = asyncSlot(stage, k, i);
      auto copy = [&] {
        NVVM::CpAsyncOp::create(b, loc, slot, src, b.getI32IntegerAttr(bytes),
                                modifier, Value());
      };
      // A masked chunk past the row copies nothing; its stale slot is
      // read, but every use of it is masked.
      if (maskedChunks())
        ifThen(chunk.valid, copy);
      else
        copy();
    }
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
}

/// The row's full inputs of the carried chunks as raw accesses (carried
/// through the loop, a row ahead).
SmallVector<Value> ResidentKernelBuilder::loadRawRow(Value rowIndex) {
  SmallVector<Value> raws;
  for (auto [k, chunk] : llvm::enumerate(owned.chunks)) {
    if (!carried(k))
      continue;
    for (auto [i, in] : llvm::enumerate(args.fullIn))
      raws.push_back(
          loadChunkRaw(chunk, in, elementTypeOf(op.getFull()[i]),
                       add(mul(rowIndex, args.strideIn[i]), chunk.column)));
  }
  return raws;
}

/// This row's full inputs, [chunk][input][element]: from the raw accesses
/// carried from the previous iteration (`current`), the ring, or plain
/// loads.
SmallVector<ChunkValues> ResidentKernelBuilder::loadRow(const RowState &row,
                                                        ValueRange current) {
  SmallVector<ChunkValues> fullVals;
  Value stage;
  if (stages > 0)
    stage = ringStage(row.iteration);
  for (auto [k, chunk] : llvm::enumerate(owned.chunks)) {
    ChunkValues vals;
    if (carried(k)) {
      for (size_t i = 0; i < args.fullIn.size(); ++i)
        vals.push_back(split(current[i], chunk.width));
      current = current.drop_front(args.fullIn.size());
    } else if (stages > 0) {
      for (size_t i = 0; i < args.fullIn.size(); ++i) {
        Type elem = elementTypeOf(op.getFull()[i]);
        Value raw = loadElements(elem, V, asyncSlot(stage, k, i),
                                 elementBytes(elem) * V);
        vals.push_back(split(raw, V));
      }
    } else {
      vals = loadFull(row, chunk);
    }
    fullVals.push_back(vals);
  }
  return fullVals;
}

//===----------------------------------------------------------------------===//
// Row stages and the elementwise part
//===----------------------------------------------------------------------===//

void ResidentKernelBuilder::reduceRowStages(RowState &row,
                                            ArrayRef<ChunkValues> fullVals) {
  for (Region &stage : op.getRowStages())
    finishStage(stage, laneSums(stage, row, fullVals), row);
}

SmallVector<Value>
ResidentKernelBuilder::laneSums(Region &stage, const RowState &row,
                                ArrayRef<ChunkValues> fullVals) {
  SmallVector<Value> sums(stage.front().getTerminator()->getNumOperands(),
                          zeroF32());
  for (auto [k, chunk] : llvm::enumerate(owned.chunks))
    accumulateStage(stage, row, chunk, fullVals[k], sums);
  return sums;
}

/// Per owned chunk: the elementwise results (stored), and the column
/// contributions added to the chunk's accumulators in `accs` (masked rows
/// and chunks add zero).
void ResidentKernelBuilder::finishChunks(const RowState &row,
                                         ArrayRef<ChunkValues> fullVals,
                                         SmallVector<Value> &accs) {
  for (auto [k, chunk] : llvm::enumerate(owned.chunks)) {
    ChunkResults results = computeElementwise(row, chunk, fullVals[k]);
    Value live = isLive(row, chunk);
    ifThen(live, [&] { storeFullResults(row, chunk, results.outs); });
    for (unsigned c = 0; c < numCol; ++c)
      for (int64_t e = 0; e < chunk.width; ++e) {
        Value &acc = accs[accumulatorIndex(c, k, e)];
        acc = arith::AddFOp::create(b, loc, acc,
                                    select(live, results.contribs[c][e]));
      }
  }
}

//===----------------------------------------------------------------------===//
// Partials
//===----------------------------------------------------------------------===//

/// The CTA's R programs add their accumulators in shared memory, in program
/// order; one partial row per CTA (P = grid_dim).
void ResidentKernelBuilder::combinePartialsInCTA(scf::ForOp rowLoop) {
  for (auto [k, chunk] : llvm::enumerate(owned.chunks))
    ifThen(chunk.valid, [&] {
      for (unsigned c = 0; c < numCol; ++c) {
        SmallVector<Value> vals;
        for (int64_t e = 0; e < chunk.width; ++e)
          vals.push_back(accumulator(rowLoop, c, k, e));
        storeShared(
            add(mul(add(mul(layout.group, c64(numCol)), c64(c)), args.cols),
                chunk.column),
            vals);
      }
    });
  gpu::BarrierOp::create(b, loc);
  Value total = mul(c64(numCol), args.cols);
  Value ctas = gridDim();
  scf::ForOp::create(
      b, loc, tid, total, c64(G * R), ValueRange{},
      [&](OpBuilder &, Location, Value j, ValueRange) {
        Value sum;
        for (int64_t g = 0; g < R; ++g) {
          Value part = memref::LoadOp::create(
              b, loc, shared.accumulators,
              ValueRange{toIndex(add(mul(c64(g), total), j))});
          sum = sum ? arith::AddFOp::create(b, loc, sum, part).getResult()
                    : part;
        }
        // j = c * N + col -> partial[(c * CTAs + block) * N + col] (rows
        // of partialCols).
        Value c = arith::DivUIOp::create(b, loc, j, args.cols);
        Value col = arith::RemUIOp::create(b, loc, j, args.cols);
        Value index =
            add(mul(add(mul(c, ctas), blockId()), args.partialCols), col);
        store(args.partial, f32, index, sum);
        scf::YieldOp::create(b, loc);
      });
}

/// The accumulators become row `prog` of the partial buffer.
void ResidentKernelBuilder::writePartials(scf::ForOp rowLoop) {
  Value progValid = ult(layout.prog, layout.programs);
  for (auto [k, chunk] : llvm::enumerate(owned.chunks)) {
    Value live = arith::AndIOp::create(b, loc, progValid, chunk.valid);
    ifThen(live, [&] {
      for (unsigned c = 0; c < numCol; ++c) {
        SmallVector<Value> vals;
        for (int64_t e = 0; e < chunk.width; ++e)
          vals.push_back(accumulator(rowLoop, c, k, e));
        Value index = partialIndex(c, chunk.column);
        // Peeled rows: the chunk's columns are not 16-byte aligned in a
        // partial row (N floats).
        if (!peel()) {
          store(args.partial, f32, index, vals);
          continue;
        }
        for (auto [e, v] : llvm::enumerate(vals))
          store(args.partial, f32, add(index, c64(e)), v);
      }
    });
  }
}
