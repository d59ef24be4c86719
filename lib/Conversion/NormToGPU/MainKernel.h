//===- MainKernel.h - The kernels of one norm.mixed_reduction ---*- C++ -*-===//
//
// Part of norm-opt. The main kernel is the persistent row loop of
// --norm-partial-accumulate mapped onto the GPU (docs/gpu.md):
//
//   prog = block_id * R + lane / G;  P = grid_dim * R
//   for it in [0, ceil(M / P)):          // the same trip count for every
//     row = it * P + prog                // lane, so shuffles and barriers
//     (masked rows load row M-1;         // never diverge
//      their stores and contributions are dropped)
//     row stages: per-lane f32 sums -> shuffle-xor butterfly -> shared
//                 memory across warps -> every lane holds the row result
//     elementwise: results stored with 16-byte stores; column
//                  contributions into fp32 accumulators
//   the accumulators -> the fp32 partial buffer [C, P, N]
//
// Two builders share the steps of MainKernelBuilder:
//   ResidentKernelBuilder (ResidentKernel.cpp): a lane keeps its K chunks
//     of the row in registers; row loading is plain, a register prefetch
//     of the next row, or a cp.async ring in shared memory.
//   LoopedKernelBuilder (LoopedKernel.cpp): rows too long for registers;
//     loops over the row per stage, accumulators in shared memory or the
//     partial buffer, column groups (CTAs per row).
// The final kernel (FinalKernelBuilder, ColumnReduction.cpp) reduces the
// partial buffer when the main kernel does not (two-launch path).
//
//===----------------------------------------------------------------------===//

#ifndef NORM_LIB_CONVERSION_NORMTOGPU_MAINKERNEL_H
#define NORM_LIB_CONVERSION_NORMTOGPU_MAINKERNEL_H

#include "KernelBuilder.h"

#include <memory>

namespace mlir::norm {

/// Chunk k of a lane: `width` consecutive columns of the row (the kernel's
/// vector width; 1 for a peeled row's head and tail columns).
struct Chunk {
  Value valid;  // the chunk lies inside the row (or the program's part)
  Value column; // its first column (clamped into the row; see maskedChunks)
  SmallVector<SmallVector<Value>> col; // column inputs: [input][element]
  int64_t width = 1;
};

/// The full inputs of one chunk: [full input][element].
using ChunkValues = SmallVector<SmallVector<Value>>;

/// What the steps of one row iteration share.
struct RowState {
  Value iteration;               // it
  Value row;                     // it * rowPrograms + progRow
  Value valid;                   // row < rows
  Value clamped;                 // min(row, rows - 1)
  SmallVector<Value> inputs;     // the row inputs (mean, rstd)
  SmallVector<Value> results;    // the row stages' results so far
  Value staged; // the looped kernel's bulk ring: the row's stage (!ptr<3>)
};

/// The main kernel's arguments, by parameter group (unpackArguments).
struct KernelArgs {
  SmallVector<Value> fullIn, rowIn, colIn, fullOut, strideIn, strideOut;
  Value partial, rows, cols;
  // Floats from one partial row to the next: N, or batch x N for batched
  // rows ([C, P, batch x N]: each sample's N columns side by side, so the
  // final kernel reduces batch x N columns as one row).
  Value partialCols;
  // The single-launch tail's (with column results): the grid barrier's
  // word, the column inits (null where constant) and outputs, whether to
  // run it.
  Value barrierWord, finalize;
  SmallVector<Value> finalInits, finalOuts;
};

/// The main kernel's shared memory (layoutSharedMemory).
struct SharedViews {
  Value warpSlots;    // G > 32: the row sums' per-warp slots (static)
  Value accumulators; // the dynamic shared memory as f32, if any
};

/// Which rows and columns the thread's program takes: the prologue of a
/// row-major kernel (computeProgramIds, then computeRowParts or
/// computeColumnParts, computeRowBounds, computePeel), each step taking the
/// layout so far. The strided kernel lays out its own (StridedLayout).
struct ProgramLayout {
  // lane in [0, G), group (program of the CTA), prog of programs; chunks:
  // the whole chunks of the row (N / V, after a peeled head).
  Value lane, group, prog, programs, chunks;
  // Rows go to rowPrograms programs (a cluster's CTAs, or the column
  // groups of a looped row, are one), progRow being the thread's; its
  // program owns the chunks [partBegin, partEnd) of the row.
  Value progRow, rowPrograms, partBegin, partEnd, partChunks;
  Value clusterRank;     // cluster: the CTA's rank in it
  Value iters, lastRow;  // ceil(rows / rowPrograms); the last row to load
  Value head, tailStart; // peeled rows: head columns, the tail's first
};

/// What the prologue of a main kernel sets up (makeMainKernelBuilder).
struct MainKernelPrologue {
  KernelArgs args;
  IRMapping captured; // the values from above the op, cloned at the entry
  SharedViews shared;
  Value tid;
  ProgramLayout layout; // row-major kernels
};

/// The cluster's row-sum slots and the mbarriers of their sets
/// (declareClusterSlots).
struct ClusterSlots {
  Value sums, barriers; // !llvm.ptr<3>
};

/// Shared steps of the resident, looped and strided main kernels. A builder
/// is made at the kernel's entry, after the prologue (makeMainKernelBuilder);
/// its members are the kernel's context and what the prologue set up, all
/// fixed from then on. Its own setup (e.g. the cluster's slots, the resident
/// kernel's owned chunks) is made by the constructors in the order of the
/// members; build() writes the rest of the body, passing values between its
/// steps.
class MainKernelBuilder : public KernelBuilderBase {
public:
  MainKernelBuilder(OpBuilder &b, MixedReductionOp op, const KernelPlan &plan,
                    int64_t vector, gpu::GPUFuncOp func,
                    MainKernelPrologue prologue);
  virtual ~MainKernelBuilder() = default;

