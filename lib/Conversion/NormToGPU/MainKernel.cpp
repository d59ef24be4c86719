//===- MainKernel.cpp - Steps shared by the main kernels ------------------===//
//
// Part of norm-opt. The prologue (arguments, captured values, shared
// memory, program ids), the loads, the elementwise part and the
// single-launch tail of the main kernels; the row loop itself is written
// by ResidentKernelBuilder and LoopedKernelBuilder.
//
//===----------------------------------------------------------------------===//

#include "MainKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::norm;

MainKernelBuilder::MainKernelBuilder(OpBuilder &b, MixedReductionOp op,
                                     const KernelPlan &plan, int64_t vector)
    : KernelBuilderBase(b, op.getLoc()), op(op), plan(plan), V(vector),
      G(plan.threadsPerRow), R(plan.rowsPerCta),
      numCol(op.getColResults().size()),
      clusterSetsPerStage(plan.clusterSumsAhead ? 4 : 2) {}

std::unique_ptr<MainKernelBuilder>
mlir::norm::makeMainKernelBuilder(OpBuilder &b, MixedReductionOp op,
                                  const KernelPlan &plan, int64_t vector) {
  if (plan.stridedRows)
    return std::make_unique<StridedKernelBuilder>(b, op, plan, vector);
  if (plan.resident())
    return std::make_unique<ResidentKernelBuilder>(b, op, plan, vector);
  return std::make_unique<LoopedKernelBuilder>(b, op, plan, vector);
}

SmallVector<Type> MainKernelBuilder::parameterTypes() {
  return parameterTypesOf(mainKernelParams(op));
}

//===----------------------------------------------------------------------===//
// Prologue
//===----------------------------------------------------------------------===//

void MainKernelBuilder::unpackArguments(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  SmallVector<Value> scalars, initIn;
  for (auto [group, values] :
       groupArguments(mainKernelParams(op), entry.getArguments())) {
    using K = KernelParam;
    switch (group.kind) {
    case K::FullIn: fullIn = values; break;
    case K::RowIn: rowIn = values; break;
    case K::ColIn: colIn = values; break;
    case K::FullOut: fullOut = values; break;
    case K::Partial: partial = values[0]; break;
    case K::Rows: rows = values[0]; break;
    case K::Cols: cols = plan.staticCols ? c64(*plan.staticCols) : values[0];
      break;
    case K::StrideIn: strideIn = values; break;
    case K::StrideOut: strideOut = values; break;
    case K::Scalar: scalars = values; break;
    case K::Barrier: barrierWord = values[0]; break;
    case K::InitIn: initIn = values; break;
    case K::ColOut: finalOuts = values; break;
    case K::Finalize: finalize = values[0]; break;
    case K::Programs: break;
    }
  }
  for (auto [extract, pointer] : llvm::zip(getCapturedScalars(op), scalars))
    scalarPointers[extract.getResult()] = pointer;
  if (numCol > 0)
    finalInits = columnInits(op, initIn);
}

LogicalResult MainKernelBuilder::cloneCaptures() {
  dimRows = rows;
  dimCols = cols;
  dimColsIndex = op.getNDimIndex();
  if (failed(cloneCapturedValues(op, op.getDomainShape().size())) ||
      failed(cloneEpilogueCaptures(op)))
    return failure();
  return success();
}

void MainKernelBuilder::layoutSharedMemory(gpu::GPUFuncOp func) {
  if (G > 32)
    smem = func.getWorkgroupAttributions().front();
  if (plan.dynamicSharedBytes == 0)
    return;
  Attribute workgroup = gpu::AddressSpaceAttr::get(
      b.getContext(), gpu::AddressSpace::Workgroup);
  Value bytes = gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                      MemRefLayoutAttrInterface{}, workgroup));
  Value zeroIdx = arith::ConstantIndexOp::create(b, loc, 0);
  Value count =
      arith::ConstantIndexOp::create(b, loc, plan.dynamicSharedBytes / 4);
  accSmem = memref::ViewOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, f32, MemRefLayoutAttrInterface{},
                      workgroup),
      bytes, zeroIdx, ValueRange{count});
}

