//===- Decompose.cpp - norm.*_grad to linalg on tensors -------------------===//
//
// Part of norm-opt.
//
// Emits the chain a front end would: f32 upcasts, one linalg.generic per
// step, row reductions broadcast back through indexing maps, column
// reductions over the other dims, and truncations to the storage types.
// LayerNorm and RMSNorm run it over `x`'s [rows..., N]; GroupNorm over `x`
// with its channels expanded into [groups, C / groups] (tensor.expand_shape,
// as torch-mlir spells it), the statistics indexed by (n, group) and the
// weight by (group, channel in group).
//
//===----------------------------------------------------------------------===//

#include "norm/Dialect/Norm/IR/NormOps.h"
#include "norm/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::norm {
#define GEN_PASS_DEF_NORMDECOMPOSE
#include "norm/Transforms/Passes.h.inc"
} // namespace mlir::norm

using namespace mlir;
using namespace mlir::norm;

namespace {

using utils::IteratorType;

/// What distinguishes the two grad ops; everything else is shared.
struct GradOperands {
  Value dy, x, mean /*null for RMSNorm*/, rstd, weight, bias;
  bool zeroCenteredWeight;
};

/// The domain of the chain: the shape of `x` (as the chain sees it), the
/// dims that index a row's statistics (the rest are reduced by the row
/// reductions) and the dims that index the weight (the rest are reduced by
/// the column reductions).
struct GradDomain {
  Value x;
  SmallVector<int64_t> rowDims, colDims;

  /// [rows..., N]: the rows are the leading dims, N the last.
  static GradDomain rowsThenN(Value x) {
    int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
    return {x, llvm::to_vector(llvm::seq<int64_t>(0, rank - 1)), {rank - 1}};
  }
};

/// Builds the linalg chain over a GradDomain.
class GradBuilder {
public:
  GradBuilder(RewriterBase &rewriter, Location loc, const GradDomain &domain)
      : b(rewriter), loc(loc), x(domain.x),
        rank(cast<RankedTensorType>(x.getType()).getRank()),
        f32(rewriter.getF32Type()),
        xSizes(tensor::getMixedSizes(rewriter, loc, x)),
        rowDimList(domain.rowDims), colDimList(domain.colDims) {}

  AffineMap identity() const {
    return AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  }
  /// The domain -> the dims `dims`: a value indexed by them, broadcast
  /// over the others.
  AffineMap mapOf(ArrayRef<int64_t> dims) const {
    SmallVector<AffineExpr> exprs;
    for (int64_t d : dims)
      exprs.push_back(b.getAffineDimExpr(d));
    return AffineMap::get(rank, 0, exprs, b.getContext());
  }
  /// A per-row value broadcast over the row.
  AffineMap rowMap() const { return mapOf(rowDimList); }
  /// A per-column value broadcast over the rows.
  AffineMap colMap() const { return mapOf(colDimList); }
  SmallVector<IteratorType> parallel() const {
    return SmallVector<IteratorType>(rank, IteratorType::parallel);
  }
  /// Parallel over `kept`, a reduction over the other dims.
  SmallVector<IteratorType> reducingAllBut(ArrayRef<int64_t> kept) const {
    SmallVector<IteratorType> it(rank, IteratorType::reduction);
    for (int64_t d : kept)
      it[d] = IteratorType::parallel;
    return it;
  }
  SmallVector<IteratorType> rowReduction() const {
    return reducingAllBut(rowDimList);
  }
  SmallVector<IteratorType> colReduction() const {
    return reducingAllBut(colDimList);
  }