  /// Writes the rest of the kernel's body.
  virtual void build() = 0;

protected:
  /// The vector kernel of a plan.peel (not its scalar fallback).
  bool peel() const { return plan.peel && V > 1; }

  /// The last step, with a dependent final kernel (plan.dependentLaunch):
  /// lets it be scheduled (griddepcontrol.launch_dependents) once every CTA
  /// has written its partial rows; it still waits for this grid to finish
  /// before it reads (FinalKernelBuilder).
  void signalDependents();

  /// tid == 0.
  Value isThreadZero();
  /// Every thread waits until phase `use` of the mbarrier completes
  /// (parity use % 2).
  void waitForPhase(Value barrier, Value use);

  //===--------------------------------------------------------------===//
  // Loads
  //===--------------------------------------------------------------===//
  /// Chunk k of the lane (its column inputs loaded): of the whole row, or
  /// of the program's column part (looped variant with column groups).
  Chunk chunkAt(Value k, bool inPart = false);
  /// Peeled rows: the lane's column of the head (before the first whole
  /// chunk) and of the tail (after the last); masked past their ends.
  SmallVector<Chunk> edgeChunks();
  bool alwaysInPart(Value k) const;
  ChunkValues loadFull(const RowState &row, const Chunk &chunk);
  /// A resident tier's kernels take a run-time N up to the plan's, and a
  /// cluster's CTAs own parts that start at a run-time offset (the rank's):
  /// a chunk past the row (or part) keeps its own column, and its loads are
  /// skipped (zeros) instead of re-reading the last chunk. A clamped column
  /// would be a run-time value per chunk, live across the row loop (the
  /// scalar kernels spilled); this one is the lane's column plus a constant.
  bool maskedChunks() const {
    return plan.cols > 0 || plan.clusterCtas > 1 || peel();
  }
  /// The raw access of `chunk` at base[index]: zeros for a masked chunk
  /// past the row.
  Value loadChunkRaw(const Chunk &chunk, Value base, Type elem, Value index) {
    return loadMasked(chunk.valid, base, elem, index, chunk.width);
  }
  /// `count` elements at base[index], or zeros where `valid` is false
  /// (unless the chunks are never masked).
  Value loadMasked(Value valid, Value base, Type elem, Value index,
                   int64_t count);
  /// The column inputs of a chunk: 16-byte loads, or one element at a time
  /// where the chunk's columns are not 16-byte aligned (peeled rows).
  void loadColumnInputs(Chunk &chunk);
  SmallVector<Value> loadRowInputs(Value rowIndex);

