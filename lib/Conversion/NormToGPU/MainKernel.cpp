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

namespace {
/// The prologue of a main kernel: its arguments, the captured values, its
/// shared memory, and (row-major kernels) its program layout. Each step
/// returns what it sets up; the later steps take it.
class PrologueBuilder : public KernelBuilderBase {
public:
  PrologueBuilder(OpBuilder &b, MixedReductionOp op, const KernelPlan &plan,
                  int64_t vector)
      : KernelBuilderBase(b, op.getLoc()), op(op), plan(plan), V(vector),
        G(plan.threadsPerRow), R(plan.rowsPerCta) {}

  FailureOr<MainKernelPrologue> build(gpu::GPUFuncOp func);

private:
  /// The kernel's arguments by group (in parameter order); the insertion
  /// point goes to the entry block.
  KernelArgs unpackArguments(gpu::GPUFuncOp func,
                             DenseMap<Value, Value> &scalarPointers);
  /// Batched rows: the sample is blockIdx.y; every pointer moves to its
  /// sample's (full tensors by rows x stride, row inputs by rows, column
  /// inputs and the partial buffer by N), and rows is a sample's.
  void offsetToSample(KernelArgs &args);
  /// Clones the captured constants / scalars / sizes to the entry.
  LogicalResult cloneCaptures(const KernelArgs &args,
                              DenseMap<Value, Value> scalarPointers);
  /// The warp slots (static) and the accumulators' view of the dynamic
  /// shared memory (plan.dynamicSharedBytes, as f32).
  SharedViews layoutSharedMemory(gpu::GPUFuncOp func);
  /// lane, group, prog, programs, chunks.
  ProgramLayout computeProgramIds(Value tid, const KernelArgs &args);
  /// The resident kernel: the row's part of the program, the whole row, or
  /// with a cluster the CTA's rank-th part (partBegin, partEnd,
  /// partChunks); progRow and rowPrograms (a cluster is one program).
  ProgramLayout computeRowParts(ProgramLayout layout);
  /// The latency kernel: the grid is one cluster, CTA r owning the r-th
  /// part of every row; its R groups are the programs (rows it + group).
  ProgramLayout computeLatencyParts(ProgramLayout layout);
  /// The looped kernel: plan.columnGroups programs (CTAs) share a row, each
  /// owning a part of its chunks.
  ProgramLayout computeColumnParts(ProgramLayout layout);
  /// iters = ceil(rows / rowPrograms), lastRow.
  ProgramLayout computeRowBounds(ProgramLayout layout, const KernelArgs &args);
  /// Peeled rows: the program's phase, head and whole chunks; lastRow
  /// becomes the program's own last row.
  ProgramLayout computePeel(ProgramLayout layout, const KernelArgs &args);

  MixedReductionOp op;
  const KernelPlan &plan;
  const int64_t V, G, R;
};
} // namespace

FailureOr<MainKernelPrologue> PrologueBuilder::build(gpu::GPUFuncOp func) {
  MainKernelPrologue prologue;
  DenseMap<Value, Value> scalarPointers;
  prologue.args = unpackArguments(func, scalarPointers);
  if (failed(cloneCaptures(prologue.args, std::move(scalarPointers))))
    return failure();
  prologue.shared = layoutSharedMemory(func);
  prologue.tid = threadId();
  if (!plan.stridedRows) {
    ProgramLayout layout = computeProgramIds(prologue.tid, prologue.args);
    layout = plan.latencyKernel() ? computeLatencyParts(layout)
             : plan.resident()       ? computeRowParts(layout)
                                     : computeColumnParts(layout);
    layout = computeRowBounds(layout, prologue.args);
    if (plan.peel && V > 1)
      layout = computePeel(layout, prologue.args);
    prologue.layout = layout;
  }
  prologue.captured = std::move(above);
  return prologue;
}

KernelArgs
PrologueBuilder::unpackArguments(gpu::GPUFuncOp func,
                                 DenseMap<Value, Value> &scalarPointers) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  KernelArgs args;
  SmallVector<Value> scalars, initIn;
  for (auto [group, values] :
       groupArguments(mainKernelParams(op), entry.getArguments())) {
    using K = KernelParam;
    switch (group.kind) {
    case K::FullIn:
      args.fullIn = values;
      break;
    case K::RowIn:
      args.rowIn = values;
      break;
    case K::ColIn:
      args.colIn = values;
      break;
    case K::FullOut:
      args.fullOut = values;
      break;
    case K::Partial:
      args.partial = values[0];
      break;
    case K::Rows:
      args.rows = values[0];
      break;
    case K::Cols:
      args.cols = plan.staticCols ? c64(*plan.staticCols) : values[0];
      break;
    case K::StrideIn:
      args.strideIn = values;
      break;
    case K::StrideOut:
      args.strideOut = values;
      break;
    case K::Scalar: scalars = values; break;
    case K::Barrier:
      args.barrierWord = values[0];
      break;
    case K::InitIn: initIn = values; break;
    case K::ColOut:
      args.finalOuts = values;
      break;
    case K::Finalize:
      args.finalize = values[0];
      break;
    case K::Programs: break;
    }
  }
  for (auto [extract, pointer] : llvm::zip(getCapturedScalars(op), scalars))
    scalarPointers[extract.getResult()] = pointer;
  if (!op.getColResults().empty())
    args.finalInits = columnInits(op, initIn);
  args.partialCols = args.cols;
  if (op.getBatchRank() > 0)
    offsetToSample(args);
  return args;
}

