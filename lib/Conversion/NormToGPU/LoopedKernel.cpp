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
//   prologue (makeMainKernelBuilder: arguments, captures, shared memory,
//             program layout with computeColumnParts: progRow,
//             rowPrograms, [partBegin, partEnd))
//   constructor: computeRowLoops, declareBulkRing (plan.bulkStages)
//   build:
//     zeroAccumulators
//     startBulkRing          (plan.bulkStages) mbarriers, the first rows
//     row loop (RowState):
//       stageRow             (bulk ring) the next row in, wait for this one
//       reduceRowStages      per stage: looped within thread, warp, warps
//       finishRow            elementwise results, column contributions
//     copySharedAccumulators shared memory -> the partial row
//     single-launch tail (plan.singleLaunch)
//
// The bulk ring (vector kernel, plan.bulkStages = S): thread 0 copies the
// whole row of every full input into stage j % S with cp.async.bulk, S - 1
// rows ahead, completing on the stage's mbarrier with the row's byte
// count; the passes over the row read the stage (shared memory) instead of
// global memory. A CTA barrier at the top of each row iteration frees the
// stage the previous row used before thread 0 refills it.
//
//===----------------------------------------------------------------------===//

#include "MainKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::norm;

LoopedKernelBuilder::LoopedKernelBuilder(OpBuilder &b, MixedReductionOp op,
                                         const KernelPlan &plan, int64_t vector,
                                         gpu::GPUFuncOp func,
                                         MainKernelPrologue prologue)
    : MainKernelBuilder(b, op, plan, vector, func, std::move(prologue)),
      unroll(plan.loopUnroll(op, vector)), bulkStages(plan.bulkStages),
      loops(computeRowLoops()),
      bulk(bulkStages ? declareBulkRing() : BulkRing()) {}

LoopedKernelBuilder::RowLoops LoopedKernelBuilder::computeRowLoops() {
  RowLoops loops;
  loops.partCols = mul(layout.partChunks, c64(V));
  loops.partFirstCol = mul(layout.partBegin, c64(V));
  loops.loopedChunks =
      arith::CeilDivUIOp::create(b, loc, layout.chunks, c64(G));
  loops.partLoopedChunks =
      arith::CeilDivUIOp::create(b, loc, layout.partChunks, c64(G));
  return loops;
}

void LoopedKernelBuilder::build() {
  zeroAccumulators();
  if (bulkStages)
    startBulkRing();

  // With the bulk ring (one CTA per SM, registers to spare) the row inputs
  // are loaded a row ahead, so no row starts with a memory latency.
  SmallVector<Value> firstInputs;
  if (bulkStages)
    firstInputs = loadRowInputs(minU(layout.progRow, layout.lastRow));
  scf::ForOp::create(b, loc, zero64, layout.iters, one64, firstInputs,
                     [&](OpBuilder &, Location, Value it, ValueRange carried) {
                       RowState row;
                       row.iteration = it;
                       row.row =
                           add(mul(it, layout.rowPrograms), layout.progRow);
                       row.valid = ult(row.row, args.rows);
                       row.clamped = minU(row.row, layout.lastRow);
                       SmallVector<Value> nextInputs;
                       if (bulkStages) {
                         row.inputs.assign(carried.begin(), carried.end());
                         nextInputs = loadRowInputs(minU(
                             add(row.row, layout.rowPrograms), layout.lastRow));
                         row.staged = stageRow(it);
                       } else {
                         row.inputs = loadRowInputs(row.clamped);
                       }
                       reduceRowStages(row);
                       finishRow(row);
                       scf::YieldOp::create(b, loc, nextInputs);
                     });

  if (plan.sharedAccumulators)
    copySharedAccumulators();
  if (plan.singleLaunch)
    emitSingleLaunchTail(layout.rowPrograms);
  signalDependents();
  gpu::ReturnOp::create(b, loc);
}

//===----------------------------------------------------------------------===//
// The bulk ring
//===----------------------------------------------------------------------===//

LoopedKernelBuilder::BulkRing LoopedKernelBuilder::declareBulkRing() {
  BulkRing ring;
  Value base = LLVM::AddressOfOp::create(
      b, loc,
      getDynamicSharedMemory(b, func->getParentOfType<gpu::GPUModuleOp>()));
  ring.base = LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base,
                                  ValueRange{c64(plan.bulkRingOffset)});
  for (Value in : op.getFull()) {
    ring.inputOffsets.push_back(ring.stageBytes);
    ring.stageBytes += elementBytes(in.getType()) * *plan.staticCols;
  }
  return ring;
}