  //===--------------------------------------------------------------===//
  // Row reductions (RowReduction.cpp)
  //===--------------------------------------------------------------===//
  /// Adds the contributions of `chunk` to the stage's per-lane sums
  /// (reduce within the thread).
  void accumulateStage(Region &stage, const RowState &row, const Chunk &chunk,
                       ArrayRef<SmallVector<Value>> vals,
                       SmallVector<Value> &sums);
  /// The lanes' sums -> the row's: reduceWithinWarp, then
  /// reduceAcrossWarps; appended (narrowed) to row.results.
  void finishStage(Region &stage, SmallVector<Value> sums, RowState &row);
  /// Butterfly (shuffle xor) inside the warp: every lane ends with the
  /// same sum, in a fixed order.
  void reduceWithinWarp(SmallVector<Value> &sums);
  /// reduceWithinWarp, then reduceAcrossWarps (G > 32): every lane of the
  /// program holds its sums.
  void reduceWithinProgram(SmallVector<Value> &sums);
  /// The warps of a row (G > 32): lane 0 of each writes the program's
  /// slots, every lane reads its program's slots in warp order.
  void reduceAcrossWarps(SmallVector<Value> &sums);
  /// The CTAs of a cluster (plan.clusterCtas > 1): each pushes its part's
  /// sums into every CTA's slots (st.async into distributed shared memory,
  /// completing on their mbarriers); every thread waits on its CTA's and
  /// adds the slots in rank order.
  void reduceAcrossCluster(SmallVector<Value> &sums, Value iteration,
                           int64_t stageIndex);
  /// reduceAcrossCluster's halves, on the slot set of a row stage's use
  /// `use` (its row's iteration; clusterSetOf) and its mbarrier: the push
  /// of this CTA's sums, and the wait for the C CTAs' sums, added in rank
  /// order.
  void pushClusterSums(ArrayRef<Value> sums, Value set, Value barrier);
  SmallVector<Value> collectClusterSums(unsigned count, Value use, Value set,
                                        Value barrier, int64_t stageIndex);
  /// The slot set of a use: [use % clusterSetsPerStage][row stage].
  Value clusterSetOf(Value use, int64_t stageIndex);
  /// Slot j of rank `rank` in set `set`.
  Value clusterSlot(Value set, Value rank, unsigned j);
  /// The static shared arrays of the cluster's slots and mbarriers
  /// (reduceAcrossCluster); thread 0 initialises the mbarriers, then the
  /// CTA arrives at a cluster barrier that waitForClusterSlots completes
  /// (before the row loop).
  ClusterSlots declareClusterSlots();
  void waitForClusterSlots();
  /// The mbarrier of slot set `set` ([row parity][row stage]) in
  /// `barriers` (cluster.barriers).
  Value clusterBarrierAt(Value set) {
    return clusterBarrierAt(cluster.barriers, set);
  }
  Value clusterBarrierAt(Value barriers, Value set);
  /// Thread 0: the next phase of a set's mbarrier expects the C CTAs'
  /// sums of its row stage (bytes), with this CTA's one arrival.
  void armClusterSet(Value barrier, int64_t stageIndex);
  /// A kernel-private array of `count` f32 in static shared memory, named
  /// after the kernel plus `suffix`; its address.
  Value sharedF32Array(StringRef suffix, int64_t count);
  /// A cluster barrier (arrive with release, wait with acquire).
  void clusterBarrier();

  //===--------------------------------------------------------------===//
  // Elementwise part and column contributions (MainKernel.cpp)
  //===--------------------------------------------------------------===//
  struct ChunkResults {
    SmallVector<SmallVector<Value>> outs;     // [full result][element]
    SmallVector<SmallVector<Value>> contribs; // [column result][element]
  };
  /// The elementwise and column regions at every element of the chunk.
  ChunkResults computeElementwise(const RowState &row, const Chunk &chunk,
                                  ArrayRef<SmallVector<Value>> vals);
  /// rowValid && chunk.valid: the chunk's stores and contributions count.
  Value isLive(const RowState &row, const Chunk &chunk) {
    return arith::AndIOp::create(b, loc, row.valid, chunk.valid);
  }
  void storeFullResults(const RowState &row, const Chunk &chunk,
                        ArrayRef<SmallVector<Value>> outs);
  /// Region arguments at element e: full, row, col inputs, row results.
  SmallVector<Value> regionArgs(const RowState &row,
                                ArrayRef<SmallVector<Value>> fullVals,
                                const Chunk &chunk, int64_t e);

