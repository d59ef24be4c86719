//===- KernelPlan.cpp - Kernel shape heuristic for norm.mixed_reduction ---===//
//
// Part of norm-opt.
//
// The shape follows from two budgets: 16-byte accesses (the vector width is
// 16 bytes of the widest element type), and registers. A lane keeps, per
// column it owns, the full inputs it loaded (to reuse them between the row
// reductions and the elementwise pass), the column inputs (weight) and one
// fp32 accumulator per column result. The smallest power-of-two group of
// lanes whose per-lane share fits the register budget is the row's group;
// rows too long for any group up to 1024 lanes take the looped variant.
//
//===----------------------------------------------------------------------===//

#include "norm/Conversion/NormToGPU.h"
#include "norm/Conversion/GpuOptions.h"

#include "DomainPlans.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <functional>

#include <algorithm>

using namespace mlir;
using namespace mlir::norm;

int64_t mlir::norm::elementBytes(Type t) {
  return std::max<int64_t>(1, getElementTypeOrSelf(t).getIntOrFloatBitWidth() /
                                  8);
}

int64_t mlir::norm::widestElementBytes(ValueRange values) {
  int64_t widest = 1;
  for (Value v : values)
    widest = std::max(widest, elementBytes(v.getType()));
  return widest;
}

int64_t mlir::norm::maxAccumulatorSharedBytes(const GpuTarget &target) {
  return std::min<int64_t>(160 * 1024, target.sharedBytesPerBlock - 3 * 1024);
}

int64_t mlir::norm::maxDynamicSharedBytes(const GpuTarget &target) {
  return target.sharedBytesPerBlock - 3 * 1024;
}

int64_t mlir::norm::loopedSharedBytes(const GpuTarget &target) {
  return std::min<int64_t>(100 * 1024,
                           target.sharedBytesPerSM / 2 - 14 * 1024);
}

namespace {
/// Short rows take at least this many lanes (when they have as many
/// chunks): fewer columns per lane, fewer registers, more warps per SM.
/// Measured (perf-notes, "Lanes per row"): 262144 x 64 at 8 lanes (1 chunk
/// each) runs 1.0-1.2x faster than at 2 lanes (4 chunks each), without the
/// ring.
constexpr int64_t kMinLanesPerRow = 8;
/// Lanes of one CTA's part of a row shared by a cluster, at most.
constexpr int64_t kMaxClusterLanes = 256;
/// The same for 16-bit vector rows (longRowsInClusters; the scalar kernel
/// of odd N keeps kMaxClusterLanes): parts of 128 lanes, two CTAs per SM,
/// so that one CTA's row goes on while the other waits at its cluster
/// barrier (perf-notes, "Cluster rows": LayerNorm bf16 1024x32768 128.6 us
/// in parts of 256 lanes, one CTA per SM; 116.4 in parts of 128).
constexpr int64_t kMaxClusterLanes16 = 128;
/// The cp.async ring of a cluster's part, at most (perf-notes, "cp.async
/// ring": 2 stages 111.9 us, 3 stages 116.4 at LayerNorm bf16 1024x32768).
constexpr int64_t kMaxClusterAsyncStages = 2;
/// 16-bit vector rows whose full inputs take at least this many bytes
/// take a cluster plan even where the looped kernel's bulk ring holds them
/// (longRowsInClusters): with the row sums stored into every CTA's shared
/// memory (no cluster barrier per row; LayerNorm's a row ahead), clusters
/// of 128-lane parts beat the ring's two or three stages of such rows
/// (perf-notes, "Cluster rows"): N = 16384, LayerNorm bf16 2048x16384
/// 105.5 -> 100.8 us, RMSNorm 256x16384 27.4 -> 24.0; N = 12288 (48 KiB),
/// RMSNorm 4096x12288 124.2 -> 117.5 us, LayerNorm (sums ahead) 130.9 ->
/// 122.2, both faster at 256-8192 rows.
constexpr int64_t kClusterOverBulkRowBytes = 48 * 1024;
/// Cluster plans whose one row stage yields two sums or more (LayerNorm's
/// sum(dy w x-hat), sum(dy w)) push row it + 1's sums before they wait for
/// row it's, with a ring of this many rows (rows it and it + 1 held while
/// it + 2 lands): LayerNorm bf16 1024x32768 94.8 -> 87.3 us, 2048x16384
/// 98.2 -> 87.2; RMSNorm's one sum was 2-4.5% slower (perf-notes,
/// "Cluster rows").
constexpr int64_t kClusterSumsAheadStages = 3;
/// The cp.async ring only for rows of at least this many lanes.
constexpr int64_t kMinRingLanes = 16;

/// The register estimate's error against ptxas at 8-16 columns per lane
/// (+-10 registers; perf-notes, "Register prefetch"): a register count
/// within this factor of the share that fits two CTAs per SM may be
/// either side of it.
constexpr double kRegisterEstimateSlack = 9.0 / 8.0;

/// planKernel's steps, in order; each fills its fields of `plan`.
class KernelPlanner {
public:
  KernelPlanner(MixedReductionOp op, const KernelPlanOptions &options,
                const GpuTarget &target)
      : op(op), options(options), target(target),
        batched(op.getBatchRank() > 0) {}

