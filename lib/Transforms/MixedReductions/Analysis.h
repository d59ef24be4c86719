//===- Analysis.h - Mixed-order reduction groups (private) ----*- C++ -*-===//
//
// Part of norm-opt.
//
// What the recognition shares between its steps (Analysis.cpp: views,
// slices, groups and the driver; Rewrite.cpp: the plan of a group and the
// fused op). Every linalg op is viewed as a linalg.generic (named ops
// through a scratch generalisation that leaves the input untouched) and
// classified by iterator types and indexing maps: elementwise or a
// reduction (some dims reduced, some kept). A domain is taken with a
// pairing: the dims its row reductions sum over, and the dims its column
// reductions keep (2-D: both N's dim; multi-axis: GroupNorm, adaLN). Each
// reduction, and each elementwise op that consumes a row reduction, walks
// its backward slice through elementwise producers, fills, splat constants
// and unit-dim reshapes down to the values it reads from outside.
// Candidates that share a full-domain input or an intermediate, or that
// chain through row results, form one group. A group with at least one row
// and one column reduction becomes one norm.mixed_reduction whose regions
// hold the cloned scalar payloads.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_LIB_TRANSFORMS_MIXEDREDUCTIONS_ANALYSIS_H
#define NORM_LIB_TRANSFORMS_MIXEDREDUCTIONS_ANALYSIS_H

#include "norm/Dialect/Norm/IR/NormOps.h"
#include "norm/Transforms/MixedReductions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <optional>
#include <string>

namespace mlir::norm::mixed {

using utils::IteratorType;
/// Domain dims that index a value, ascending. For a domain [rows..., N]:
/// all dims = full, the leading ones = a row value, {last} = a column value.
using Dims = SmallVector<unsigned, 4>;

/// In a loop-to-domain mapping: a loop of extent 1 that no domain dim
/// drives (a keepdim unit dim).
constexpr unsigned kUnitDim = ~0u;

inline unsigned dimsKey(ArrayRef<unsigned> dims) {
  unsigned key = 0;
  for (unsigned d : dims)
    // A unit dim (kUnitDim) takes the top bit: `1u << ~0u` is undefined
    // (UBSan, found by the sanitizer job; x86 happened to give 1u << 31).
    key |= d == kUnitDim ? 1u << 31 : 1u << d;
  return key;
}

enum class Kind { Elementwise, Reduction, Other };
/// What a reduction is in the pairing being processed.
enum class Role { None, Row, Col };

/// How a domain is taken: the dims the row reductions sum over and the
/// dims the column reductions keep. The 2-D form is {n} and {n}.
struct Pairing {
  Dims rowSum, colKept;
  bool isMultiAxis() const { return !(rowSum.size() == 1 && rowSum == colKept); }
};

/// A linalg op seen as a linalg.generic. For named ops, `generic` is a
/// generalised clone in a scratch module whose operands are placeholders:
/// operand i of `generic` stands for operand i of `op`.
struct View {
  Operation *op = nullptr;
  linalg::GenericOp generic;
  Kind kind = Kind::Other;
  SmallVector<int64_t> loops; // static loop ranges (kDynamic allowed)
  Dims reduced;               // reductions: the reduced loops, ascending
  std::string whyOther;       // for remarks on reductions we cannot take
};

/// How an operand is read: `base` indexed by domain dims `dims` after
/// dropping the unit dims `unitDims` of the original value.
struct Access {
  Value base;
  Dims dims;
  SmallVector<int64_t> unitDims; // positions in `base` to collapse away
  /// Domain dims of extent 1 that `dims` leaves out, read as index 0:
  /// inserted as unit dims when the input is materialised.
  Dims insertedUnitDims;
};

/// What defines a value requested at some domain dims.
struct Def {
  enum { Fill, Splat, Elementwise, RowResult, ColResult, External, Bad } kind;
  const View *view = nullptr;
  unsigned resultIndex = 0;
  Dims loopToDomain; // Elementwise: domain dim of each loop of the view
  Value fillValue;
  Attribute splat;
  Access access; // External
  std::string why;
};

inline bool isZeroFill(Value v) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  auto cst = fill.value().getDefiningOp<arith::ConstantOp>();
  if (!cst)
    return false;
  auto attr = dyn_cast<FloatAttr>(cst.getValue());
  return attr && attr.getValue().isZero();
}

