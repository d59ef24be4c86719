//===- NormOps.td - norm dialect ops -----------------------*- tablegen -*-===//
//
// Part of norm-opt. High-level normalization backward ops on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_NORMOPS_TD
#define NORM_DIALECT_NORM_IR_NORMOPS_TD

include "norm/Dialect/Norm/IR/NormDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Activations and weights: the float types norm backward kernels support.
def Norm_FloatTensor : RankedTensorOf<[BF16, F16, F32]>;
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
    `->` type($dx) (`,` type($dweight)^)? (`,` type($dbias)^)?
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
    `->` type($dx) (`,` type($dweight)^)? (`,` type($dbias)^)?
  }];
  let extraClassDeclaration = sharedExtraClassDeclaration;
}

#endif // NORM_DIALECT_NORM_IR_NORMOPS_TD