  KernelPlan run() {
    if (std::optional<SlabDomain> slab = op.getSlabDomain())
      return planSlabRows(op, *slab, options, target);
    if (!op.isRowMajor())
      return planStridedRows(op, options);
    int64_t n = op.getDomainShape().back();
    if (!ShapedType::isDynamic(n))
      return withLatencyKernels(planFor(n, /*tier=*/false));
    KernelPlan looped = planFor(std::nullopt, /*tier=*/false);
    looped.tiers = planTiers(looped.vector);
    return looped;
  }

private:
  /// The plan for rows of `n` columns (nullopt: a run-time N, nothing
  /// known); a tier's kernels take n at run time (up to it). Rows that
  /// need not start on a 16-byte boundary take the peeled vector kernel
  /// where its plan is one it can run (pickPeel), else the scalar kernel.
  KernelPlan planFor(std::optional<int64_t> n, bool tier) {
    KernelPlan peeled = planWith(n, tier, options.peelRows && !batched);
    if (!peeled.peel || peelable(peeled))
      return longRowsInClusters(peeled);
    return longRowsInClusters(planWith(n, tier, /*peel=*/false));
  }
  /// Small calls of a static N (issue 44): the latency kernels, one
  /// cluster of up to latency-ctas CTAs (a power of two, at most the
  /// row's chunks, so every CTA owns a part), for calls of at most
  /// latency-max-rows rows and kLatencyChunkRows / (a CTA's chunks of a
  /// row) rows, as many as the static arrays of row sums hold. Its 16 SMs
  /// issue every instruction of the call (ncu, LayerNorm bf16 2048x1024:
  /// 39 per element, 7.8 cycles per issue, 41 us), so it wins only where
  /// the persistent grid's fixed costs dominate: few rows, a short part
  /// per CTA (H200, LayerNorm bf16: 1x8192 24.3 -> 8.4 us, 8x4096 12.3 ->
  /// 7.5, 7x4099 16.5 -> 8.2; 4x17389's 1087 chunks per CTA lost; more
  /// rows per call cost the smallest calls their unroll: perf-notes,
  /// "Latency kernels").
  KernelPlan withLatencyKernels(KernelPlan plan) {
    if (!clustersAvailable() || options.latencyCTAs < 2 ||
        options.latencyMaxRows <= 0 || !plan.staticCols ||
        *plan.staticCols <= 0)
      return plan;
    int64_t n = *plan.staticCols;
    // The chunks of the `_latency` kernel where N has one, else the
    // scalar kernel's columns.
    int64_t fewestChunks =
        plan.vector > 1 && n % plan.vector == 0 ? n / plan.vector : n;
    int64_t ctas = options.latencyCTAs;
    while (ctas > fewestChunks)
      ctas /= 2;
    if (ctas < 2)
      return plan;
    int64_t maxSums = 1, totalSums = 0;
    for (Region &stage : op.getRowStages()) {
      int64_t sums = stage.front().getTerminator()->getNumOperands();
      maxSums = std::max(maxSums, sums);
      totalSums += sums;
    }
    int64_t partChunks = llvm::divideCeil(fewestChunks, ctas);
    int64_t rows = std::min({options.latencyMaxRows,
                             kLatencyChunkRows / partChunks,
                             kLatencySlotBytes / (4 * (maxSums + totalSums))});
    if (rows < 1)
      return plan;
    KernelPlan latency = plan;
    latency.latencyCtas = ctas;
    latency.latencyRows = rows;
    // Every latency kernel's part within its lanes' columns and its column
    // sums within the shared memory.
    for (const MainKernel &kernel : mainKernels(latency, "")) {
      if (!kernel.latency)
        continue;
      KernelPlan k = latencyKernelPlan(op, latency, kernel.vector);
      if (k.chunksPerThread * k.vector > kLatencyMaxColumns ||
          k.dynamicSharedBytes > maxAccumulatorSharedBytes(target))
        return plan;
    }
    return latency;
  }
  /// 16-bit vector rows stay looped (pickCluster) while the looped kernel
  /// stages whole rows of under kClusterOverBulkRowBytes in its bulk ring;
  /// longer rows (N = 32768: two
  /// stages do not fit beside the accumulators) re-read each row from
  /// global memory, at 0.54-0.67 of the floor, and take a cluster of
  /// narrow parts instead where one holds the row with at most a tenth of
  /// its lanes' chunks idle: 0.59-0.72 at N = 32768 and 24576 (no idle
  /// chunk); at N = 20000 (19% idle) RMSNorm was 14% slower than looped
  /// (perf-notes, "Cluster rows").
  KernelPlan longRowsInClusters(KernelPlan looped) {
    if (looped.resident() || looped.vector == 1 || widest >= 4 ||
        !looped.staticCols || !clustersAvailable())
      return looped;
    if (looped.bulkStages > 0 &&
        fullRowBytes(*looped.staticCols) < kClusterOverBulkRowBytes)
      return looped;
    clusters16 = true;
    KernelPlan clustered = planWith(looped.staticCols, /*tier=*/false,
                                    /*allowPeel=*/false);
    clusters16 = false;
    int64_t slots = clustered.clusterCtas * clustered.threadsPerRow *
                    clustered.chunksPerThread * clustered.vector;
    bool filled = 10 * *looped.staticCols >= 9 * slots;
    return clustered.clusterCtas > 1 && filled ? clustered : looped;
  }
  /// The row inputs (if any) can ride the cp.async ring (pickAsyncRing):
  /// rows of more than 32 lanes, row inputs of 4 bytes.
  bool rowInputsFitRing() const {
    return plan.threadsPerRow > 32 &&
           llvm::all_of(op.getRow(), [](Value in) {
             Type elem = cast<ShapedType>(in.getType()).getElementType();
             return elem.getIntOrFloatBitWidth() == 32;
           });
  }
  /// A cluster plan may take the row sums a row ahead
  /// (kClusterSumsAheadStages): one row stage of two sums or more, its row
  /// inputs in the ring.
  bool clusterSumsAheadFits() const {
    return op.getRowStages().size() == 1 &&
           op.getRowStages().front().front().getTerminator()->getNumOperands() >=
               2 &&
           rowInputsFitRing();
  }
  /// Thread-block clusters on the chip, and st.async in the PTX version.
  bool clustersAvailable() const {
    return !batched && target.hasClusters &&
           ptxVersionOf(options.features, target) >= kClusterMinPTXVersion;
  }
  /// The bytes of one row of every full input.
  int64_t fullRowBytes(int64_t n) {
    int64_t bytes = 0;
    for (Value v : op.getFull())
      bytes += elementBytes(v.getType()) * n;
    return bytes;
  }
  KernelPlan planWith(std::optional<int64_t> n, bool tier, bool allowPeel) {
    plan = KernelPlan();
    cols = n;
    if (tier)
      plan.cols = *n;
    else
      plan.staticCols = n;
    pickVectorWidth(allowPeel);
    pickRowGroup();
    pickCluster();
    pickRowsPerCTA();
    pickSharedAccumulators();
    pickAsyncRing();
    pickBulkRing();
    pickLaunch();
    return plan;
  }
  std::vector<KernelPlan> planTiers(int64_t vector);
  /// The peeled kernel is a resident one of one CTA per row, with a lane
  /// per head and tail column (both < vector).
  static bool peelable(const KernelPlan &p) {
    return p.resident() && p.clusterCtas == 1 && p.threadsPerRow >= p.vector;
  }
  /// Chunks of `vector` columns that cover the row (the peeled kernel's
  /// whole chunks are at most this many).
  int64_t rowChunks() const {
    return (*cols + plan.vector - 1) / plan.vector;
  }
  void pickVectorWidth(bool allowPeel);
  void pickRowGroup();
  void pickCluster();
  void pickRowsPerCTA();
  void pickSharedAccumulators();
  void pickAsyncRing();
  void pickBulkRing();
  void pickLaunch();
  int64_t registersFor(int64_t columnsPerLane) const;
  /// Whether `r` programs' partial rows (static N or a tier's, with column
  /// results) fit shared memory, so that the CTA adds them.
  bool partialsCombineInCTA(int64_t r) const {
    int64_t numCol = op.getColResults().size();
    return cols && numCol > 0 &&
           r * numCol * *cols * 4 <= maxAccumulatorSharedBytes(target);
  }
  double prefetchRegistersPerColumn() const;
  int64_t registerBudget(int64_t group) const;
  bool prefetchCostsACta(int64_t without, int64_t with, int64_t group) const;