/// The final `arith.addf %out, %x` of a reduction output, or null when the
/// combiner is not an additive fold of that output.
inline Operation *additiveCombiner(linalg::GenericOp g, unsigned output) {
  Block &body = g.getRegion().front();
  BlockArgument out = g.getRegionOutputArgs()[output];
  Value yielded = body.getTerminator()->getOperand(output);
  auto add = yielded.getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body || !out.hasOneUse())
    return nullptr;
  if (add.getLhs() != out && add.getRhs() != out)
    return nullptr;
  return add;
}

/// Describes a non-additive combiner for a remark.
inline std::string combinerName(linalg::GenericOp g, unsigned output) {
  Value yielded = g.getRegion().front().getTerminator()->getOperand(output);
  if (Operation *def = yielded.getDefiningOp())
    return def->getName().getStringRef().str();
  return "a block argument";
}

/// Why a reduction is an opaque neighbour of any group (a convolution, or
/// a contraction such as a matmul, where no input spans all the loops),
/// or nothing when it may be a row or column reduction.
inline std::optional<std::string> opaqueReduction(linalg::LinalgOp op,
                                           linalg::GenericOp g) {
  if (linalg::isaConvolutionOpInterface(op))
    return std::string("a convolution: it stays as it is, an opaque producer "
                       "or consumer of any group");
  unsigned rank = g.getNumLoops();
  bool anySpansAll = llvm::any_of(g.getDpsInputOperands(), [&](OpOperand *in) {
    llvm::SmallBitVector seen(rank);
    for (AffineExpr e : g.getMatchingIndexingMap(in).getResults())
      if (auto d = dyn_cast<AffineDimExpr>(e))
        seen.set(d.getPosition());
    return seen.all();
  });
  if (!anySpansAll)
    return std::string("a contraction (no input spans all its loops, as in a "
                       "matmul): it stays as it is, an opaque producer or "
                       "consumer of any group");
  return std::nullopt;
}

class RegionEmitter;

/// One run of the recognition over a function: finds the groups of each
/// domain and, per group, reports it (`found`), asks `control`, and fuses
/// it (unless `dryRun`).
class Analysis {
public:
  Analysis(func::FuncOp func, const MixedReductionOptions &options,
           const ControlMixedReductionFn &control = nullptr,
           std::vector<MixedReductionGroup> *found = nullptr,
           bool dryRun = false)
      : func(func), remarks(options.remarks), rowOnly(options.rowOnly),
        multiAxis(options.multiAxis), control(control), found(found), dryRun(dryRun) {}

  void run();
  /// Whether a multi-axis pairing of the domain `extents` fuses under the
  /// multi-axis option.
  bool multiAxisFuses(const Pairing &pairing,
                      ArrayRef<int64_t> extents) const {
    if (multiAxis == MultiAxisGroups::All || multiAxis == MultiAxisGroups::None)
      return multiAxis == MultiAxisGroups::All;
    SmallVector<int64_t> sums(pairing.rowSum.begin(), pairing.rowSum.end());
    SmallVector<int64_t> kept(pairing.colKept.begin(), pairing.colKept.end());
    if (batchedRowsRank(extents.size(), sums, kept) > 0)
      return true;
    return multiAxis == MultiAxisGroups::Gpu &&
           slabDomainOf(extents, sums, kept).has_value();
  }
  /// The fused ops made, in order.
  ArrayRef<MixedReductionOp> fusedOps() const { return fused; }

  // Classification, shared with the region emitter.
  std::optional<Access> resolve(Value v, AffineMap map,
                                ArrayRef<unsigned> loopToDomain,
                                std::string &why) const;
  Def classify(const Access &access) const;

private:
  // Views.
  void buildViews();
  void classifyLoops(View &view) const;
  /// The classes of full-domain values that linalg makes one shape at run
  /// time: the operands an op reads over all its loops, and its results.
  void buildExtents();
  /// A value the view reads (or writes) over all its loops, or null.
  Value fullValueOf(const View &view) const;
  /// Whether `view`, whose static loop ranges equal the domain's, runs over
  /// the same extents as the candidate or group being processed: always
  /// for a static domain; for a dynamic one, when linalg ties its tensors
  /// to the candidate's (a row sum over another [?, ?] tensor is a
  /// neighbour, not part of the group).
  bool sameExtents(const View &view) const;
  const View *viewOf(Operation *op) const {
    auto it = views.find(op);
    return it == views.end() ? nullptr : &it->second;
  }

