//===- NormOps.td - norm dialect ops -----------------------*- tablegen -*-===//
//
// Part of norm-opt. High-level normalization backward ops on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_NORMOPS_TD
#define NORM_DIALECT_NORM_IR_NORMOPS_TD

include "norm/Dialect/Norm/IR/NormDialect.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Activations and weights: the float types norm backward kernels support.
def Norm_FloatTensor : RankedTensorOf<[BF16, F16, F32]>;
// What a payload may read besides floats: integer and boolean tensors
// (dropout keep-masks, padding masks, per-row ids); it computes in f32.
def Norm_InputTensor : RankedTensorOf<[BF16, F16, F32, I1, I8, I16, I32]>;
// Saved statistics are always fp32.
def Norm_StatsTensor : RankedTensorOf<[F32]>;

class Norm_GradOp<string mnemonic, list<Trait> traits = []>
    : Norm_Op<mnemonic, !listconcat(traits, [
        Pure, AttrSizedOperandSegments, AttrSizedResultSegments])> {
  let hasVerifier = 1;

  code sharedExtraClassDeclaration = [{
    /// The normalised (trailing) dimension size; ShapedType::kDynamic if
    /// unknown.
    int64_t getHiddenSize() {
      return getX().getType().getShape().back();
    }
    /// Number of leading (row) dimensions of `x`.
    int64_t getNumRowDims() { return getX().getType().getRank() - 1; }
  }];
}