  //===--------------------------------------------------------------===//
  // Epilogue
  //===--------------------------------------------------------------===//
  /// Index of (column result c, column) in the program's partial row.
  Value partialIndex(unsigned c, Value column) {
    return add(mul(add(mul(c64(c), layout.rowPrograms), layout.progRow),
                   args.partialCols),
               column);
  }
  /// Single launch: once every CTA's partial row is written (grid
  /// barrier), the CTAs reduce the partial buffer in the final kernel's
  /// fixed order. `partialRows`: rows of the partial buffer.
  void emitSingleLaunchTail(Value partialRows);

  /// Shared-memory accumulators (f32 view of the dynamic shared memory).
  SmallVector<Value> loadShared(Value index, int64_t count);
  void storeShared(Value index, ValueRange vals);
  Value select(Value cond, Value v) {
    return arith::SelectOp::create(b, loc, cond, v, zeroF32());
  }

  // The kernel and its plan.
  MixedReductionOp op;
  const KernelPlan &plan;
  gpu::GPUFuncOp func;
  const int64_t V, G, R;
  const unsigned numCol;
  const int64_t maxSums; // row results per stage, at most
  // cluster: slot sets per row stage, used in turn by consecutive rows (4
  // with the sums a row ahead, see ResidentKernelBuilder::rowLoopSumsAhead)
  const int64_t clusterSetsPerStage;
  // What the prologue set up.
  const KernelArgs args;
  const SharedViews shared;
  const Value tid;
  const ProgramLayout layout;
  const Value zero64, one64;  // loop bounds and steps
  const ClusterSlots cluster; // plan.clusterCtas > 1
};

/// A lane keeps its K chunks of the row in registers (ResidentKernel.cpp).
class ResidentKernelBuilder : public MainKernelBuilder {
public:
  /// `plan`: the kernel's own (mainKernelPlan).
  ResidentKernelBuilder(OpBuilder &b, MixedReductionOp op,
                        const KernelPlan &plan, int64_t vector,
                        gpu::GPUFuncOp func, MainKernelPrologue prologue);
  void build() override;

private:
  /// The lane's chunks of the row: K whole ones, then a peeled row's head
  /// and tail; their column inputs loaded once.
  struct OwnedChunks {
    SmallVector<Chunk> chunks;
    SmallVector<int64_t> offset; // of each one's first accumulator column
    int64_t width = 0;           // columns of them all
  };
  OwnedChunks ownChunks();
  /// The chunks whose raw accesses are carried one row ahead through the
  /// loop: all of them with the register prefetch; with the cp.async ring
  /// the peeled head and tail (too narrow for cp.async); else none.
  bool carried(int64_t k) const {
    return prefetch || (stages > 0 && k >= K);
  }
  // Row loading: plain loads, a register prefetch of the next row, or the
  // cp.async ring (plan.asyncStages) at ringBase() in the dynamic shared
  // memory.
  Value ringBase();
  void startAsyncRing();
  /// The ring's stage of row iteration `it` (it mod S).
  Value ringStage(Value it);
  /// Row it + S - 1's copies into the stage row it - 1 used.
  void refillRing(const RowState &row);
  void issueAsyncCopies(Value rowIndex, Value stage);
  Value asyncSlot(Value stage, int64_t k, int64_t i);
  /// plan.ringRowInputs: the row inputs (mean, rstd) ride the ring: lane 0
  /// of each warp copies its row's into the warp's slots with the row's
  /// full inputs, and the warp reads them back after the row's copies
  /// landed (perf-notes, "Row inputs ahead").
  bool rowInputsInRing() const { return plan.ringRowInputs; }
  struct RowInputSlots {
    Value slots; // [stage][warp][row input] f32, shared
    Value warpInCta, isWarpLeader;
  };
  RowInputSlots declareRowInputSlots();
  Value rowInputSlot(Value stage, int64_t j);
  void issueRowInputCopies(Value rowIndex, Value stage);
  SmallVector<Value> readRowInputSlots(Value stage);
  SmallVector<Value> loadRawRow(Value rowIndex);  // of the carried chunks
  SmallVector<ChunkValues> loadRow(const RowState &row, ValueRange current);
  void reduceRowStages(RowState &row, ArrayRef<ChunkValues> fullVals);
  /// A row stage's sums within the thread, over its owned chunks.
  SmallVector<Value> laneSums(Region &stage, const RowState &row,
                              ArrayRef<ChunkValues> fullVals);
  /// Cluster rows with one row stage and the ring: the row loop with row
  /// it + 1's sums pushed before row it's are awaited.
  bool sumsAhead() const { return plan.clusterSumsAhead; }
  scf::ForOp rowLoopHeld(ValueRange accInit, bool inRing);
  scf::ForOp rowLoopSumsAhead(ValueRange accInit);
  /// Row it's sums within the CTA (from the ring), pushed to the cluster.
  void pushRowSums(Value it);
  RowState rowAt(Value it);
  void finishChunks(const RowState &row, ArrayRef<ChunkValues> fullVals,
                    SmallVector<Value> &accs);
  // Partials: combined in the CTA, or one partial row per program.
  void combinePartialsInCTA(scf::ForOp rowLoop);
  void writePartials(scf::ForOp rowLoop);
  /// Accumulator (column result c, owned chunk k, element e): [c][column].
  int64_t accumulatorIndex(unsigned c, int64_t k, int64_t e) const {
    return c * owned.width + owned.offset[k] + e;
  }
  Value accumulator(scf::ForOp rowLoop, unsigned c, int64_t k, int64_t e) {
    return rowLoop.getResult(accumulatorIndex(c, k, e));
  }