  // Slices and groups.
  struct Slice {
    llvm::SetVector<Operation *> fullOps; // elementwise ops over the domain
    llvm::SetVector<Value> fullLeaves;    // external full-domain inputs
    llvm::SetVector<Operation *> rowReductions, colReductions;
    llvm::MapVector<std::pair<Value, unsigned>, Access> externals;
    // Every elementwise op whose payload the fused op clones (full-domain
    // and per-row ones).
    llvm::SetVector<Operation *> clonedPayloads;
    std::string failure;
  };
  void walkSlice(const Access &access, Slice &slice,
                 DenseSet<std::pair<Value, unsigned>> &seen) const;
  void walkOperands(const View &view, ArrayRef<unsigned> loopToDomain,
                    Slice &slice,
                    DenseSet<std::pair<Value, unsigned>> &seen) const;
  Slice sliceOf(const View &candidate) const;

  struct Group {
    SmallVector<Operation *> candidates; // in block order
    llvm::SetVector<Operation *> members;
    SmallVector<Operation *> rowReductions, colReductions;
  };
  /// Whether the group can fuse: its members, its reductions by role,
  /// no cycle, and a column reduction unless `allowRowOnly`.
  LogicalResult validate(Group &group, std::string &why, bool allowRowOnly);
  /// No input of the group may depend on the group's own results.
  LogicalResult checkNoCycle(const Group &group, std::string &why) const;
  /// What fuse() works out before it builds anything, and what the
  /// region emitters share.
  struct FusionPlan {
    // Row stages: a row reduction's stage, the row results before each.
    DenseMap<Operation *, unsigned> stageOf;
    unsigned numStages = 0;
    DenseMap<std::pair<Operation *, unsigned>, unsigned> rowResults;
    SmallVector<unsigned> rowResultsBefore;
    // Inputs by how the domain indexes them.
    SmallVector<Access> full, row, col, scalar;
    // Results that leave the group, the group's last op, the users that
    // move after the fused op (in block order).
    SmallVector<Value> fullOuts, colOuts, colInits;
    // Per column result: the reassociation of its keepdim unit dims (empty
    // without them).
    SmallVector<SmallVector<ReassociationIndices>> colKeepdim;
    // The fused op's column results: [N], also where the group's were
    // keepdim ([1, ..., N]: replaceGroup expands them back).
    SmallVector<Type> colTypes;
    Operation *last = nullptr;
    SmallVector<Operation *> toMove;
    // The fused op's block arguments and the values read above it.
    DenseMap<std::pair<Value, unsigned>, unsigned> inputIndex;
    unsigned numInputs = 0;
    SmallVector<Type> inputTypes, rowResultTypes;
    DenseMap<Value, Value> scalarValues;
  };
  /// Whether the group fuses: plan the row stages, the inputs and the
  /// outputs (and the users to move). Changes no IR.
  LogicalResult decide(const Group &group, FusionPlan &plan,
                       std::string &why);
  /// Fuses a group decide() planned: create the op, build its regions,
  /// then remark and replace the group.
  FailureOr<MixedReductionOp> fuse(Group &group, FusionPlan &plan,
                                   std::string &why);
  /// The group as the public API reports it.
  MixedReductionGroup describe(const Group &group,
                               const std::string &whyNot) const;
  void planStages(const Group &group, FusionPlan &plan);
  LogicalResult planInputs(const Group &group, FusionPlan &plan,
                           std::string &why);
  LogicalResult planOutputs(const Group &group, FusionPlan &plan,
                            std::string &why);
  LogicalResult planUsersToMove(const Group &group, FusionPlan &plan,
                                std::string &why);
  MixedReductionOp createFusedOp(const Group &group, FusionPlan &plan,
                                 OpBuilder &b);
  LogicalResult buildRegions(const Group &group, const FusionPlan &plan,
                             OpBuilder &b, MixedReductionOp fused);
  LogicalResult
  buildRegion(const FusionPlan &plan, OpBuilder &b, Region &region,
              unsigned numRowResults,
              function_ref<FailureOr<SmallVector<Value>>(class RegionEmitter &)>
                  body);
  void remarkFused(const Group &group, unsigned numStages);
  SmallVector<ReassociationIndices> keepdimGroups(const View &view,
                                                  unsigned i) const;
  /// The fused op's domain attributes: `n_dim` for a 2-D pairing whose N is
  /// not last, `row_sum_dims` / `col_dims` for a multi-axis one.
  IntegerAttr nDimAttr(OpBuilder &b) const {
    if (pairing.isMultiAxis() || pairing.rowSum.front() + 1 == domain.size())
      return {};
    return b.getI64IntegerAttr(pairing.rowSum.front());
  }
  DenseI64ArrayAttr rowSumDimsAttr(OpBuilder &b) const {
    return pairing.isMultiAxis()
               ? b.getDenseI64ArrayAttr(SmallVector<int64_t>(
                     pairing.rowSum.begin(), pairing.rowSum.end()))
               : DenseI64ArrayAttr();
  }
  DenseI64ArrayAttr colDimsAttr(OpBuilder &b) const {
    return pairing.isMultiAxis()
               ? b.getDenseI64ArrayAttr(SmallVector<int64_t>(
                     pairing.colKept.begin(), pairing.colKept.end()))
               : DenseI64ArrayAttr();
  }
  /// The pairings of a domain whose reductions are `ops`, in the order
  /// they are tried: 2-D ones (N last first), then multi-axis ones.
  SmallVector<Pairing> pairingsOf(ArrayRef<int64_t> loops,
                                  ArrayRef<Operation *> ops) const;
  /// Groups the candidates of one domain in one pairing, and fuses each
  /// (reports it only, for a multi-axis pairing with multi-axis off).
  void fuseDomain(ArrayRef<int64_t> loops, const Pairing &pairing,
                  ArrayRef<Operation *> ops, bool allowRowOnly);
  /// A reduction's role in the pairing being processed.
  Role roleOf(const View &view) const;
  /// What no pairing fused: one remark per reduction (the last pairing's
  /// reason), and the pending reports of groups none of whose candidates
  /// a later pairing took.
  void reportUnfused(ArrayRef<Operation *> order);
  /// Why `op` did not fuse (the last pairing's reason wins): remarked at
  /// the end for the reductions no pairing fused.
  void notFused(Operation *op, const std::string &why) { whyNotFused[op] = why; }
  void replaceGroup(Group &group, const FusionPlan &plan,
                    MixedReductionOp fused);

