//===- NormOps.cpp - norm dialect ops -------------------------------------===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::norm;

namespace {
/// An optional affine parameter (weight, bias) and its gradient come as a
/// pair; the parameter is 1-D of `size` elements (`dim`: what that size is,
/// for the message), and the gradient has its type.
template <typename OpTy>
LogicalResult verifyAffineParams(OpTy op, int64_t size, StringRef dim) {
  auto verifyParam = [&](Value param, Value grad, StringRef paramName,
                         StringRef gradName) -> LogicalResult {
    if (!param && !grad)
      return success();
    if (param && !grad)
      return op.emitOpError() << "has a '" << paramName
                              << "' operand but no '" << gradName
                              << "' result";
    if (!param)
      return op.emitOpError() << "has a '" << gradName << "' result but no '"
                              << paramName << "' operand";
    auto type = cast<RankedTensorType>(param.getType());
    if (type.getRank() != 1 ||
        failed(verifyCompatibleShape(type.getShape(), {size})))
      return op.emitOpError()
             << "expects '" << paramName << "' to be 1-D with " << dim
             << " of 'x' " << op.getX().getType() << ", got " << type;
    if (grad.getType() != type)
      return op.emitOpError() << "expects result '" << gradName
                              << "' to have the type of '" << paramName
                              << "' " << type << ", got " << grad.getType();
    return success();
  };
  return failure(
      failed(verifyParam(op.getWeight(), op.getDweight(), "weight",
                         "dweight")) ||
      failed(verifyParam(op.getBias(), op.getDbias(), "bias", "dbias")));
}

/// The checks both grad ops share. `stats` are the saved statistics operands
/// with their names (mean/rstd), in operand order.
template <typename OpTy>
LogicalResult
verifyGradOp(OpTy op, ArrayRef<std::pair<Value, StringRef>> stats) {
  RankedTensorType xType = op.getX().getType();
  if (xType.getRank() < 2)
    return op.emitOpError("expects 'x' of rank >= 2 (leading dims are rows, "
                          "the trailing dim is normalised), got ")
           << xType;
  ArrayRef<int64_t> rowShape = xType.getShape().drop_back();
  int64_t hidden = xType.getShape().back();

  for (auto [value, name] : stats) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getShape().size() != rowShape.size() ||
        failed(verifyCompatibleShape(type.getShape(), rowShape)))
      return op.emitOpError() << "expects '" << name
                              << "' to be shaped like the leading dims of 'x' "
                              << xType << ", got " << type;
  }

  if (op.getDx().getType() != xType)
    return op.emitOpError() << "expects result 'dx' to have the type of 'x' "
                            << xType << ", got " << op.getDx().getType();

  if (failed(verifyAffineParams(op, hidden, "the trailing dim")))
    return failure();

  if (op.getZeroCenteredWeight() && !op.getWeight())
    return op.emitOpError("has 'zero_centered_weight' but no 'weight'");
  return success();
}
} // namespace

LogicalResult LayerNormGradOp::verify() {
  return verifyGradOp(*this, {{getMean(), "mean"}, {getRstd(), "rstd"}});
}

LogicalResult RMSNormGradOp::verify() {
  return verifyGradOp(*this, {{getRstd(), "rstd"}});
}

LogicalResult GroupNormGradOp::verify() {
  RankedTensorType xType = getX().getType();
  if (xType.getRank() < 2)
    return emitOpError("expects 'x' of rank >= 2 ([N, C, spatial...], or "
                       "[N, spatial..., C] with 'channels_last'), got ")
           << xType;
  int64_t channels = getNumChannels();
  if (ShapedType::isDynamic(channels))
    return emitOpError("expects a static channel count (dim ")
           << getChannelDim() << " of 'x' " << xType << ")";
  if (channels % getNumGroups() != 0)
    return emitOpError() << "expects 'groups' (" << getNumGroups()
                         << ") to divide the " << channels << " channels";
  for (Value stat : {getMean(), getRstd()}) {
    auto type = cast<RankedTensorType>(stat.getType());
    if (type.getRank() != 2 ||
        failed(verifyCompatibleShape(type.getShape(),
                                     {xType.getShape()[0], getNumGroups()})))
      return emitOpError() << "expects 'mean' and 'rstd' shaped [N, groups] = ["
                           << (xType.isDynamicDim(0)
                                   ? std::string("?")
                                   : std::to_string(xType.getShape()[0]))
                           << ", " << getNumGroups() << "], got " << type;
  }
  if (getDx().getType() != xType)
    return emitOpError() << "expects result 'dx' to have the type of 'x' "
                         << xType << ", got " << getDx().getType();
  return verifyAffineParams(*this, channels, "the channel count");
}