void MainKernelBuilder::computeProgramIds() {
  tid = threadId();
  lane = arith::RemUIOp::create(b, loc, tid, c64(G));
  group = arith::DivUIOp::create(b, loc, tid, c64(G));
  for (Region &stage : op.getRowStages())
    maxSums = std::max<int64_t>(
        maxSums, stage.front().getTerminator()->getNumOperands());
  prog = add(mul(blockId(), c64(R)), group);
  programs = mul(gridDim(), c64(R));
  chunks = arith::DivUIOp::create(b, loc, cols, c64(V));
}

void MainKernelBuilder::computeRowParts() {
  int64_t C = plan.clusterCtas;
  if (C == 1) {
    progRow = prog;
    rowPrograms = programs;
    partEnd = partChunks = chunks;
    return;
  }
  // Clusters are C consecutive CTAs of the 1-D grid (R = 1).
  clusterRank = arith::RemUIOp::create(b, loc, blockId(), c64(C));
  prog = progRow = arith::DivUIOp::create(b, loc, blockId(), c64(C));
  programs = rowPrograms = arith::DivUIOp::create(b, loc, gridDim(), c64(C));
  partChunks = arith::CeilDivUIOp::create(b, loc, chunks, c64(C));
  partBegin = mul(clusterRank, partChunks);
  partEnd = minU(add(partBegin, partChunks), chunks);
}

void MainKernelBuilder::computeRowBounds() {
  iters = arith::CeilDivUIOp::create(b, loc, rows, rowPrograms);
  lastRow = arith::SubIOp::create(b, loc, rows, c64(1));
  zero64 = c64(0);
  one64 = c64(1);
}

/// Rows that need not start on a 16-byte boundary (odd N, a tier's N):
/// every row of the program starts at the same phase, because the launcher
/// makes rowPrograms x the rows' stride a multiple of V (or gives each
/// program one row). The phase is its last row's: masked rows load that row
/// instead of rows - 1, so that their loads stay aligned too (a program
/// without rows takes row 0). Its lanes take the head's columns [0, head),
/// then whole chunks from `head` on, then the tail's columns.
void MainKernelBuilder::computePeel() {
  if (!peel())
    return;
  Value has = ult(progRow, rows);
  Value ownRows = arith::DivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, lastRow, progRow), rowPrograms);
  lastRow = arith::SelectOp::create(
      b, loc, has, add(progRow, mul(ownRows, rowPrograms)), zero64);
  // Every full input and result has the same phase (the launcher checks
  // that their strides agree modulo V); the first input's stride stands
  // for them.
  Value stride = strideIn.empty() ? cols : strideIn.front();
  Value phase = arith::RemUIOp::create(b, loc, mul(lastRow, stride), c64(V));
  head = minU(arith::RemUIOp::create(
                  b, loc, arith::SubIOp::create(b, loc, c64(V), phase), c64(V)),
              cols);
  chunks = arith::DivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, cols, head), c64(V));
  partEnd = partChunks = chunks;
  tailStart = add(head, mul(chunks, c64(V)));
}

//===----------------------------------------------------------------------===//
// Loads
//===----------------------------------------------------------------------===//

Chunk MainKernelBuilder::chunkAt(Value k, bool inPart) {
  Chunk chunk;
  Value c = add(mul(k, c64(G)), lane);
  Value end = chunks;
  if (inPart) {
    c = add(c, partBegin);
    end = partEnd;
  }
  chunk.valid = alwaysInPart(k) ? arith::ConstantOp::create(
                                      b, loc, b.getBoolAttr(true))
                                      .getResult()
                                : ult(c, end);
  chunk.width = V;
  if (maskedChunks()) {
    chunk.column = mul(c, c64(V));
    if (peel())
      chunk.column = add(head, chunk.column);
  } else {
    Value last = arith::SubIOp::create(b, loc, end, c64(1));
    chunk.column = mul(minU(c, last), c64(V));
  }
  loadColumnInputs(chunk);
  return chunk;
}