  mutable MixedReductionOp op; // its accessors are not const
  const KernelPlanOptions &options;
  const GpuTarget &target;
  // Batched rows (adaLN): a sample per blockIdx.y, its pointers offset at
  // the kernels' entry. Not with what reads rows across samples or lays
  // out a program's rows by phase: the single launch's grid barrier (it
  // would count every sample's CTAs), clusters, split kernels and peeled
  // rows (a sample's first row need not be at the base's phase).
  const bool batched;
  KernelPlan plan;
  std::optional<int64_t> cols; // N the plan is sized for (static or a tier's)
  int64_t widest = 1; // bytes of the widest full element type
  bool clusters16 = false; // longRowsInClusters: 16-bit rows in clusters
};
} // namespace

/// 32-bit registers per owned column: ptxas keeps the loaded values as
/// f32 once converted (whatever their storage type), one accumulator per
/// column result, and about one f32 intermediate (x-hat) between the row
/// sums and the elementwise pass. Checked against ptxas -v in
/// docs/perf-notes.md, "Register estimate and grid" (within ~5% for
/// LayerNorm/RMSNorm at 32 columns).
int64_t KernelPlanner::registersFor(int64_t columnsPerLane) const {
  double perColumn = op.getFull().size() + op.getCol().size() +
                     op.getColResults().size() + 1;
  const int64_t overhead = 40;
  return overhead + static_cast<int64_t>(perColumn * columnsPerLane);
}