  /// tensor.empty shaped like the dims `dims` of x.
  Value empty(ArrayRef<int64_t> dims, Type elementType) {
    SmallVector<OpFoldResult> sizes;
    for (int64_t d : dims)
      sizes.push_back(xSizes[d]);
    return tensor::EmptyOp::create(b, loc, sizes, elementType);
  }
  SmallVector<int64_t> allDims() const {
    return llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  SmallVector<int64_t> rowDims() const { return rowDimList; }
  SmallVector<int64_t> colDims() const { return colDimList; }

  Value zeros(ArrayRef<int64_t> dims) {
    if (!zero)
      zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
    return linalg::FillOp::create(b, loc, zero, empty(dims, f32)).result();
  }

  using Payload = function_ref<Value(OpBuilder &, Location, ValueRange)>;

  /// One linalg.generic with a single result; `payload` gets the block
  /// arguments (inputs then the output) and returns the yielded value.
  Value generic(ValueRange inputs, ArrayRef<AffineMap> inputMaps, Value init,
                AffineMap outMap, ArrayRef<IteratorType> iterators,
                Payload payload) {
    SmallVector<AffineMap> maps(inputMaps);
    maps.push_back(outMap);
    auto op = linalg::GenericOp::create(
        b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
        iterators, [&](OpBuilder &nb, Location nloc, ValueRange args) {
          linalg::YieldOp::create(nb, nloc, payload(nb, nloc, args));
        });
    return op.getResult(0);
  }

  /// Elementwise element-type conversion (extf/truncf) of a tensor shaped
  /// like the dims `dims` of x; a no-op when the type already matches.
  Value convert(Value v, ArrayRef<int64_t> dims, Type to) {
    auto type = cast<RankedTensorType>(v.getType());
    Type from = type.getElementType();
    if (from == to)
      return v;
    AffineMap id = AffineMap::getMultiDimIdentityMap(dims.size(),
                                                     b.getContext());
    SmallVector<IteratorType> it(dims.size(), IteratorType::parallel);
    bool widen = from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth();
    return generic(v, {id}, empty(dims, to), id, it,
                   [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                     if (widen)
                       return arith::ExtFOp::create(nb, l, to, a[0]);
                     return arith::TruncFOp::create(nb, l, to, a[0]);
                   });
  }

  /// The elements a row reduction sums (N; a GroupNorm slab's channels
  /// times its spatial size) as an f32 value.
  Value rowSizeF32() {
    int64_t staticSize = 1;
    Value dynamicSize;
    for (int64_t d = 0; d < rank; ++d) {
      if (llvm::is_contained(rowDimList, d))
        continue;
      if (auto value = dyn_cast<Value>(xSizes[d])) {
        dynamicSize = dynamicSize ? arith::MulIOp::create(b, loc, dynamicSize,
                                                          value)
                                        .getResult()
                                  : value;
        continue;
      }
      staticSize *= cast<IntegerAttr>(cast<Attribute>(xSizes[d])).getInt();
    }
    if (!dynamicSize)
      return arith::ConstantOp::create(b, loc,
                                       b.getF32FloatAttr(float(staticSize)));
    if (staticSize != 1)
      dynamicSize = arith::MulIOp::create(
          b, loc, dynamicSize,
          arith::ConstantIndexOp::create(b, loc, staticSize));
    Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), dynamicSize);
    return arith::UIToFPOp::create(b, loc, f32, i64);
  }

  RewriterBase &b;
  Location loc;
  Value x;
  int64_t rank;
  Type f32;
  SmallVector<OpFoldResult> xSizes; // static sizes or tensor.dim values
  SmallVector<int64_t> rowDimList, colDimList;
  Value zero; // the f32 0.0 fills share
};