  // How the kernel loads its rows, as its plan says.
  const int64_t K;      // whole chunks per lane (then the peeled edges)
  const int64_t stages; // rows of the cp.async ring (0: none)
  const bool prefetch;  // the register prefetch of the next row
  // The rest of the prologue, made in this order.
  const OwnedChunks owned;
  const RowInputSlots rowInputs; // rowInputsInRing()
  const Value ring;              // stages > 0: !llvm.ptr<3>
};

/// Small calls in one cluster (LatencyKernel.cpp): CTA r owns the r-th
/// part of every row; each row stage is a pass over the rows whose sums
/// the cluster adds in rank order, then a pass for the full results and
/// the column sums, which the CTA finishes itself.
class LatencyKernelBuilder : public MainKernelBuilder {
public:
  LatencyKernelBuilder(OpBuilder &b, MixedReductionOp op,
                       const KernelPlan &plan, int64_t vector,
                       gpu::GPUFuncOp func, MainKernelPrologue prologue);
  void build() override;

private:
  /// The static shared arrays of the row sums: this CTA's part of each
  /// row's sums of one stage, [row][maxSums], which its peers read; the
  /// totals of every stage, [row][total sums].
  struct RowSumArrays {
    Value parts, totals; // !llvm.ptr<3>
  };
  RowSumArrays declareRowSumArrays();
  /// The rows of unrolled step `step` (iterations step x U + u): their
  /// state, with the row inputs and the totals of the first `stages` row
  /// stages (withTotals); and their full inputs, [u][chunk].
  SmallVector<RowState> rowsOfStep(Value step, int64_t stages);
  RowState withTotals(RowState row, int64_t stages);
  SmallVector<SmallVector<ChunkValues>>
  loadRows(ArrayRef<RowState> rows);
  /// Every call's rows in one step (ceil(latency_rows / R) <= U): the
  /// thread's rows are loaded once, before the first pass, and held.
  bool oneStep() const {
    return static_cast<int64_t>(llvm::divideCeil(plan.latencyRows, R)) <= U;
  }
  struct HeldRows {
    SmallVector<RowState> rows;
    SmallVector<SmallVector<ChunkValues>> vals;
  };
  /// A pass over the rows: `body(rows, values, carried)` per unrolled
  /// step (or once on `held`), returning the new carried values.
  using StepBody = function_ref<SmallVector<Value>(
      ArrayRef<RowState>, ArrayRef<SmallVector<ChunkValues>>, ValueRange)>;
  SmallVector<Value> passOverRows(int64_t stages, ValueRange init,
                                  StepBody body, const HeldRows *held);
  /// Row stage `s`: the CTA's part of each row's sums into `parts`.
  void rowSumsPass(int64_t s, const HeldRows *held);
  /// After a cluster barrier: the totals of stage `s` (sums from `offset`
  /// on) of every row, the C CTAs' parts added in rank order.
  void addClusterParts(int64_t s, int64_t offset);
  /// Slot j of `row` in an array of `width` f32 per row: the parts
  /// ([row][maxSums]) or the totals ([row][totalsWidth()]).
  Value slotOf(Value array, int64_t width, Value row, Value j);
  Value partSlot(Value row, Value j) {
    return slotOf(arrays.parts, maxSums, row, j);
  }
  Value totalSlot(Value row, Value j) {
    return slotOf(arrays.totals, totalsWidth(), row, j);
  }
  int64_t totalsWidth() const { return std::max<int64_t>(totalSums, 1); }
  /// vals[0] + vals[1] + ... in that order (rank or group order).
  Value addInOrder(ArrayRef<Value> vals);
  /// The full results, and the column contributions summed per thread
  /// (the accumulators, [column result][owned column]).
  SmallVector<Value> elementwisePass(const HeldRows *held);
  /// The groups' accumulators added in group order in shared memory, then
  /// each of the CTA's part's columns finished (storeColumnResult).
  void finishColumns(ValueRange accs);