/// The prefetched next row: its raw (packed) accesses, per column.
double KernelPlanner::prefetchRegistersPerColumn() const {
  double perColumn = 0;
  for (Value v : op.getFull())
    perColumn += elementBytes(v.getType()) / 4.0;
  return perColumn;
}

/// A CTA of `group` lanes (or 256 when rows share a CTA) and at least one
/// CTA per SM within the register file (64K); at most 255 per lane.
int64_t KernelPlanner::registerBudget(int64_t group) const {
  int64_t block = std::max<int64_t>(group, 256);
  return std::min<int64_t>(target.registersPerThread,
                           target.registersPerSM / block);
}

/// Rows that share a CTA (<= 64 lanes, 256 threads): whether the register
/// prefetch is what keeps a second CTA off the SM: without it the estimate
/// fits two CTAs' share of the register file (up to its slack), with it
/// it is past that. Their row loop then runs better on the second CTA's
/// warps than on the prefetch (H200, LayerNorm bf16 131072x128: 160
/// registers, one CTA per SM, 41.9 us; without the prefetch 126 and two,
/// 38.3; RMSNorm's 128 fit two either way and keep it, 35.3 against
/// 36.7). Not for a row per CTA: 29x17389's cluster parts need their
/// prefetch (perf-notes, "Cluster rows"), and a run-time N's tiers keep one
/// row per CTA ("Rows per CTA").
bool KernelPlanner::prefetchCostsACta(int64_t without, int64_t with,
                                      int64_t group) const {
  if (group > 64 || plan.cols)
    return false;
  double twoCtas =
      double(target.registersPerSM) / (2 * 256) * kRegisterEstimateSlack;
  return without <= twoCtas && with > twoCtas;
}

/// V: 16 bytes of the widest full element type. Rows that need not start
/// on a 16-byte boundary (a static N not a multiple of V; any N of a tier)
/// peel where allowed, else a static N not a multiple of V takes the
/// scalar kernel only.
void KernelPlanner::pickVectorWidth(bool allowPeel) {
  widest = std::max(widestElementBytes(op.getFull()),
                    widestElementBytes(op.getFullResults()));
  int64_t vectorBytes = std::clamp<int64_t>(options.vectorBytes, widest, 16);
  plan.vector = std::max<int64_t>(1, vectorBytes / widest);
  bool misaligned = cols && (*cols % plan.vector != 0 || plan.cols);
  if (misaligned && allowPeel && plan.vector > 1)
    plan.peel = true;
  else if (cols && *cols % plan.vector != 0)
    plan.vector = 1; // the scalar kernel is the only one
}