/// Thread 0 initialises one mbarrier per stage (one arrival: its own, with
/// the stage's byte count) and makes them visible to the async proxy
/// before any thread waits or any copy completes on them; then the first
/// S - 1 rows.
void LoopedKernelBuilder::startBulkRing() {
  ifThen(isThreadZero(), [&] {
    for (int64_t s = 0; s < bulkStages; ++s)
      NVVM::MBarrierInitOp::create(b, loc, bulkBarrier(c64(s)),
                                   arith::ConstantOp::create(
                                       b, loc, b.getI32IntegerAttr(1)),
                                   Value());
    fenceProxyAsyncShared();
  });
  gpu::BarrierOp::create(b, loc);
  for (int64_t j = 0; j + 1 < bulkStages; ++j)
    issueBulkRow(c64(j));
}

/// Orders this thread's (and, after a barrier, the CTA's) generic accesses
/// to shared memory before its later async-proxy ones (bulk copies).
void LoopedKernelBuilder::fenceProxyAsyncShared() {
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

Value LoopedKernelBuilder::bulkAt(Value byteOffset) {
  return LLVM::GEPOp::create(b, loc, bulk.base.getType(), b.getI8Type(),
                             bulk.base, ValueRange{byteOffset});
}

Value LoopedKernelBuilder::bulkBarrier(Value stage) {
  return bulkAt(add(c64(bulkStages * bulk.stageBytes),
                    mul(stage, c64(kBulkBarrierBytes))));
}

/// Thread 0: the full inputs of row iteration j's row into stage j % S,
/// unless j is past the loop (every copy issued is waited for).
void LoopedKernelBuilder::issueBulkRow(Value j) {
  Value stage = arith::RemUIOp::create(b, loc, j, c64(bulkStages));
  Value rowIndex =
      minU(add(mul(j, layout.rowPrograms), layout.progRow), layout.lastRow);
  Value go =
      arith::AndIOp::create(b, loc, isThreadZero(), ult(j, layout.iters));
  ifThen(go, [&] {
    // The CTA's reads of the stage (a row ago, before the barrier) come
    // before the copy's writes.
    fenceProxyAsyncShared();
    Value barrier = bulkBarrier(stage);
    NVVM::MBarrierArriveExpectTxOp::create(
        b, loc, Type(), barrier,
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(bulk.stageBytes)),
        NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
    Value stageBase = bulkAt(mul(stage, c64(bulk.stageBytes)));
    for (auto [i, in] : llvm::enumerate(args.fullIn)) {
      Type elem = elementTypeOf(op.getFull()[i]);
      Value src = LLVM::GEPOp::create(
          b, loc, ptr, elem, in, ValueRange{mul(rowIndex, args.strideIn[i])});
      Value dst =
          LLVM::GEPOp::create(b, loc, bulk.base.getType(), b.getI8Type(),
                              stageBase, ValueRange{c64(bulk.inputOffsets[i])});
      // As a shared::cluster address (the CTA's own window): the
      // shared::cta form of the copy needs PTX 8.6.
      dst = LLVM::AddrSpaceCastOp::create(
          b, loc, LLVM::LLVMPointerType::get(b.getContext(), 7), dst);
      int64_t bytes = elementBytes(elem) * *plan.staticCols;
      NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
          b, loc, dst, src, barrier,
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(bytes)),
          Value(), Value());
    }
  });
}

/// Row iteration `it`: once every thread is past the previous row (the
/// barrier), its stage takes row it + S - 1; then every thread waits for
/// this row's stage (phase parity (it / S) % 2) and reads it from there.
Value LoopedKernelBuilder::stageRow(Value it) {
  gpu::BarrierOp::create(b, loc);
  issueBulkRow(add(it, c64(bulkStages - 1)));
  Value stage = arith::RemUIOp::create(b, loc, it, c64(bulkStages));
  waitForPhase(bulkBarrier(stage),
               arith::DivUIOp::create(b, loc, it, c64(bulkStages)));
  return bulkAt(mul(stage, c64(bulk.stageBytes)));
}