void PrologueBuilder::offsetToSample(KernelArgs &args) {
  Value sample = dim(gpu::BlockIdOp::create(b, loc, gpu::Dimension::y));
  Value samples = dim(gpu::GridDimOp::create(b, loc, gpu::Dimension::y));
  auto offset = [&](Value &pointer, Type elem, Value elements) {
    pointer = LLVM::GEPOp::create(b, loc, ptr, elem, pointer,
                                  ValueRange{mul(sample, elements)});
  };
  for (auto [i, v] : llvm::enumerate(op.getFull()))
    offset(args.fullIn[i], elementTypeOf(v), mul(args.rows, args.strideIn[i]));
  for (auto [i, v] : llvm::enumerate(op.getFullResults()))
    offset(args.fullOut[i], elementTypeOf(v), mul(args.rows, args.strideOut[i]));
  for (auto [i, v] : llvm::enumerate(op.getRow()))
    offset(args.rowIn[i], elementTypeOf(v), args.rows);
  for (auto [i, v] : llvm::enumerate(op.getCol()))
    offset(args.colIn[i], elementTypeOf(v), args.cols);
  offset(args.partial, f32, args.cols);
  args.partialCols = mul(args.cols, samples);
}

LogicalResult
PrologueBuilder::cloneCaptures(const KernelArgs &args,
                               DenseMap<Value, Value> scalarPointers) {
  CaptureSources sources;
  sources.domainRank = op.getDomainShape().size();
  sources.colsDim = op.getNDimIndex();
  sources.rows = args.rows;
  sources.cols = args.cols;
  sources.scalarPointers = std::move(scalarPointers);
  if (failed(cloneCapturedValues(op, sources)) ||
      failed(cloneEpilogueCaptures(op, sources)))
    return failure();
  return success();
}

SharedViews PrologueBuilder::layoutSharedMemory(gpu::GPUFuncOp func) {
  SharedViews shared;
  if (G > 32)
    shared.warpSlots = func.getWorkgroupAttributions().front();
  if (plan.dynamicSharedBytes == 0)
    return shared;
  Attribute workgroup = gpu::AddressSpaceAttr::get(
      b.getContext(), gpu::AddressSpace::Workgroup);
  Value bytes = gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                      MemRefLayoutAttrInterface{}, workgroup));
  Value zeroIdx = arith::ConstantIndexOp::create(b, loc, 0);
  Value count =
      arith::ConstantIndexOp::create(b, loc, plan.dynamicSharedBytes / 4);
  shared.accumulators = memref::ViewOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, f32, MemRefLayoutAttrInterface{},
                      workgroup),
      bytes, zeroIdx, ValueRange{count});
  return shared;
}

ProgramLayout PrologueBuilder::computeProgramIds(Value tid,
                                                 const KernelArgs &args) {
  ProgramLayout layout;
  layout.lane = arith::RemUIOp::create(b, loc, tid, c64(G));
  layout.group = arith::DivUIOp::create(b, loc, tid, c64(G));
  layout.prog = add(mul(blockId(), c64(R)), layout.group);
  layout.programs = mul(gridDim(), c64(R));
  layout.chunks = arith::DivUIOp::create(b, loc, args.cols, c64(V));
  return layout;
}

ProgramLayout PrologueBuilder::computeRowParts(ProgramLayout layout) {
  int64_t C = plan.clusterCtas;
  if (C == 1) {
    layout.progRow = layout.prog;
    layout.rowPrograms = layout.programs;
    layout.partEnd = layout.partChunks = layout.chunks;
    return layout;
  }
  // Clusters are C consecutive CTAs of the 1-D grid (R = 1).
  layout.clusterRank = arith::RemUIOp::create(b, loc, blockId(), c64(C));
  layout.prog = layout.progRow =
      arith::DivUIOp::create(b, loc, blockId(), c64(C));
  layout.programs = layout.rowPrograms =
      arith::DivUIOp::create(b, loc, gridDim(), c64(C));
  layout.partChunks = arith::CeilDivUIOp::create(b, loc, layout.chunks, c64(C));
  layout.partBegin = mul(layout.clusterRank, layout.partChunks);
  layout.partEnd =
      minU(add(layout.partBegin, layout.partChunks), layout.chunks);
  return layout;
}