/// G and K: the smallest power-of-two group of lanes, of at least
/// kMinLanesPerRow unless the row has fewer chunks, whose share of the row
/// fits the registers; else the looped variant (512 lanes).
void KernelPlanner::pickRowGroup() {
  // With a cluster, a CTA's part of the row.
  int64_t chunks =
      cols ? (rowChunks() + plan.clusterCtas - 1) / plan.clusterCtas : -1;
  int64_t maxResident = options.maxResidentElements;
  plan.chunksPerThread = 0;
  if (chunks > 0) {
    // A cluster's parts take at most kMaxClusterLanes lanes: above, the
    // scalar kernel (odd N) spills under the 128-register cap of 512 lanes.
    int64_t maxLanes = plan.clusterCtas == 1 ? target.maxThreadsPerBlock
                       : clusters16         ? kMaxClusterLanes16
                                            : kMaxClusterLanes;
    for (int64_t g = 1; g <= maxLanes; g *= 2) {
      if (options.threadsPerRow ? g != options.threadsPerRow
                                : g < kMinLanesPerRow && g < chunks)
        continue;
      int64_t k = (chunks + g - 1) / g;
      int64_t columns = k * plan.vector;
      // Up to 32 columns per lane keeps registers low enough for several
      // CTAs per SM; only the widest group of one CTA may go past that.
      bool fits = maxResident ? columns <= maxResident
                              : registersFor(columns) <= registerBudget(g) &&
                                    (columns <= 32 ||
                                     (g == maxLanes && plan.clusterCtas == 1) ||
                                     options.threadsPerRow);
      if (fits) {
        plan.threadsPerRow = g;
        plan.chunksPerThread = k;
        plan.estimatedRegisters = registersFor(columns);
        int64_t withPrefetch = plan.estimatedRegisters +
                               static_cast<int64_t>(prefetchRegistersPerColumn() *
                                                    columns);
        plan.prefetch = options.prefetch && withPrefetch <= registerBudget(g) &&
                        !prefetchCostsACta(plan.estimatedRegisters,
                                           withPrefetch, g);
        // The scalar fallback keeps a register per prefetched element
        // (RMSNorm bf16 4096 at 2 rows per CTA spilled 88 bytes with it).
        plan.scalarPrefetch =
            plan.prefetch &&
            (plan.vector == 1 ||
             plan.estimatedRegisters +
                     static_cast<int64_t>(op.getFull().size()) * columns <=
                 registerBudget(g));
        if (plan.prefetch)
          plan.estimatedRegisters = withPrefetch;
        break;
      }
    }
  }
  if (!plan.resident()) {
    plan.threadsPerRow = options.threadsPerRow ? options.threadsPerRow : 512;
    plan.estimatedRegisters = 64;
  }
}

/// A static N that no single CTA holds in registers (the looped variant
/// re-reads such rows, perf-notes, "Resident vs looped rows"): the fewest
/// CTAs of a cluster, up to max-cluster-ctas, whose parts of the row fit
/// one CTA's registers each.
/// Every CTA must own a part (N of at least C chunks' worth).
/// Not for 16-bit rows of the vector kernel while the looped kernel's bulk
/// ring holds them (longRowsInClusters): those were measured faster than
/// a cluster's one CTA per SM that waits for the row sums of its peers at
/// every row (perf-notes, "Cluster rows": 2048 x 16384 110 vs 124 us; as
/// fast as parts of 128 lanes); 32-bit rows and the scalar kernel (odd N)
/// gain (0.60-0.85 -> 0.85-0.94 of the floor; 29 x 17389 18 -> 15 us).
void KernelPlanner::pickCluster() {
  if (plan.resident() || !cols || plan.cols || !clustersAvailable() ||
      options.rowsPerCTA > 1 ||
      (widest < 4 && plan.vector > 1 && !clusters16))
    return;
  int64_t chunks = rowChunks();
  for (int64_t c = 2; c <= options.maxClusterCTAs; c *= 2) {
    int64_t part = (chunks + c - 1) / c;
    if (part * (c - 1) >= chunks)
      break;
    plan.clusterCtas = c;
    pickRowGroup();
    if (plan.resident())
      return;
  }
  plan.clusterCtas = 1;
  pickRowGroup();
}