def Norm_LayerNormGradOp : Norm_GradOp<"layer_norm_grad", [
    AllTypesMatch<["dy", "x"]>, AllTypesMatch<["mean", "rstd"]>]> {
  let summary = "LayerNorm backward: dx, and dweight/dbias when affine";
  let description = [{
    The backward of `y = (x - mean) * rstd * w + b` over the trailing
    dimension of `x`. All leading dimensions are rows; `mean` and `rstd` are
    the fp32 statistics saved by the forward, shaped like the leading
    dimensions of `x`.

    With `xhat = (x - mean) * rstd` and `wdy = w * dy` (or `(w + 1) * dy`
    with `zero_centered_weight`, or `dy` without a weight), computed in f32:

    ```
    dx      = rstd * (wdy - mean_n(wdy) - xhat * mean_n(xhat * wdy))
    dweight = sum_rows(dy * xhat)      // only when `weight` is given
    dbias   = sum_rows(dy)             // only when `bias` is given
    ```

    `dx` has the type of `x`; `dweight` and `dbias` have the types of
    `weight` and `bias`, which may differ in element type from `x` (an f32
    weight with bf16 activations is common). The value of `bias` is not
    used: its presence asks for `dbias` and fixes its type.

    Example:

    ```mlir
    %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd
        weight(%w : tensor<4096xf32>) bias(%b : tensor<4096xf32>)
        : tensor<8x4096xbf16>, tensor<8xf32>
        -> tensor<8x4096xbf16>, tensor<4096xf32>, tensor<4096xf32>
    ```
  }];
  let arguments = (ins
    Norm_FloatTensor:$dy,
    Norm_FloatTensor:$x,
    Norm_StatsTensor:$mean,
    Norm_StatsTensor:$rstd,
    Optional<Norm_FloatTensor>:$weight,
    Optional<Norm_FloatTensor>:$bias,
    UnitAttr:$zero_centered_weight
  );
  let results = (outs
    Norm_FloatTensor:$dx,
    Optional<Norm_FloatTensor>:$dweight,
    Optional<Norm_FloatTensor>:$dbias
  );
  let assemblyFormat = [{
    $dy `,` $x `,` $mean `,` $rstd
    (`weight` `(` $weight^ `:` type($weight) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    attr-dict `:` type($x) `,` type($mean)
    `->` custom<GradResultTypes>(ref($weight), ref($bias), type($dx),
                                 type($dweight), type($dbias))
  }];
  let extraClassDeclaration = sharedExtraClassDeclaration;
}

def Norm_RMSNormGradOp : Norm_GradOp<"rms_norm_grad", [
    AllTypesMatch<["dy", "x"]>]> {
  let summary = "RMSNorm backward: dx, and dweight/dbias when affine";
  let description = [{
    The backward of `y = x * rstd * w (+ b)` over the trailing dimension of
    `x`. All leading dimensions are rows; `rstd` is the fp32 statistic saved
    by the forward, shaped like the leading dimensions of `x`.

    With `xhat = x * rstd` and `wdy` as for `norm.layer_norm_grad`, in f32:

    ```
    dx      = rstd * (wdy - xhat * mean_n(xhat * wdy))
    dweight = sum_rows(dy * xhat)      // only when `weight` is given
    dbias   = sum_rows(dy)             // only when `bias` is given
    ```

    Example (Gemma-style weight stored as `w - 1`):

    ```mlir
    %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd
        weight(%w : tensor<2048xbf16>) {zero_centered_weight}
        : tensor<2x16x2048xbf16>, tensor<2x16xf32>
        -> tensor<2x16x2048xbf16>, tensor<2048xbf16>
    ```
  }];
  let arguments = (ins
    Norm_FloatTensor:$dy,
    Norm_FloatTensor:$x,
    Norm_StatsTensor:$rstd,
    Optional<Norm_FloatTensor>:$weight,
    Optional<Norm_FloatTensor>:$bias,
    UnitAttr:$zero_centered_weight
  );
  let results = (outs
    Norm_FloatTensor:$dx,
    Optional<Norm_FloatTensor>:$dweight,
    Optional<Norm_FloatTensor>:$dbias
  );
  let assemblyFormat = [{
    $dy `,` $x `,` $rstd
    (`weight` `(` $weight^ `:` type($weight) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    attr-dict `:` type($x) `,` type($rstd)
    `->` custom<GradResultTypes>(ref($weight), ref($bias), type($dx),
                                 type($dweight), type($dbias))
  }];
  let extraClassDeclaration = sharedExtraClassDeclaration;
}


def Norm_GroupNormGradOp : Norm_Op<"group_norm_grad", [
    Pure, AttrSizedOperandSegments, AttrSizedResultSegments,
    AllTypesMatch<["dy", "x"]>, AllTypesMatch<["mean", "rstd"]>]> {
  let summary = "GroupNorm backward: dx, and dweight/dbias when affine";
  let description = [{
    The backward of GroupNorm: `x` is `[N, C, spatial...]` (or, with
    `channels_last`, `[N, spatial..., C]`), its C channels split into
    `groups` groups of `C / groups` consecutive channels, and
    `y = (x - mean[n, g]) * rstd[n, g] * w[c] + b[c]`. `mean` and `rstd` are
    the fp32 statistics saved by the forward, `[N, groups]`, each over the
    `(C / groups) x spatial` elements of one sample's group (its slab).
    The channel count C must be static; N and the spatial dims may be
    dynamic.

    With `xhat = (x - mean) * rstd` and `wdy = w[c] * dy` (`dy` without a
    weight), computed in f32, and `mean_g` the mean over a slab:

    ```
    dx      = rstd * (wdy - mean_g(wdy) - xhat * mean_g(xhat * wdy))
    dweight = sum over (n, spatial) of dy * xhat   // per channel, with weight
    dbias   = sum over (n, spatial) of dy          // per channel, with bias
    ```

    It is a LayerNorm backward whose rows are the slabs and whose weight is
    indexed by the channel: `--norm-decompose` expands the channels into
    `[groups, C / groups]` and emits the same chain over a domain
    `[N, groups, C / groups, spatial...]` (channels last:
    `[N, spatial..., groups, C / groups]`), the row reductions over the
    slab's dims, the column reductions over N and the spatial dims.

    Example (a UNet block, NCHW):

    ```mlir
    %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd
        weight(%w : tensor<320xf32>) bias(%b : tensor<320xf32>)
        {groups = 32 : i64}
        : tensor<8x320x64x64xbf16>, tensor<8x32xf32>
        -> tensor<8x320x64x64xbf16>, tensor<320xf32>, tensor<320xf32>
    ```
  }];
  let arguments = (ins
    Norm_FloatTensor:$dy,
    Norm_FloatTensor:$x,
    Norm_StatsTensor:$mean,
    Norm_StatsTensor:$rstd,
    Optional<Norm_FloatTensor>:$weight,
    Optional<Norm_FloatTensor>:$bias,
    ConfinedAttr<I64Attr, [IntPositive]>:$groups,
    UnitAttr:$channels_last
  );
  let results = (outs
    Norm_FloatTensor:$dx,
    Optional<Norm_FloatTensor>:$dweight,
    Optional<Norm_FloatTensor>:$dbias
  );
  let assemblyFormat = [{
    $dy `,` $x `,` $mean `,` $rstd
    (`weight` `(` $weight^ `:` type($weight) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    attr-dict `:` type($x) `,` type($mean)
    `->` custom<GradResultTypes>(ref($weight), ref($bias), type($dx),
                                 type($dweight), type($dbias))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The dim of `x` that holds the channels (1, or the last with
    /// `channels_last`).
    int64_t getChannelDim() {
      return getChannelsLast() ? getX().getType().getRank() - 1 : 1;
    }
    /// C (static: the verifier requires it).
    int64_t getNumChannels() {
      return getX().getType().getShape()[getChannelDim()];
    }
    /// `groups` as a signed size (the attribute is positive).
    int64_t getNumGroups() { return static_cast<int64_t>(getGroups()); }
    /// Channels per group, C / groups.
    int64_t getGroupSize() { return getNumChannels() / getNumGroups(); }
  }];
}

//===----------------------------------------------------------------------===//
// The fused mixed-order reduction
//===----------------------------------------------------------------------===//

def Norm_MixedReductionOp : Norm_Op<"mixed_reduction", [
    AttrSizedOperandSegments, AttrSizedResultSegments,
    RecursiveMemoryEffects, SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "Row reductions, an elementwise body and column reductions "
                "over one [rows..., N] domain";
  let description = [{
    One mixed-order reduction group, as `--norm-fuse-mixed-reductions` finds
    it: everything a norm backward computes in one pass over the rows.

    The domain is the shape `[rows..., N]` of the `full` inputs (all full
    inputs share it). `row` inputs are per-row values (shape `[rows...]`),
    `col` inputs per-column values (shape `[N]`).

    `n_dim` (optional) says which dim of the domain is N; without it N is
    the last. A channels-first norm (ConvNeXt's LayerNorm2d: x `[B, C, S]`,
    statistics `[B, S]`, weight `[C]`) has `n_dim = 1`: the rows are the
    other dims in order (`[B, S]`), and the row inputs have that shape.

    Multi-axis domains (`row_sum_dims` and `col_dims`, together, without
    `n_dim`): the row sums run over the domain dims `row_sum_dims` and the
    column sums over the dims not in `col_dims`. Row inputs (and row
    results) are indexed by the dims not in `row_sum_dims`, in order; col
    inputs, `col_init` and column results by `col_dims`, in order. The two
    sets must share a dim (the column sums cut across the rows), and
    neither may be empty or hold every dim. The 2-D form above is the case
    `row_sum_dims = col_dims = [n_dim]`, and is spelled with `n_dim` only.
    - adaLN over x `[B, S, N]`: `row_sum_dims = [2]`, `col_dims = [0, 2]`:
      the statistics are `[B, S]`, the per-sample `(1 + scale)` and shift and
      their gradients `[B, N]` (sums over the S tokens of each sample).
    - GroupNorm over `[N, G, C/G, HW]` (NCHW): `row_sum_dims = [2, 3]`,
      `col_dims = [1, 2]`: statistics `[N, G]`, weight, bias and their
      gradients `[G, C/G]` (sums over N and HW per channel). Channels-last,
      `[N, HW, G, C/G]`: `row_sum_dims = [1, 3]`, `col_dims = [2, 3]`.

    Each region is a scalar
    payload evaluated at one point `(r, n)` of the domain; its block
    arguments are, in order, the elements of the `full`, `row` and `col`
    inputs at that point, then row results (below). Values defined above the
    op (scalar constants) may be used in the regions.

    - `row_stages`: one region per stage of row reductions. Stage `s` also
      receives the row results of stages `0..s-1` and yields one contribution
      per row result: `row_result[r] = sum_n contribution(r, n)`. Chained
      reductions (mean, then variance over `x - mean`, then the dx sums) are
      successive stages.
    - `elementwise`: receives all row results and yields one element per
      `full_results` value (dx, a residual gradient, ...).
    - `columns`: receives all row results and yields one contribution per
      `col_results` value: `col_result[n] = col_init[n] + sum_r
      contribution(r, n)`, summed over all leading dims. `col_init` is the
      value the column reduction started from (zeros, or an existing gradient
      to accumulate into).

    Every input and result holds bf16, f16 or f32 elements, and row stages
    yield bf16, f16 or f32 contributions: sums are computed in f32 (f64 is
    refused rather than silently accumulated at f32 precision).

    Sums are additive and their order is not specified here;
    `--norm-partial-accumulate` fixes it (fp32 partials per program, then a
    fixed-order final reduction), which makes results deterministic.

    Example (RMSNorm backward, f32, with weight):

    ```mlir
    %dx, %dw = norm.mixed_reduction
        full(%x, %dy : tensor<4x8xf32>, tensor<4x8xf32>)
        row(%rstd : tensor<4xf32>) col(%w : tensor<8xf32>)
        col_init(%zeros : tensor<8xf32>)
        row_stages {
        ^bb0(%xe: f32, %dye: f32, %r: f32, %we: f32):
          %xhat = arith.mulf %xe, %r : f32
          %wdy = arith.mulf %dye, %we : f32
          %c = arith.mulf %xhat, %wdy : f32
          norm.yield %c : f32
        }
        elementwise {
        ^bb0(%xe: f32, %dye: f32, %r: f32, %we: f32, %s: f32):
          ...
          norm.yield %dxe : f32
        }
        columns {
        ^bb0(%xe: f32, %dye: f32, %r: f32, %we: f32, %s: f32):
          %xhat = arith.mulf %xe, %r : f32
          %c = arith.mulf %dye, %xhat : f32
          norm.yield %c : f32
        } -> full(tensor<4x8xf32>) col(tensor<8xf32>)
    ```
  }];
  // The op computes in f32 (row sums, column partials): its values are
  // bf16, f16 or f32; f64 would silently lose precision, so it is refused.
  let arguments = (ins
    Variadic<Norm_InputTensor>:$full,
    Variadic<Norm_InputTensor>:$row,
    Variadic<Norm_InputTensor>:$col,
    Variadic<Norm_FloatTensor>:$col_init,
    OptionalAttr<I64Attr>:$n_dim,
    OptionalAttr<DenseI64ArrayAttr>:$row_sum_dims,
    OptionalAttr<DenseI64ArrayAttr>:$col_dims
  );
  let results = (outs
    Variadic<Norm_FloatTensor>:$full_results,
    Variadic<Norm_FloatTensor>:$col_results
  );
  // Only the last region may be variadic; the syntax still reads in
  // evaluation order (stages, elementwise, columns).
  let regions = (region
    SizedRegion<1>:$elementwise,
    SizedRegion<1>:$columns,
    VariadicRegion<SizedRegion<1>>:$row_stages
  );
  let assemblyFormat = [{
    `full` `(` $full `:` type($full) `)`
    (`row` `(` $row^ `:` type($row) `)`)?
    (`col` `(` $col^ `:` type($col) `)`)?
    (`col_init` `(` $col_init^ `:` type($col_init) `)`)?
    `row_stages` $row_stages
    `elementwise` $elementwise
    `columns` $columns
    attr-dict
    `->` (`full` `(` type($full_results)^ `)`)?
    (`col` `(` type($col_results)^ `)`)?
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of block arguments every region starts with (one per
    /// full, row and col input).
    unsigned getNumInputs() {
      return getFull().size() + getRow().size() + getCol().size();
    }
    /// Row results produced by the stages before `stage`.
    unsigned getNumRowResultsBefore(unsigned stage);
    /// All row results, of all stages.
    unsigned getNumRowResults() {
      return getNumRowResultsBefore(getRowStages().size());
    }
    /// The domain shape (N at getNDim(), the rows at the other dims).
    ArrayRef<int64_t> getDomainShape() {
      return cast<RankedTensorType>(getFull().front().getType()).getShape();
    }
    /// Whether the domain is multi-axis (`row_sum_dims` / `col_dims`): its
    /// row inputs are not [rows...] of one N, nor its col inputs [N]. The
    /// 2-D helpers below (N, the row shape, ...) are for other ops only,
    /// and for batched rows (getBatchRank).
    bool isMultiAxis() { return getRowSumDims() || getColDims(); }
    /// Batched rows (a multi-axis domain that is a 2-D [rows, N] problem
    /// per point of its leading k dims, adaLN's [B, S, N]): k, else 0
    /// (norm::batchedRowsRank). N is the last dim, the 2-D helpers below
    /// hold for it, and the col inputs and results are [batch..., N].
    int64_t getBatchRank() {
      if (!isMultiAxis())
        return 0;
      return batchedRowsRank(getDomainShape().size(), getRowSumDimList(),
                             getColDimList());
    }
    /// A GroupNorm-like multi-axis domain (norm::slabDomainOf), if it is
    /// one.
    std::optional<SlabDomain> getSlabDomain() {
      if (!isMultiAxis())
        return std::nullopt;
      return slabDomainOf(getDomainShape(), getRowSumDimList(),
                          getColDimList());
    }
    /// The dims the row stages sum over ([N's dim] in the 2-D form).
    SmallVector<int64_t> getRowSumDimList() {
      if (std::optional<ArrayRef<int64_t>> dims = getRowSumDims())
        return SmallVector<int64_t>(*dims);
      return {int64_t(getNDimIndex())};
    }
    /// The dims that index col inputs and results ([N's dim] in 2-D).
    SmallVector<int64_t> getColDimList() {
      if (std::optional<ArrayRef<int64_t>> dims = getColDims())
        return SmallVector<int64_t>(*dims);
      return {int64_t(getNDimIndex())};
    }
    /// The dims that index row inputs: those not in getRowSumDimList().
    SmallVector<int64_t> getRowDimList();
    /// The shape of the domain at `dims`.
    SmallVector<int64_t> getDomainShapeAt(ArrayRef<int64_t> dims) {
      SmallVector<int64_t> shape;
      for (int64_t d : dims)
        shape.push_back(getDomainShape()[d]);
      return shape;
    }
    /// The dim of the domain that is N (the last one unless `n_dim`); 2-D
    /// domains only.
    unsigned getNDimIndex() {
      if (std::optional<uint64_t> d = getNDim())
        return *d;
      return getDomainShape().size() - 1;
    }
    /// Whether N is the domain's last dim (each row contiguous).
    bool isRowMajor() { return getNDimIndex() + 1 == getDomainShape().size(); }
    /// The shape of a row input: the domain without the row sums' dims
    /// (without N in 2-D).
    SmallVector<int64_t> getRowShape() {
      return getDomainShapeAt(getRowDimList());
    }
    /// The shape of a col input, `col_init` and a column result.
    SmallVector<int64_t> getColShape() {
      return getDomainShapeAt(getColDimList());
    }
    /// The static N (ShapedType::kDynamic if it is not).
    int64_t getStaticCols() { return getDomainShape()[getNDimIndex()]; }
    /// Static product of the dims after N (the elements between two
    /// consecutive columns of a row), or ShapedType::kDynamic.
    int64_t getStaticInner() {
      int64_t inner = 1;
      for (int64_t d : getDomainShape().drop_front(getNDimIndex() + 1))
        inner = ShapedType::isDynamic(d) || ShapedType::isDynamic(inner)
                    ? ShapedType::kDynamic : inner * d;
      return inner;
    }
  }];
}

def Norm_YieldOp : Norm_Op<"yield", [
    Pure, Terminator, ReturnLike,
    ParentOneOf<["MixedReductionOp"]>]> {
  let summary = "Yields the values of a norm.mixed_reduction region";
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // NORM_DIALECT_NORM_IR_NORMOPS_TD