/// The row's head and tail columns (fewer than V each), one per lane, in
/// two slots. One slot for both (lanes [0, head) the head, the next the
/// tail) saves ~15 registers but measured slower on LayerNorm bf16's 3072
/// tier (5000x2999: 60.8 vs 53.8 us; perf-notes, "Tried and refuted").
SmallVector<Chunk> MainKernelBuilder::edgeChunks() {
  SmallVector<Chunk> edges(2);
  edges[0].column = lane;
  edges[0].valid = ult(lane, head);
  edges[1].column = add(tailStart, lane);
  edges[1].valid = ult(edges[1].column, cols);
  for (Chunk &edge : edges)
    loadColumnInputs(edge);
  return edges;
}

void MainKernelBuilder::loadColumnInputs(Chunk &chunk) {
  for (auto [j, in] : llvm::enumerate(colIn)) {
    Type elem = elementTypeOf(op.getCol()[j]);
    if (!peel()) {
      chunk.col.push_back(
          split(loadChunkRaw(chunk, in, elem, chunk.column), chunk.width));
      continue;
    }
    // Indexed by the column alone, so at the row's phase: not aligned.
    SmallVector<Value> vals;
    for (int64_t e = 0; e < chunk.width; ++e)
      vals.push_back(loadMasked(
          chunk.valid, in, elem,
          e == 0 ? chunk.column : add(chunk.column, c64(e)), 1));
    chunk.col.push_back(vals);
  }
}

/// A cluster's parts of a static N that tile the row, and chunk k of every
/// lane inside every part: valid without a compare (one predicate less per
/// owned chunk; the scalar kernels of 32 columns per lane spilled).
bool MainKernelBuilder::alwaysInPart(Value k) const {
  APInt index;
  if (plan.clusterCtas == 1 || !plan.staticCols ||
      !matchPattern(k, m_ConstantInt(&index)))
    return false;
  int64_t total = *plan.staticCols / V;
  int64_t part = (total + plan.clusterCtas - 1) / plan.clusterCtas;
  return part * plan.clusterCtas == total &&
         (index.getSExtValue() + 1) * G <= part;
}

Value MainKernelBuilder::loadMasked(Value valid, Value base, Type elem,
                                    Value index, int64_t count) {
  if (!maskedChunks() || matchPattern(valid, m_One()))
    return loadRaw(base, elem, index, count);
  Type type = count == 1 ? elem : VectorType::get({count}, elem);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{type}, valid,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, loadRaw(base, elem, index, count));
  b.setInsertionPointToStart(ifOp.elseBlock());
  Value zero = arith::ConstantOp::create(
      b, loc, cast<TypedAttr>(b.getZeroAttr(type)));
  scf::YieldOp::create(b, loc, zero);
  return ifOp.getResult(0);
}

ChunkValues MainKernelBuilder::loadFull(const RowState &row,
                                        const Chunk &chunk) {
  ChunkValues vals;
  for (auto [i, in] : llvm::enumerate(fullIn)) {
    Value index = add(mul(row.clamped, strideIn[i]), chunk.column);
    vals.push_back(split(
        loadChunkRaw(chunk, in, elementTypeOf(op.getFull()[i]), index),
        chunk.width));
  }
  return vals;
}

SmallVector<Value> MainKernelBuilder::loadRowInputs(Value rowIndex) {
  SmallVector<Value> vals;
  for (auto [j, in] : llvm::enumerate(rowIn))
    vals.push_back(load(in, elementTypeOf(op.getRow()[j]), rowIndex, 1)[0]);
  return vals;
}