void KernelPlanner::pickRowsPerCTA() {
  // Rows of at most 128 lanes: several programs (rows) per CTA of 256
  // threads, so that the CTA can add their partials (P = CTAs). Every lane
  // runs the same number of row iterations and reductions, so the barriers
  // of the cross-warp step stay uniform across the CTA's programs.
  // At 128 lanes only when the CTA can add them (its partial rows fit
  // shared memory): one 256-thread CTA per SM instead of two of 128 halves
  // P, the partial buffer written and read again and the final
  // reduction's rows per column; measured (perf-notes, "Rows per CTA")
  // 1.5-7.7% faster (LayerNorm bf16 5000x3000 52.9 -> 49.1 us). Not for a
  // run-time N's tiers: their masked scalar kernels, at 255 registers with
  // 128 threads, spilled 52-312 bytes with 256 (5000x2999 with N dynamic:
  // 61 -> 109 us).
  // rows-per-cta is the resident variant's: a looped row (its shared
  // accumulators are the CTA's) and a cluster's row parts take one row per
  // CTA whatever it asks (with two, the looped 1024x32768 read out of
  // bounds on the H200).
  if (!plan.resident() || plan.clusterCtas > 1)
    plan.rowsPerCta = 1;
  else if (options.rowsPerCTA)
    plan.rowsPerCta = options.rowsPerCTA;
  else if (plan.threadsPerRow <= 64)
    plan.rowsPerCta = std::max<int64_t>(1, 256 / plan.threadsPerRow);
  else if (plan.threadsPerRow == 128 && !plan.cols &&
           partialsCombineInCTA(2))
    plan.rowsPerCta = 2;
  else
    plan.rowsPerCta = 1;
}

void KernelPlanner::pickSharedAccumulators() {
  // A looped plan takes at least one CTA per row (more below where its
  // accumulators need them); a resident plan has no column groups.
  plan.columnGroups = plan.resident() ? 0 : 1;
  // Shared-memory accumulators where they fit (static N or a tier's N).
  int64_t numCol = op.getColResults().size();
  if (cols && numCol > 0) {
    int64_t row = numCol * *cols * 4;
    if (plan.resident() && plan.rowsPerCta > 1 &&
        partialsCombineInCTA(plan.rowsPerCta)) {
      plan.combineInCta = true;
      plan.dynamicSharedBytes = plan.rowsPerCta * row;
    } else if (!plan.resident()) {
      // The looped variant keeps its part of the row's accumulators in
      // shared memory: the fewest column groups (CTAs per row) whose part
      // fits. 16-bit rows of up to 16384 columns aim at two CTAs per SM
      // (so one CTA's loads overlap the other's reductions): parts of at
      // most 100 KiB and a 64-register cap (LayerNorm bf16 2048x16384:
      // 127 -> 107 us). Elsewhere the cap spills and the extra column
      // groups re-read rows: measured slower (perf-notes, "Resident vs
      // looped rows").
      const int64_t twoPerSMBytes = loopedSharedBytes(target);
      bool twoPerSM = widest < 4 && *cols <= 16384 &&
                      row <= 2 * twoPerSMBytes;
      int64_t budget = twoPerSM ? twoPerSMBytes : maxAccumulatorSharedBytes(target);
      int64_t groups = (row + budget - 1) / budget;
      if (groups >= 1 && groups <= kMaxColumnGroups) { // N = 0: none
        plan.twoCtasPerSm = twoPerSM;
        int64_t chunks = *cols / plan.vector;
        int64_t partChunks = (chunks + groups - 1) / groups;
        plan.columnGroups = groups;
        plan.sharedAccumulators = true;
        plan.dynamicSharedBytes = numCol * partChunks * plan.vector * 4;
        // Few rows (29 x 17389): more CTAs per row, so the dx pass and the
        // column sums spread over more SMs (the row sums are repeated).
        if (kSplitColumnGroups > groups && !batched) {
          int64_t splitChunks =
              (chunks + kSplitColumnGroups - 1) / kSplitColumnGroups;
          plan.splitColumnGroups = kSplitColumnGroups;
          plan.splitSharedBytes = numCol * splitChunks * plan.vector * 4;
        }
      }
    }
  }
}