//===----------------------------------------------------------------------===//
// Grad op result types
//===----------------------------------------------------------------------===//

/// `type($dx) (`,` type($dweight))? (`,` type($dbias))?`, where which optional
/// results are present follows from the optional operands (a plain optional
/// group would read the only extra type of a bias-only op as 'dweight').
static ParseResult
parseGradResultTypes(OpAsmParser &parser,
                     std::optional<OpAsmParser::UnresolvedOperand> weight,
                     std::optional<OpAsmParser::UnresolvedOperand> bias,
                     Type &dxType, Type &dweightType, Type &dbiasType) {
  SMLoc typesLoc = parser.getCurrentLocation();
  if (parser.parseType(dxType))
    return failure();
  auto parseGradType = [&](bool present, StringRef param, StringRef grad,
                           Type &type) -> ParseResult {
    if (!present)
      return success();
    if (failed(parser.parseOptionalComma()))
      return parser.emitError(typesLoc)
             << "expected the type of the '" << grad
             << "' result, which the '" << param << "' operand asks for";
    return parser.parseType(type);
  };
  if (parseGradType(weight.has_value(), "weight", "dweight", dweightType) ||
      parseGradType(bias.has_value(), "bias", "dbias", dbiasType))
    return failure();
  if (succeeded(parser.parseOptionalComma()))
    return parser.emitError(parser.getCurrentLocation())
           << "expected no more result types: 'dx', then 'dweight' only with "
              "a 'weight' operand and 'dbias' only with a 'bias' operand";
  return success();
}

static void printGradResultTypes(OpAsmPrinter &printer, Operation *,
                                 Value /*weight*/, Value /*bias*/, Type dxType,
                                 Type dweightType, Type dbiasType) {
  printer << dxType;
  if (dweightType)
    printer << ", " << dweightType;
  if (dbiasType)
    printer << ", " << dbiasType;
}

#define GET_OP_CLASSES
#include "norm/Dialect/Norm/IR/NormOps.cpp.inc"

//===----------------------------------------------------------------------===//
// MixedReductionOp
//===----------------------------------------------------------------------===//

static YieldOp getYield(Region &region) {
  return cast<YieldOp>(region.front().getTerminator());
}

unsigned MixedReductionOp::getNumRowResultsBefore(unsigned stage) {
  unsigned n = 0;
  for (Region &region : getRowStages().take_front(stage))
    n += getYield(region).getValues().size();
  return n;
}

SmallVector<int64_t> MixedReductionOp::getRowDimList() {
  SmallVector<int64_t> sums = getRowSumDimList(), dims;
  for (int64_t d = 0, e = getDomainShape().size(); d < e; ++d)
    if (!llvm::is_contained(sums, d))
      dims.push_back(d);
  return dims;
}

int64_t mlir::norm::batchedRowsRank(int64_t rank,
                                    ArrayRef<int64_t> rowSumDims,
                                    ArrayRef<int64_t> colDims) {
  if (rank < 3 || rowSumDims.size() != 1 || rowSumDims.front() != rank - 1 ||
      colDims.size() < 2 || colDims.back() != rank - 1)
    return 0;
  int64_t k = colDims.size() - 1;
  for (int64_t d = 0; d < k; ++d)
    if (colDims[d] != d)
      return 0;
  return k <= rank - 2 ? k : 0;
}