SmallVector<Value> MainKernelBuilder::loadShared(Value index, int64_t count) {
  SmallVector<Value> vals;
  for (int64_t e = 0; e < count; ++e)
    vals.push_back(memref::LoadOp::create(
        b, loc, accSmem, ValueRange{toIndex(add(index, c64(e)))}));
  return vals;
}

void MainKernelBuilder::storeShared(Value index, ValueRange vals) {
  for (auto [e, v] : llvm::enumerate(vals))
    memref::StoreOp::create(b, loc, v, accSmem,
                            ValueRange{toIndex(add(index, c64(e)))});
}

//===----------------------------------------------------------------------===//
// Elementwise part
//===----------------------------------------------------------------------===//

SmallVector<Value>
MainKernelBuilder::regionArgs(const RowState &row,
                              ArrayRef<SmallVector<Value>> fullVals,
                              const Chunk &chunk, int64_t e) {
  SmallVector<Value> args;
  for (const auto &vals : fullVals)
    args.push_back(vals[e]);
  llvm::append_range(args, row.inputs);
  for (const auto &vals : chunk.col)
    args.push_back(vals[e]);
  llvm::append_range(args, row.results);
  return args;
}

MainKernelBuilder::ChunkResults
MainKernelBuilder::computeElementwise(const RowState &row, const Chunk &chunk,
                                      ArrayRef<SmallVector<Value>> vals) {
  ChunkResults results;
  results.outs.resize(fullOut.size());
  results.contribs.resize(numCol);
  for (int64_t e = 0; e < chunk.width; ++e) {
    SmallVector<Value> a = regionArgs(row, vals, chunk, e);
    for (auto [i, v] : llvm::enumerate(inlineRegion(op.getElementwise(), a)))
      results.outs[i].push_back(v);
    for (auto [c, v] : llvm::enumerate(inlineRegion(op.getColumns(), a)))
      results.contribs[c].push_back(toF32(v));
  }
  return results;
}

void MainKernelBuilder::storeFullResults(const RowState &row,
                                         const Chunk &chunk,
                                         ArrayRef<SmallVector<Value>> outs) {
  for (auto [i, out] : llvm::enumerate(fullOut)) {
    Value index = add(mul(row.clamped, strideOut[i]), chunk.column);
    store(out, elementTypeOf(op.getFullResults()[i]), index, outs[i]);
  }
}

//===----------------------------------------------------------------------===//
// Single-launch tail
//===----------------------------------------------------------------------===//

void MainKernelBuilder::emitSingleLaunchTail(gpu::GPUFuncOp func,
                                             Value partialRows) {
  Value on = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, finalize,
                                   c64(0));
  ifThen(on, [&] {
    gridBarrier(barrierWord);
    emitColumnReduction(op, plan.finalThreads(), partial, finalInits,
                        finalOuts, partialRows, cols,
                        func.getWorkgroupAttributions().back(), blockId(),
                        gridDim());
  });
}

//===----------------------------------------------------------------------===//
// Epilogue
//===----------------------------------------------------------------------===//

Value MainKernelBuilder::isThreadZero() {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                               c64(0));
}

void MainKernelBuilder::waitForPhase(Value barrier, Value use) {
  Value parity = arith::TruncIOp::create(
      b, loc, i32, arith::RemUIOp::create(b, loc, use, c64(2)));
  // The suspend-time hint of each try (ns); the op loops until the phase
  // completes.
  Value ticks = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1000000));
  NVVM::MBarrierTryWaitParityOp::create(b, loc, barrier, parity, ticks);
}

void MainKernelBuilder::signalDependents() {
  // At the end, not on entry: signalled on entry, the final kernel's CTAs
  // took the SMs' free slots and waited there for the whole main kernel,
  // 2-3 us slower per call than no dependent launch at all; signalled at
  // the end, its launch overlaps the main kernel's last CTAs (perf-notes,
  // "Dependent final launch").
  if (plan.dependentLaunch)
    NVVM::GriddepcontrolOp::create(
        b, loc, NVVM::GridDepActionKind::launch_dependents);
}