void KernelPlanner::pickAsyncRing() {
  // The cp.async ring of the resident vector kernel: the deepest ring up to
  // the requested stages that fits beside the accumulators; it replaces the
  // register prefetch (the loads in flight then cost no registers).
  // Measured (perf-notes, "cp.async ring"): a gain for rows of 16-32 lanes
  // (several rows per CTA, memory latency bound) and, for 16-bit rows,
  // wherever the register prefetch does not fit (LayerNorm, N >= 2048:
  // +9-12%) and on rows of >= 256 lanes (RMSNorm 16384x5120: 193 vs 201
  // us). Where the prefetch fits on rows of 64-128 lanes of one row per
  // CTA it was faster (H100, RMSNorm 4096: 83 vs 91 us); 32-bit rows have
  // twice the copies per lane and lose 2-8% with the ring.
  // Rows of fewer than kMinRingLanes lanes (32 and more rows per CTA: N <=
  // 128 at 16 bits) load faster without it (131072 x 128 and 262144 x 64
  // take 1.4-2.2x longer with the ring).
  // A cluster's part counts as a wide row (RMSNorm bf16 1024x32768 in
  // parts of 128 lanes 95.5 -> 94.0 us with the ring, 4096x32768 329.7 ->
  // 322.8).
  bool wideRow = plan.threadsPerRow >= 256 || plan.clusterCtas > 1;
  // 16-bit rows of 64 lanes (four to a CTA, as a run-time N's tier of
  // them) take the ring over the prefetch too (H200, perf-notes, "Ring for
  // rows that share a CTA"): N = 1152 and 1536 (3 chunks a lane) 11-14%
  // faster (LayerNorm bf16 65536x1152 148.4 -> 133.6 us, adaLN bf16
  // 32x1024x1152 86.0 -> 75.0), RMSNorm N = 2048 3%; calls of at most a
  // CTA row per SM (256-1024 rows of 2048) lose 0.2-0.8 us to the ring's
  // start. Not at 128 lanes (two rows per CTA, a tier's one): 4096 gained
  // 2-3%, 3000 lost 1-7%.
  bool sharedCta = plan.rowsPerCta > 1 && plan.threadsPerRow <= 64;
  if (target.hasAsyncCopy && plan.resident() && plan.vector > 1 &&
      options.asyncStages >= 2 && plan.threadsPerRow >= kMinRingLanes &&
      (plan.threadsPerRow <= 32 ||
       (widest < 4 && (!plan.prefetch || wideRow || sharedCta)))) {
    int64_t offset = (plan.dynamicSharedBytes + 15) / 16 * 16;
    int64_t perStage = plan.chunksPerThread * op.getFull().size() * 16 *
                       plan.block();
    int64_t clusterMost = clusterSumsAheadFits() ? kClusterSumsAheadStages
                                                 : kMaxClusterAsyncStages;
    int64_t most = plan.clusterCtas > 1
                       ? std::min(options.asyncStages, clusterMost)
                       : options.asyncStages;
    for (int64_t s = most; s >= 2; --s) {
      if (offset + s * perStage > maxAccumulatorSharedBytes(target))
        continue;
      plan.asyncStages = s;
      plan.asyncRingOffset = offset;
      plan.dynamicSharedBytes = offset + s * perStage;
      // The row inputs ride the ring too where a row spans several warps:
      // carried a row ahead in a register, their load is issued late in
      // the row (ptxas, at ~250 registers) and waited for at the loop's
      // back edge (ncu: 18% of LayerNorm 8192x2048's stall samples).
      // Measured (perf-notes, "Row inputs ahead"): LayerNorm 8192x2048
      // 50.8 -> 46.5 us, 16384x5120 199.6 -> 190.0; on rows of <= 32
      // lanes (many rows per CTA) the copies and warp syncs cost more
      // (32768x1024 80.4 -> 85.4). cp.async copies 4 bytes at least.
      plan.ringRowInputs = !op.getRow().empty() && rowInputsFitRing();
      if (plan.prefetch)
        plan.estimatedRegisters -= static_cast<int64_t>(
            prefetchRegistersPerColumn() * plan.chunksPerThread * plan.vector);
      plan.prefetch = plan.scalarPrefetch = false;
      plan.clusterSumsAhead = plan.clusterCtas > 1 &&
                              s >= kClusterSumsAheadStages &&
                              clusterSumsAheadFits();
      break;
    }
  }
}

void KernelPlanner::pickBulkRing() {
  // The looped kernels read a row from global memory once per pass (the
  // row sums, then the elementwise pass and the column sums; with column
  // groups every CTA of the row repeats the row sums), with a memory
  // latency at the top of each loop: ncu of LayerNorm bf16 2048x16384
  // (perf-notes, "Bulk ring") put them at 61% of DRAM bandwidth, 36% of
  // the stall cycles on L1TEX scoreboard. Staged whole in shared memory by
  // one thread's bulk copies, `bulkStages - 1` rows ahead, a row is read
  // from global memory once per CTA and both passes read shared memory.
  // One CTA per SM (the stages take most of it): no two-CTA cap.
  // Needs 16-byte aligned rows of a static N (16-byte chunks of every full
  // input: the launcher checks the pointers and strides to them) and a
  // multiple of 16 bytes per row (cp.async.bulk's size).
  if (!target.hasBulkCopy || plan.resident() || !plan.staticCols ||
      plan.vector == 1 || plan.rowsPerCta != 1 || options.bulkStages < 2)
    return;
  if (llvm::any_of(op.getFull(), [&](Value v) {
        return elementBytes(v.getType()) * plan.vector != 16;
      }))
    return;
  int64_t perStage = fullRowBytes(*cols);
  int64_t offset = (plan.dynamicSharedBytes + 15) / 16 * 16;
  for (int64_t s = options.bulkStages; s >= 2; --s) {
    int64_t bytes = offset + s * (perStage + kBulkBarrierBytes);
    if (bytes > maxDynamicSharedBytes(target))
      continue;
    plan.bulkStages = s;
    plan.bulkRingOffset = offset;
    plan.dynamicSharedBytes = bytes;
    plan.twoCtasPerSm = false;
    return;
  }
}