  const int64_t K, U; // chunks per lane; rows per unrolled step
  int64_t totalSums = 0;
  SmallVector<int64_t> stageOffsets; // a stage's first total
  SmallVector<Chunk> owned;
  int64_t ownedWidth = 0;
  const RowSumArrays arrays;
};

/// Rows too long for registers (LoopedKernel.cpp).
class LoopedKernelBuilder : public MainKernelBuilder {
public:
  /// `plan`: the kernel's own (mainKernelPlan).
  LoopedKernelBuilder(OpBuilder &b, MixedReductionOp op, const KernelPlan &plan,
                      int64_t vector, gpu::GPUFuncOp func,
                      MainKernelPrologue prologue);
  void build() override;

private:
  /// The loops over a row: chunks per lane at run time (over the whole row
  /// for the row sums, over the program's part for the rest), and the
  /// part's columns that the shared-memory accumulators hold.
  struct RowLoops {
    Value loopedChunks, partLoopedChunks;
    Value partCols, partFirstCol;
  };
  RowLoops computeRowLoops();
  /// The bulk ring (plan.bulkStages): its base in the dynamic shared
  /// memory, and a stage's layout (one row of every full input).
  struct BulkRing {
    Value base; // !llvm.ptr<3>
    int64_t stageBytes = 0;
    SmallVector<int64_t> inputOffsets;
  };
  BulkRing declareBulkRing();
  void zeroAccumulators();
  void reduceRowStages(RowState &row);
  void finishRow(const RowState &row);
  void accumulateColumns(const Chunk &chunk,
                         ArrayRef<SmallVector<Value>> contribs);
  void copySharedAccumulators();
  // The bulk ring (plan.bulkStages).
  void startBulkRing();
  void issueBulkRow(Value j);
  /// The row's stage, once it has landed.
  Value stageRow(Value it);
  ChunkValues loadRowChunk(const RowState &row, const Chunk &chunk);
  void fenceProxyAsyncShared();
  Value bulkAt(Value byteOffset);
  Value bulkBarrier(Value stage);
  /// Index of (column result c, column) in the shared accumulators of the
  /// program's part.
  Value sharedIndex(unsigned c, Value column) {
    return add(mul(c64(c), loops.partCols),
               arith::SubIOp::create(b, loc, column, loops.partFirstCol));
  }