std::optional<SlabDomain>
mlir::norm::slabDomainOf(ArrayRef<int64_t> domain,
                         ArrayRef<int64_t> rowSumDims,
                         ArrayRef<int64_t> colDims) {
  // Each dim's role, and the runs of equal roles in order.
  SmallVector<char> runs;
  SlabDomain slab;
  for (int64_t d = 0, e = domain.size(); d < e; ++d) {
    bool summed = llvm::is_contained(rowSumDims, d);
    bool kept = llvm::is_contained(colDims, d);
    char role = summed ? (kept ? 'C' : 'D') : (kept ? 'A' : 'R');
    if (runs.empty() || runs.back() != role)
      runs.push_back(role);
    (role == 'R'   ? slab.rRank
     : role == 'A' ? slab.aRank
     : role == 'C' ? slab.cRank
                   : slab.dRank)++;
    if (role == 'A' || role == 'C') {
      if (ShapedType::isDynamic(domain[d]))
        return std::nullopt;
      (role == 'A' ? slab.aSize : slab.cSize) *= domain[d];
    }
  }
  StringRef order(runs.data(), runs.size());
  if (order != "RACD" && order != "RDAC")
    return std::nullopt;
  slab.channelsLast = order == "RDAC";
  return slab;
}

/// The multi-axis attributes: both or neither, not with `n_dim`, each a
/// strictly ascending, non-empty proper subset of the domain's dims, the
/// two sharing a dim, and not the 2-D form (which is spelled `n_dim`).
static LogicalResult verifyMultiAxis(MixedReductionOp op, int64_t rank) {
  std::optional<ArrayRef<int64_t>> sums = op.getRowSumDims(),
                                   cols = op.getColDims();
  if (!sums && !cols)
    return success();
  if (!sums || !cols)
    return op.emitOpError("expects 'row_sum_dims' and 'col_dims' together "
                          "(a multi-axis domain), or neither");
  if (op.getNDim())
    return op.emitOpError("expects 'n_dim' or the multi-axis 'row_sum_dims' "
                          "and 'col_dims', not both");
  for (auto [name, dims] : {std::make_pair("row_sum_dims", *sums),
                            std::make_pair("col_dims", *cols)}) {
    if (dims.empty() || int64_t(dims.size()) >= rank)
      return op.emitOpError() << "expects '" << name << "' to hold some but "
                              << "not all of the domain's " << rank
                              << " dims, got " << dims.size();
    for (auto [i, d] : llvm::enumerate(dims))
      if (d < 0 || d >= rank || (i > 0 && dims[i - 1] >= d))
        return op.emitOpError() << "expects '" << name << "' to be strictly "
                                << "ascending dims in [0, " << rank << ")";
  }
  if (llvm::none_of(*cols, [&](int64_t d) { return llvm::is_contained(*sums, d); }))
    return op.emitOpError("expects 'row_sum_dims' and 'col_dims' to share a "
                          "dim (else the column sums are row sums over other "
                          "dims: a reduction of one order, not mixed)");
  if (sums->size() == 1 && *sums == *cols)
    return op.emitOpError() << "expects the 2-D form (row_sum_dims = col_dims "
                            << "= [" << sums->front() << "]) to be spelled "
                            << "'n_dim = " << sums->front() << "'";
  return success();
}