  void remark(Operation *op, const Twine &message) {
    if (remarks)
      op->emitRemark(message);
  }

  func::FuncOp func;
  bool remarks;
  bool rowOnly;   // groups without a column reduction fuse too
  MultiAxisGroups multiAxis; // which multi-axis pairings fuse (the others
                             // are only reported)
  const ControlMixedReductionFn &control;
  std::vector<MixedReductionGroup> *found;
  bool dryRun;
  SmallVector<MixedReductionOp> fused;
  OwningOpRef<ModuleOp> scratch;
  DenseMap<Operation *, View> views;
  SmallVector<int64_t> domain; // of the group being processed
  Pairing pairing;             // how `domain` is taken
  Access withUnitDomainDims(const Access &access,
                            ArrayRef<unsigned> within) const;
  /// The domain dims of a row value: those the row sums keep.
  Dims rowDims(unsigned rank) const {
    Dims dims;
    for (unsigned d = 0; d < rank; ++d)
      if (!llvm::is_contained(pairing.rowSum, d))
        dims.push_back(d);
    return dims;
  }
  llvm::EquivalenceClasses<Value> extents;
  Value extentLeader; // a full-domain value of the candidate or group
  DenseMap<Operation *, Slice> slices;
  DenseMap<Operation *, unsigned> position; // walk order
  DenseSet<Operation *> erased;  // by fusing an earlier group
  // Reported fused (kept alive by a later use): no "not fused" remark too.
  DenseSet<Operation *> reportedFused;
  /// Taken by a group that would fuse but is only reported (a dry run, or
  /// multi-axis off): later pairings skip them.
  DenseSet<Operation *> claimed;
  llvm::MapVector<Operation *, std::string> whyNotFused;
  /// Reports of groups that did not fuse, kept until the end: dropped when
  /// a later pairing fused one of their candidates.
  std::vector<std::pair<MixedReductionGroup, SmallVector<Operation *>>>
      pendingReports;
};

} // namespace mlir::norm::mixed

#endif // NORM_LIB_TRANSFORMS_MIXEDREDUCTIONS_ANALYSIS_H