ProgramLayout PrologueBuilder::computeLatencyParts(ProgramLayout layout) {
  int64_t C = plan.clusterCtas;
  layout.clusterRank = blockId();
  layout.prog = layout.progRow = layout.group;
  layout.programs = layout.rowPrograms = c64(R);
  layout.partChunks = arith::CeilDivUIOp::create(b, loc, layout.chunks, c64(C));
  layout.partBegin = mul(layout.clusterRank, layout.partChunks);
  layout.partEnd =
      minU(add(layout.partBegin, layout.partChunks), layout.chunks);
  return layout;
}

ProgramLayout PrologueBuilder::computeColumnParts(ProgramLayout layout) {
  // A compile-time constant: at run time it costs ~35 registers (and a CTA
  // per SM).
  Value colGroups = c64(plan.columnGroups);
  layout.progRow = arith::DivUIOp::create(b, loc, layout.prog, colGroups);
  layout.rowPrograms =
      arith::DivUIOp::create(b, loc, layout.programs, colGroups);
  layout.partChunks =
      arith::CeilDivUIOp::create(b, loc, layout.chunks, colGroups);
  layout.partBegin = mul(arith::RemUIOp::create(b, loc, layout.prog, colGroups),
                         layout.partChunks);
  layout.partEnd =
      minU(add(layout.partBegin, layout.partChunks), layout.chunks);
  return layout;
}

ProgramLayout PrologueBuilder::computeRowBounds(ProgramLayout layout,
                                                const KernelArgs &args) {
  layout.iters =
      arith::CeilDivUIOp::create(b, loc, args.rows, layout.rowPrograms);
  layout.lastRow = arith::SubIOp::create(b, loc, args.rows, c64(1));
  return layout;
}

/// Rows that need not start on a 16-byte boundary (odd N, a tier's N):
/// every row of the program starts at the same phase, because the launcher
/// makes rowPrograms x the rows' stride a multiple of V (or gives each
/// program one row). The phase is its last row's: masked rows load that row
/// instead of rows - 1, so that their loads stay aligned too (a program
/// without rows takes row 0). Its lanes take the head's columns [0, head),
/// then whole chunks from `head` on, then the tail's columns.
ProgramLayout PrologueBuilder::computePeel(ProgramLayout layout,
                                           const KernelArgs &args) {
  Value has = ult(layout.progRow, args.rows);
  Value ownRows = arith::DivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, layout.lastRow, layout.progRow),
      layout.rowPrograms);
  layout.lastRow = arith::SelectOp::create(
      b, loc, has, add(layout.progRow, mul(ownRows, layout.rowPrograms)),
      c64(0));
  // Every full input and result has the same phase (the launcher checks
  // that their strides agree modulo V); the first input's stride stands
  // for them.
  Value stride = args.strideIn.empty() ? args.cols : args.strideIn.front();
  Value phase =
      arith::RemUIOp::create(b, loc, mul(layout.lastRow, stride), c64(V));
  layout.head =
      minU(arith::RemUIOp::create(
               b, loc, arith::SubIOp::create(b, loc, c64(V), phase), c64(V)),
           args.cols);
  layout.chunks = arith::DivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, args.cols, layout.head), c64(V));
  layout.partEnd = layout.partChunks = layout.chunks;
  layout.tailStart = add(layout.head, mul(layout.chunks, c64(V)));
  return layout;
}

//===----------------------------------------------------------------------===//
// The builders
//===----------------------------------------------------------------------===//

static int64_t maxRowResults(MixedReductionOp op) {
  int64_t most = 1;
  for (Region &stage : op.getRowStages())
    most = std::max<int64_t>(most,
                             stage.front().getTerminator()->getNumOperands());
  return most;
}

MainKernelBuilder::MainKernelBuilder(OpBuilder &b, MixedReductionOp op,
                                     const KernelPlan &plan, int64_t vector,
                                     gpu::GPUFuncOp func,
                                     MainKernelPrologue prologue)
    : KernelBuilderBase(b, op.getLoc(), std::move(prologue.captured)), op(op),
      plan(plan), func(func), V(vector), G(plan.threadsPerRow),
      R(plan.rowsPerCta), numCol(op.getColResults().size()),
      maxSums(maxRowResults(op)),
      clusterSetsPerStage(plan.clusterSumsAhead ? 4 : 2),
      args(std::move(prologue.args)), shared(prologue.shared),
      tid(prologue.tid), layout(prologue.layout), zero64(c64(0)),
      one64(c64(1)),
      cluster(plan.clusterCtas > 1 && !plan.latencyKernel()
                  ? declareClusterSlots()
                  : ClusterSlots()) {}