LogicalResult MixedReductionOp::verify() {
  if (getFull().empty())
    return emitOpError("needs at least one 'full' input to define the domain");
  auto domainType = cast<RankedTensorType>(getFull().front().getType());
  if (domainType.getRank() < 2)
    return emitOpError("expects a domain of rank >= 2 ([rows..., N]), got ")
           << domainType;
  ArrayRef<int64_t> domain = domainType.getShape();
  if (std::optional<uint64_t> n = getNDim(); n && *n >= domain.size())
    return emitOpError() << "expects n_dim in [0, " << domain.size()
                         << "), got " << *n;
  if (failed(verifyMultiAxis(*this, domain.size())))
    return failure();
  SmallVector<int64_t> rows = getRowShape(), cols = getColShape();
  bool multi = isMultiAxis();

  auto check = [&](ValueRange values, ArrayRef<int64_t> shape,
                   StringRef what) -> LogicalResult {
    for (Value v : values) {
      auto type = cast<RankedTensorType>(v.getType());
      if (type.getShape().size() != shape.size() ||
          failed(verifyCompatibleShape(type.getShape(), shape)))
        return emitOpError() << "expects every " << what << " to match the "
                             << "domain " << domainType << ", got " << type;
    }
    return success();
  };
  if (failed(check(getFull(), domain, "'full' input [rows..., N]")) ||
      failed(check(getRow(), rows, multi ? "'row' input (the dims not in "
                                           "row_sum_dims)"
                                         : "'row' input [rows...]")) ||
      failed(check(getCol(), cols, multi ? "'col' input (col_dims)"
                                         : "'col' input [N]")) ||
      failed(check(getColInit(), cols,
                   multi ? "'col_init' (col_dims)" : "'col_init' [N]")) ||
      failed(check(getFullResults(), domain, "full result [rows..., N]")))
    return failure();

  if (getColInit().size() != getColResults().size())
    return emitOpError() << "has " << getColInit().size()
                         << " 'col_init' values for " << getColResults().size()
                         << " column results";
  for (auto [init, result] : llvm::zip(getColInit(), getColResults()))
    if (init.getType() != result.getType())
      return emitOpError() << "expects column result type " << result.getType()
                           << " to match its 'col_init' " << init.getType();
  return success();
}

LogicalResult MixedReductionOp::verifyRegions() {
  if (getRowStages().empty())
    return emitOpError("needs at least one row stage");

  SmallVector<Type> inputTypes;
  for (Value v : getOperands().take_front(getNumInputs()))
    inputTypes.push_back(cast<RankedTensorType>(v.getType()).getElementType());

  SmallVector<Type> rowResultTypes;
  auto checkRegion = [&](Region &region, StringRef name,
                         std::optional<TypeRange> yieldTypes) -> LogicalResult {
    Block &block = region.front();
    SmallVector<Type> expected(inputTypes);
    llvm::append_range(expected, rowResultTypes);
    if (block.getArgumentTypes() != TypeRange(expected)) {
      InFlightDiagnostic diag = emitOpError()
                                << "region '" << name
                                << "' expects block arguments (";
      llvm::interleaveComma(expected, diag);
      diag << "): one per full, row and col input, then the row results "
              "available to it";
      return diag;
    }
    YieldOp yield = getYield(region);
    if (yieldTypes && yield.getValues().getTypes() != *yieldTypes) {
      InFlightDiagnostic diag = yield.emitOpError()
                                << "in region '" << name << "' must yield (";
      llvm::interleaveComma(*yieldTypes, diag);
      return diag << ")";
    }
    return success();
  };

  for (auto [index, stage] : llvm::enumerate(getRowStages())) {
    std::string name = "row_stages #" + std::to_string(index);
    if (failed(checkRegion(stage, name, std::nullopt)))
      return failure();
    YieldOp yield = getYield(stage);
    if (yield.getValues().empty())
      return yield.emitOpError() << "in region '" << name
                                 << "' must yield at least one contribution";
    for (Type t : yield.getValues().getTypes())
      if (!t.isF32() && !t.isF16() && !t.isBF16())
        return yield.emitOpError()
               << "in region '" << name
               << "' must yield bf16, f16 or f32 (sums are computed in f32), "
                  "got "
               << t;
    llvm::append_range(rowResultTypes, yield.getValues().getTypes());
  }

  SmallVector<Type> fullTypes, colTypes;
  for (Type t : getFullResults().getTypes())
    fullTypes.push_back(cast<RankedTensorType>(t).getElementType());
  for (Type t : getColResults().getTypes())
    colTypes.push_back(cast<RankedTensorType>(t).getElementType());
  if (failed(checkRegion(getElementwise(), "elementwise", TypeRange(fullTypes))))
    return failure();
  return checkRegion(getColumns(), "columns", TypeRange(colTypes));
}