/// Returns {dx, dweight?, dbias?} in the op's result order.
SmallVector<Value> decompose(RewriterBase &rewriter, Location loc,
                             const GradOperands &in, const GradDomain &domain) {
  GradBuilder g(rewriter, loc, domain);
  Type f32 = g.f32;
  AffineMap id = g.identity(), row = g.rowMap(), col = g.colMap();
  SmallVector<int64_t> all = g.allDims(), rows = g.rowDims(),
                       cols = g.colDims();
  auto mulf = [](OpBuilder &nb, Location l, Value a, Value c) -> Value {
    return arith::MulFOp::create(nb, l, a, c);
  };

  Value x32 = g.convert(in.x, all, f32);
  Value dy32 = g.convert(in.dy, all, f32);

  // xhat = (x - mean) * rstd   (RMSNorm: x * rstd)
  Value xhat;
  if (in.mean) {
    xhat = g.generic({x32, in.mean, in.rstd}, {id, row, row}, g.empty(all, f32),
                     id, g.parallel(),
                     [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                       Value c = arith::SubFOp::create(nb, l, a[0], a[1]);
                       return mulf(nb, l, c, a[2]);
                     });
  } else {
    xhat = g.generic({x32, in.rstd}, {id, row}, g.empty(all, f32), id,
                     g.parallel(),
                     [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                       return mulf(nb, l, a[0], a[1]);
                     });
  }

  // wdy = w * dy   ((w + 1) * dy when zero-centred; dy without weight)
  Value wdy = dy32;
  if (in.weight) {
    Value w32 = g.convert(in.weight, cols, f32);
    bool plusOne = in.zeroCenteredWeight;
    wdy = g.generic({dy32, w32}, {id, col}, g.empty(all, f32), id,
                    g.parallel(),
                    [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                      Value w = a[1];
                      if (plusOne) {
                        Value one = arith::ConstantOp::create(
                            nb, l, nb.getF32FloatAttr(1.0));
                        w = arith::AddFOp::create(nb, l, w, one);
                      }
                      return mulf(nb, l, a[0], w);
                    });
  }

  // Row reductions over N.
  auto rowSum = [&](ValueRange inputs) {
    SmallVector<AffineMap> maps(inputs.size(), id);
    return g.generic(inputs, maps, g.zeros(rows), row, g.rowReduction(),
                     [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                       Value v = a[0];
                       for (Value operand : a.drop_front().drop_back())
                         v = mulf(nb, l, v, operand);
                       return arith::AddFOp::create(nb, l, a.back(), v);
                     });
  };
  Value sumXhatWdy = rowSum({xhat, wdy});
  Value sumWdy = in.mean ? rowSum({wdy}) : Value();

  // dx = rstd * (wdy - (mean_n(wdy) + xhat * mean_n(xhat * wdy)))
  Value n = g.rowSizeF32();
  SmallVector<Value> dxInputs = {xhat, wdy, sumXhatWdy};
  SmallVector<AffineMap> dxMaps = {id, id, row};
  if (sumWdy) {
    dxInputs.push_back(sumWdy);
    dxMaps.push_back(row);
  }
  dxInputs.push_back(in.rstd);
  dxMaps.push_back(row);
  bool layerNorm = bool(in.mean);
  Value dx32 = g.generic(
      dxInputs, dxMaps, g.empty(all, f32), id, g.parallel(),
      [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value c1 = arith::DivFOp::create(nb, l, a[2], n);
        Value proj = mulf(nb, l, a[0], c1);
        if (layerNorm) {
          Value c2 = arith::DivFOp::create(nb, l, a[3], n);
          proj = arith::AddFOp::create(nb, l, proj, c2);
        }
        Value diff = arith::SubFOp::create(nb, l, a[1], proj);
        return mulf(nb, l, diff, a[layerNorm ? 4 : 3]);
      });
  auto xElem = cast<RankedTensorType>(in.x.getType()).getElementType();
  SmallVector<Value> results = {g.convert(dx32, all, xElem)};

  // Column reductions over the dims that do not index the weight.
  auto colSum = [&](ValueRange inputs, Value param) {
    SmallVector<AffineMap> maps(inputs.size(), id);
    Value sum = g.generic(
        inputs, maps, g.zeros(cols), col, g.colReduction(),
        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          Value v = a[0];
          for (Value operand : a.drop_front().drop_back())
            v = mulf(nb, l, v, operand);
          return arith::AddFOp::create(nb, l, a.back(), v);
        });
    Type elem = cast<RankedTensorType>(param.getType()).getElementType();
    return g.convert(sum, cols, elem);
  };
  if (in.weight)
    results.push_back(colSum({dy32, xhat}, in.weight));
  if (in.bias)
    results.push_back(colSum({dy32}, in.bias));
  return results;
}