void KernelPlanner::pickLaunch() {
  // 0: the launcher fills every SM with as many CTAs as the driver's
  // occupancy calculator allows (it knows the real register count).
  plan.programsPerSm = options.programsPerSM;
  // One launch when there are column results to finish and the block can
  // hold the final reduction's 32-column tiles.
  // Only for the resident variant: measured on the H100, the looped
  // kernels run slower with the tail: without the bulk ring it costs them
  // their second CTA per SM; with it (one CTA per SM anyway) 0-7% slower
  // all the same (perf-notes, "Single launch", "Tried and refuted").
  // Clusters take two launches: a cooperative launch of clustered kernels
  // is not one the runtime makes.
  plan.singleLaunch = options.singleLaunch && plan.resident() &&
                      plan.clusterCtas == 1 && !batched &&
                      !op.getColResults().empty() &&
                      plan.block() % kFinalColumnsPerCTA == 0;
  // The split kernels (few rows) could finish in one launch too, but
  // measured no faster (29x17389: 18.4 vs 18.0 us, perf-notes, "Split
  // kernels"): their tail is latency-bound over few partial rows; they take
  // two launches.
  // Where two launches are made, the final kernel's launch overlaps the
  // main kernel (programmatic dependent launch, sm_90+; perf-notes,
  // "Dependent final launch").
  plan.dependentLaunch = options.dependentLaunch &&
                         target.hasDependentLaunch &&
                         !op.getColResults().empty();
}

/// Resident tiers for a run-time N: the plans for a static N of m, 1.5m,
/// 2m, 3m, 4m, ... (m = tier-min-cols), while the resident variant holds
/// such rows. For 16-bit rows these are the N at which the resident plan
/// changes (G lanes of K = 3 or 4 chunks), so a run-time N gets the kernel
/// of the next such N up: at most a third of its lanes' chunks idle
/// (e.g. 2999 takes the plan of 3072, the one a static 2999 gets).
std::vector<KernelPlan> KernelPlanner::planTiers(int64_t vector) {
  std::vector<KernelPlan> tiers;
  if (options.tierMinCols <= 0)
    return tiers;
  for (int64_t m = options.tierMinCols; m <= kMaxTierColsLimit; m *= 2)
    for (int64_t n : {m, m + m / 2}) {
      if (n > kMaxTierColsLimit)
        return tiers;
      if (n % vector != 0) // the tier's vector kernel must be the plan's
        continue;
      KernelPlan tier = planFor(n, /*tier=*/true);
      if (!tier.resident())
        return tiers;
      tiers.push_back(std::move(tier));
    }
  return tiers;
}

KernelPlan mlir::norm::planKernel(MixedReductionOp op,
                                  const KernelPlanOptions &options,
                                  const GpuTarget &target) {
  return KernelPlanner(op, options, target).run();
}

/// Bytes of loads per lane the looped variant's loops over a row issue
/// before their first use (chunks per iteration = this / chunk bytes, at
/// least 2): enough in flight to stream a row instead of paying one memory
/// latency per chunk.
constexpr int64_t kLoopBytesInFlight = 16 * 4;
/// The scalar kernel (rows not 16-byte aligned, e.g. odd N) issues narrow
/// loads: up to 24 values (all full inputs) per loop iteration, so a
/// 17389-wide row of x and dy takes three iterations of 512 lanes instead
/// of five (each costs a memory latency); more spills at 128 registers.
constexpr int64_t kScalarLoopValuesInFlight = 24;

int64_t KernelPlan::loopUnroll(MixedReductionOp op, int64_t vector) const {
  int64_t chunkBytes = 0;
  for (Value v : op.getFull())
    chunkBytes = std::max(chunkBytes, elementBytes(v.getType()) * vector);
  int64_t fullInputs = op.getFull().size();
  return std::clamp<int64_t>(
      kLoopBytesInFlight / chunkBytes, 2,
      vector == 1
          ? std::max<int64_t>(2, kScalarLoopValuesInFlight / fullInputs)
          : 8);
}

