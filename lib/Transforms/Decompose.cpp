//===- Decompose.cpp - norm.*_grad to linalg on tensors -------------------===//
//
// Part of norm-opt.
//
// Emits the chain a front end would: f32 upcasts, one linalg.generic per
// step, row reductions broadcast back through indexing maps, column
// reductions over all leading dims, and truncations to the storage types.
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

/// Builds the linalg chain over the [rows..., N] domain of `x`.
class GradBuilder {
public:
  GradBuilder(RewriterBase &rewriter, Location loc, Value x)
      : b(rewriter), loc(loc), x(x),
        rank(cast<RankedTensorType>(x.getType()).getRank()),
        f32(rewriter.getF32Type()),
        xSizes(tensor::getMixedSizes(rewriter, loc, x)) {}

  AffineMap identity() const {
    return AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  }
  /// (rows..., n) -> (rows...): a per-row value broadcast over N.
  AffineMap rowMap() const {
    return identity().getMajorSubMap(rank - 1);
  }
  /// (rows..., n) -> (n): a per-column value broadcast over the rows.
  AffineMap colMap() const {
    return AffineMap::get(rank, 0, b.getAffineDimExpr(rank - 1),
                          b.getContext());
  }
  SmallVector<IteratorType> parallel() const {
    return SmallVector<IteratorType>(rank, IteratorType::parallel);
  }
  SmallVector<IteratorType> rowReduction() const {
    SmallVector<IteratorType> it = parallel();
    it.back() = IteratorType::reduction;
    return it;
  }
  SmallVector<IteratorType> colReduction() const {
    SmallVector<IteratorType> it(rank, IteratorType::reduction);
    it.back() = IteratorType::parallel;
    return it;
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
  SmallVector<int64_t> rowDims() const {
    return llvm::to_vector(llvm::seq<int64_t>(0, rank - 1));
  }
  SmallVector<int64_t> colDims() const { return {rank - 1}; }

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

  /// The hidden size N as an f32 value.
  Value hiddenSizeF32() {
    OpFoldResult n = xSizes.back();
    if (auto value = dyn_cast<Value>(n)) {
      Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), value);
      return arith::UIToFPOp::create(b, loc, f32, i64);
    }
    int64_t size = cast<IntegerAttr>(cast<Attribute>(n)).getInt();
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(size)));
  }

  RewriterBase &b;
  Location loc;
  Value x;
  int64_t rank;
  Type f32;
  SmallVector<OpFoldResult> xSizes; // static sizes or tensor.dim values
  Value zero;                       // the f32 0.0 fills share
};

/// Returns {dx, dweight?, dbias?} in the op's result order.
SmallVector<Value> decompose(RewriterBase &rewriter, Location loc,
                             const GradOperands &in) {
  GradBuilder g(rewriter, loc, in.x);
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
  Value n = g.hiddenSizeF32();
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

  // Column reductions over all leading dims.
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
    SmallVector<Value> results = decompose(rewriter, op.getLoc(), in);
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
  patterns.add<DecomposeGrad<LayerNormGradOp>, DecomposeGrad<RMSNormGradOp>>(
      patterns.getContext());
}