FailureOr<std::unique_ptr<MainKernelBuilder>>
mlir::norm::makeMainKernelBuilder(OpBuilder &b, MixedReductionOp op,
                                  const KernelPlan &plan, int64_t vector,
                                  gpu::GPUFuncOp func) {
  FailureOr<MainKernelPrologue> prologue =
      PrologueBuilder(b, op, plan, vector).build(func);
  if (failed(prologue))
    return failure();
  std::unique_ptr<MainKernelBuilder> builder;
  if (plan.stridedRows)
    builder = std::make_unique<StridedKernelBuilder>(b, op, plan, vector, func,
                                                     std::move(*prologue));
  else if (plan.latencyKernel())
    builder = std::make_unique<LatencyKernelBuilder>(b, op, plan, vector, func,
                                                     std::move(*prologue));
  else if (plan.resident())
    builder = std::make_unique<ResidentKernelBuilder>(b, op, plan, vector, func,
                                                      std::move(*prologue));
  else
    builder = std::make_unique<LoopedKernelBuilder>(b, op, plan, vector, func,
                                                    std::move(*prologue));
  return builder;
}

SmallVector<Type> mlir::norm::mainKernelParameterTypes(MixedReductionOp op) {
  return kernelParameterTypes(op.getContext(), mainKernelParams(op));
}

//===----------------------------------------------------------------------===//
// Loads
//===----------------------------------------------------------------------===//

Chunk MainKernelBuilder::chunkAt(Value k, bool inPart) {
  Chunk chunk;
  Value c = add(mul(k, c64(G)), layout.lane);
  Value end = layout.chunks;
  if (inPart) {
    c = add(c, layout.partBegin);
    end = layout.partEnd;
  }
  chunk.valid = alwaysInPart(k) ? arith::ConstantOp::create(
                                      b, loc, b.getBoolAttr(true))
                                      .getResult()
                                : ult(c, end);
  chunk.width = V;
  if (maskedChunks()) {
    chunk.column = mul(c, c64(V));
    if (peel())
      chunk.column = add(layout.head, chunk.column);
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
  edges[0].column = layout.lane;
  edges[0].valid = ult(layout.lane, layout.head);
  edges[1].column = add(layout.tailStart, layout.lane);
  edges[1].valid = ult(edges[1].column, args.cols);
  for (Chunk &edge : edges)
    loadColumnInputs(edge);
  return edges;
}

void MainKernelBuilder::loadColumnInputs(Chunk &chunk) {
  for (auto [j, in] : llvm::enumerate(args.colIn)) {
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
  for (auto [i, in] : llvm::enumerate(args.fullIn)) {
    Value index = add(mul(row.clamped, args.strideIn[i]), chunk.column);
    vals.push_back(split(
        loadChunkRaw(chunk, in, elementTypeOf(op.getFull()[i]), index),
        chunk.width));
  }
  return vals;
}

SmallVector<Value> MainKernelBuilder::loadRowInputs(Value rowIndex) {
  SmallVector<Value> vals;
  for (auto [j, in] : llvm::enumerate(args.rowIn))
    vals.push_back(load(in, elementTypeOf(op.getRow()[j]), rowIndex, 1)[0]);
  return vals;
}

SmallVector<Value> MainKernelBuilder::loadShared(Value index, int64_t count) {
  SmallVector<Value> vals;
  for (int64_t e = 0; e < count; ++e)
    vals.push_back(memref::LoadOp::create(
        b, loc, shared.accumulators, ValueRange{toIndex(add(index, c64(e)))}));
  return vals;
}

void MainKernelBuilder::storeShared(Value index, ValueRange vals) {
  for (auto [e, v] : llvm::enumerate(vals))
    memref::StoreOp::create(b, loc, v, shared.accumulators,
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
  results.outs.resize(args.fullOut.size());
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
  for (auto [i, out] : llvm::enumerate(args.fullOut)) {
    Value index = add(mul(row.clamped, args.strideOut[i]), chunk.column);
    store(out, elementTypeOf(op.getFullResults()[i]), index, outs[i]);
  }
}

//===----------------------------------------------------------------------===//
// Single-launch tail
//===----------------------------------------------------------------------===//

void MainKernelBuilder::emitSingleLaunchTail(Value partialRows) {
  Value on = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                   args.finalize, c64(0));
  ifThen(on, [&] {
    gridBarrier(args.barrierWord);
    emitColumnReduction(op, plan.finalThreads(), args.partial, args.finalInits,
                        args.finalOuts, partialRows, args.cols,
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