  const int64_t unroll;     // chunks per loop iteration
  const int64_t bulkStages; // rows of the bulk ring (0: none)
  // The rest of the prologue, made in this order.
  const RowLoops loops;
  const BulkRing bulk;
};

/// A channels-first domain (N not the last dim; StridedKernel.cpp): a lane
/// per row walks N; a CTA holds R groups of W warps, each group's warps
/// split the columns of its tile. Workgroup buffers: the row-sum slots
/// [group][sum][warp][32], the column accumulators [group][C][N].
class StridedKernelBuilder : public MainKernelBuilder {
public:
  StridedKernelBuilder(OpBuilder &b, MixedReductionOp op,
                       const KernelPlan &plan, int64_t vector,
                       gpu::GPUFuncOp func, MainKernelPrologue prologue);
  void build() override;

private:
  /// The thread's place: its lane in its warp, its group of W warps, its
  /// warp in the group; I (elements between columns) and N x I.
  struct StridedLayout {
    Value laneInWarp, group, warp;
    Value inner, rowStride;
  };
  StridedLayout computeStridedLayout();
  /// The lane's V rows of a tile: the offset of (first row, column 0), and
  /// whether they are rows of the domain.
  struct TileRows {
    Value base, valid;
  };
  /// Columns first + u * W (u < the unroll) of the lane's rows: loaded
  /// together (clamped into the row; `valid` says which count).
  struct Columns {
    Value first;
    SmallVector<Value> valid, column;
    SmallVector<SmallVector<SmallVector<Value>>> full; // [u][input][row]
    SmallVector<SmallVector<Value>> col;               // [u][input]
  };
  /// `body(index)` for the thread's share of [0, groups x C x N).
  void sweepAccumulators(int64_t groups, function_ref<void(Value)> body);
  /// Tile `index` (32 x V rows).
  void processTile(Value index);
  scf::ForOp columnLoop(ValueRange init);
  Columns loadColumns(const TileRows &tile, Value first);
  /// Region arguments of the lane's row v at column u.
  SmallVector<Value> argsAt(const RowState &row, const Columns &c, int64_t u,
                            int64_t v);
  /// `lanes`: the state of each of the lane's V rows; `held`: the warp's
  /// columns, loaded once (else each pass loops over them, loading).
  SmallVector<Value> stageSums(Region &stage, const TileRows &tile,
                               ArrayRef<RowState> lanes, const Columns *held);
  void reduceStage(Region &stage, const TileRows &tile,
                   MutableArrayRef<RowState> lanes, const Columns *held);
  void columnPass(const TileRows &tile, ArrayRef<RowState> lanes,
                  const Columns *held);
  /// dx and the column sums of the columns `c`.
  void finishColumns(const TileRows &tile, ArrayRef<RowState> lanes,
                     const Columns &c);
  /// contribs[u x numCol + k] (column first + u x W, sum k) over the warp,
  /// into the group's accumulators.
  void addColumnSums(ArrayRef<Value> contribs, Value first);
  /// Up to 32 f32 values summed over the warp's lanes: (a value's total,
  /// its index, whether this lane is the one of its lanes to use it).
  std::tuple<Value, Value, Value>
  reduceScatterWithinWarp(SmallVector<Value> values);
  void writePartialRow();
  /// Columns per loop iteration of a warp.
  int64_t unroll() const;
  /// Synchronises the W warps of the thread's group.
  void groupBarrier();

  const int64_t W; // warps of a group, splitting N
  const StridedLayout strided;
};

/// Parameters of a main kernel: full inputs, row inputs, col inputs, full
/// results, partial, rows, cols, one row stride per full input then full
/// result, the captured scalars, then (with column results) the
/// single-launch tail's: barrier word, non-constant inits, column outputs,
/// finalize.
SmallVector<Type> mainKernelParameterTypes(MixedReductionOp op);

/// Writes the prologue of the main kernel `func` for `plan` (its own,
/// mainKernelPlan) and makes the builder of the rest; fails (with an error)
/// where the payloads capture what a kernel cannot.
FailureOr<std::unique_ptr<MainKernelBuilder>>
makeMainKernelBuilder(OpBuilder &b, MixedReductionOp op, const KernelPlan &plan,
                      int64_t vector, gpu::GPUFuncOp func);

/// The final kernel: partial [C, P, N] -> column results, in a fixed order
/// (the two-launch path, when a cooperative launch is not available).
class FinalKernelBuilder : public KernelBuilderBase {
public:
  /// `waitForMain`: the final kernel is a programmatic dependent launch
  /// (KernelPlan::dependentLaunch) and first waits for the main kernel.
  FinalKernelBuilder(OpBuilder &b, MixedReductionOp op, int64_t threads,
                     bool waitForMain)
      : KernelBuilderBase(b, op.getLoc()), op(op), threads(threads),
        waitForMain(waitForMain) {}

  /// Parameters: partial, the non-constant inits, the outputs, P, cols.
  SmallVector<Type> parameterTypes();
  LogicalResult build(gpu::GPUFuncOp func);

private:
  MixedReductionOp op;
  const int64_t threads;
  const bool waitForMain;
};

} // namespace mlir::norm

#endif // NORM_LIB_CONVERSION_NORMTOGPU_MAINKERNEL_H