template <typename OpTy>
struct DecomposeGrad : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    GradOperands in;
    in.dy = op.getDy();
    in.x = op.getX();
    if constexpr (std::is_same_v<OpTy, LayerNormGradOp>)
      in.mean = op.getMean();
    in.rstd = op.getRstd();
    in.weight = op.getWeight();
    in.bias = op.getBias();
    in.zeroCenteredWeight = op.getZeroCenteredWeight();
    SmallVector<Value> results =
        decompose(rewriter, op.getLoc(), in, GradDomain::rowsThenN(in.x));
    // The chain's shapes come from `x`; a weight or bias may be more (or
    // less) static than the trailing dim of `x` (tensor<64xf32> with
    // tensor<?x?xbf16>), so its gradient is cast back to the result type.
    for (auto [value, type] : llvm::zip_equal(results, op->getResultTypes()))
      if (value.getType() != type)
        value = tensor::CastOp::create(rewriter, op.getLoc(), type, value);
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// GroupNorm: x's channel dim c expanded into (groups, C / groups), then the
/// chain over that domain: rows (n, group), weight (group, channel in
/// group); dx and the parameter gradients collapsed back.
struct DecomposeGroupNormGrad : OpRewritePattern<GroupNormGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GroupNormGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType xType = op.getX().getType();
    int64_t rank = xType.getRank(), c = op.getChannelDim();
    int64_t groups = op.getNumGroups(), size = op.getGroupSize();

    // [..., C, ...] -> [..., groups, C / groups, ...]
    SmallVector<ReassociationIndices> channels;
    SmallVector<int64_t> shape;
    SmallVector<OpFoldResult> sizes;
    SmallVector<OpFoldResult> xSizes =
        tensor::getMixedSizes(rewriter, loc, op.getX());
    for (int64_t d = 0, e = 0; d < rank; ++d) {
      if (d != c) {
        channels.push_back({e++});
        shape.push_back(xType.getDimSize(d));
        sizes.push_back(xSizes[d]);
        continue;
      }
      channels.push_back({e, e + 1});
      e += 2;
      shape.append({groups, size});
      sizes.append({rewriter.getIndexAttr(groups), rewriter.getIndexAttr(size)});
    }
    auto expand = [&](Value v) -> Value {
      auto type = RankedTensorType::get(shape, xType.getElementType());
      return tensor::ExpandShapeOp::create(rewriter, loc, type, v, channels,
                                           sizes);
    };
    // A parameter [C] -> [groups, C / groups] (cast to the static C first).
    SmallVector<ReassociationIndices> paramGroups = {{0, 1}};
    auto expandParam = [&](Value v) -> Value {
      if (!v)
        return v;
      Type elem = cast<RankedTensorType>(v.getType()).getElementType();
      auto staticType = RankedTensorType::get({groups * size}, elem);
      if (v.getType() != staticType)
        v = tensor::CastOp::create(rewriter, loc, staticType, v);
      return tensor::ExpandShapeOp::create(
          rewriter, loc, RankedTensorType::get({groups, size}, elem), v,
          paramGroups);
    };

    GradOperands in;
    in.dy = expand(op.getDy());
    in.x = expand(op.getX());
    in.mean = op.getMean();
    in.rstd = op.getRstd();
    in.weight = expandParam(op.getWeight());
    in.bias = expandParam(op.getBias());
    in.zeroCenteredWeight = false;
    GradDomain domain{in.x, {0, c}, {c, c + 1}};
    SmallVector<Value> results = decompose(rewriter, loc, in, domain);

    results[0] = tensor::CollapseShapeOp::create(rewriter, loc, xType,
                                                 results[0], channels);
    for (auto [value, type] :
         llvm::zip_equal(llvm::drop_begin(results),
                         llvm::drop_begin(op->getResultTypes()))) {
      value = tensor::CollapseShapeOp::create(rewriter, loc, value,
                                              paramGroups);
      if (value.getType() != type)
        value = tensor::CastOp::create(rewriter, loc, type, value);
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct NormDecomposePass
    : norm::impl::NormDecomposeBase<NormDecomposePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateNormDecomposePatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace

void mlir::norm::populateNormDecomposePatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeGrad<LayerNormGradOp>, DecomposeGrad<RMSNormGradOp>,
               DecomposeGroupNormGrad>(patterns.getContext());
}