/// The full inputs of `chunk`: from the row's stage of the bulk ring, else
/// from global memory.
ChunkValues LoopedKernelBuilder::loadRowChunk(const RowState &row,
                                              const Chunk &chunk) {
  if (!bulkStages)
    return loadFull(row, chunk);
  ChunkValues vals;
  for (auto [i, in] : llvm::enumerate(op.getFull())) {
    Type elem = elementTypeOf(in);
    Value input =
        LLVM::GEPOp::create(b, loc, row.staged.getType(), b.getI8Type(),
                            row.staged, ValueRange{c64(bulk.inputOffsets[i])});
    Value at = LLVM::GEPOp::create(b, loc, row.staged.getType(), elem, input,
                                   ValueRange{chunk.column});
    Value raw = loadElements(elem, V, at, kSharedAlignment);
    vals.push_back(split(raw, V));
  }
  return vals;
}

//===----------------------------------------------------------------------===//
// Accumulators and the passes over a row
//===----------------------------------------------------------------------===//

/// The program's part of its accumulators starts at zero.
void LoopedKernelBuilder::zeroAccumulators() {
  scf::ForOp::create(
      b, loc, zero64, loops.partLoopedChunks, one64, ValueRange{},
      [&](OpBuilder &, Location, Value k, ValueRange) {
        Value c = add(add(mul(k, c64(G)), layout.lane), layout.partBegin);
        ifThen(ult(c, layout.partEnd), [&] {
          SmallVector<Value> zeros(V, zeroF32());
          for (unsigned ci = 0; ci < numCol; ++ci) {
            if (plan.sharedAccumulators)
              storeShared(sharedIndex(ci, mul(c, c64(V))), zeros);
            else
              store(args.partial, f32, partialIndex(ci, mul(c, c64(V))), zeros);
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
        b, loc, zero64, loops.loopedChunks, c64(unroll), sums,
        [&](OpBuilder &, Location, Value k, ValueRange carried) {
          SmallVector<Chunk> batch;
          SmallVector<ChunkValues> vals;
          for (int64_t u = 0; u < unroll; ++u) {
            batch.push_back(chunkAt(add(k, c64(u))));
            vals.push_back(loadRowChunk(row, batch.back()));
          }
          SmallVector<Value> next(carried);
          for (int64_t u = 0; u < unroll; ++u)
            accumulateStage(stage, row, batch[u], vals[u], next);
          scf::YieldOp::create(b, loc, next);
        });
    finishStage(stage, SmallVector<Value>(loop.getResults()), row);
  }
}

/// The elementwise pass over the program's part: results stored, column
/// contributions added to the accumulators in memory.
void LoopedKernelBuilder::finishRow(const RowState &row) {
  scf::ForOp::create(
      b, loc, zero64, loops.partLoopedChunks, c64(unroll), ValueRange{},
      [&](OpBuilder &, Location, Value k, ValueRange) {
        SmallVector<Chunk> batch;
        SmallVector<ChunkValues> vals;
        for (int64_t u = 0; u < unroll; ++u) {
          batch.push_back(chunkAt(add(k, c64(u)), /*inPart=*/true));
          vals.push_back(loadRowChunk(row, batch.back()));
        }
        for (int64_t u = 0; u < unroll; ++u) {
          ChunkResults results = computeElementwise(row, batch[u], vals[u]);
          Value live = isLive(row, batch[u]);
          ifThen(live, [&] {
            storeFullResults(row, batch[u], results.outs);
            accumulateColumns(batch[u], results.contribs);
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
        shared ? loadShared(index, V) : load(args.partial, f32, index, V);
    for (int64_t e = 0; e < V; ++e)
      sums[e] = arith::AddFOp::create(b, loc, sums[e], contribs[c][e]);
    if (shared)
      storeShared(index, sums);
    else
      store(args.partial, f32, index, sums);
  }
}

/// Each lane copies the columns it owns (no barrier: nobody else wrote
/// them) to the program's partial row.
void LoopedKernelBuilder::copySharedAccumulators() {
  scf::ForOp::create(
      b, loc, zero64, loops.partLoopedChunks, one64, ValueRange{},
      [&](OpBuilder &, Location, Value k, ValueRange) {
        Value c = add(add(mul(k, c64(G)), layout.lane), layout.partBegin);
        ifThen(ult(c, layout.partEnd), [&] {
          for (unsigned ci = 0; ci < numCol; ++ci) {
            Value column = mul(c, c64(V));
            store(args.partial, f32, partialIndex(ci, column),
                  loadShared(sharedIndex(ci, column), V));
          }
        });
        scf::YieldOp::create(b, loc);
      });
}
