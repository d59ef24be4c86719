//===- Passes.td - norm-opt transformation passes ----------*- tablegen -*-===//
//
// Part of norm-opt. Pass names are a stable interface: other compilers
// script against them. Rename only with a deprecation alias.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_TRANSFORMS_PASSES_TD
#define NORM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def NormDecompose : Pass<"norm-decompose"> {
  let summary = "Lower norm.*_grad ops to linalg on tensors, as a front end "
                "would emit them";
  let description = [{
    Rewrites every `norm.layer_norm_grad` and `norm.rms_norm_grad` into the
    linalg-on-tensors chain an ML front end (torch-mlir, IREE's importers)
    emits for the same math: one `linalg.generic` per step, `arith.extf` of
    bf16/f16 inputs to f32, row reductions over the trailing dim whose
    results are broadcast back through indexing maps, column reductions over
    all leading dims, and `arith.truncf` back to the storage types. It is the
    canonical input of the recognition pass, so the whole pipeline has one
    entry form. The pass works on any op holding norm ops (anchor with
    `--pass-pipeline` or run it on the module).

    Before:

    ```mlir
    %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<8xf32>)
        : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>, tensor<8xf32>
    ```

    After (abridged; maps: `#id = (r, n) -> (r, n)`, `#row = (r, n) -> (r)`,
    `#col = (r, n) -> (n)`):

    ```mlir
    %xhat = linalg.generic {indexing_maps = [#id, #row, #id],
        iterator_types = ["parallel", "parallel"]}
        ins(%x, %rstd : ...) outs(%e0 : tensor<4x8xf32>) { mulf }
    %wdy  = linalg.generic {[#id, #col, #id], parallel x2}
        ins(%dy, %w) ... { mulf }
    %s    = linalg.generic {[#id, #id, #row], ["parallel", "reduction"]}
        ins(%xhat, %wdy) outs(%zeros_rows) { mulf, addf }
    %dx   = linalg.generic {[#id, #id, #row, #row, #id], parallel x2}
        ins(%xhat, %wdy, %s, %rstd) ... { divf by N, mulf, subf, mulf }
    %dw   = linalg.generic {[#id, #id, #col], ["reduction", "parallel"]}
        ins(%dy, %xhat) outs(%zeros_cols) { mulf, addf }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def NormFuseMixedReductions
    : Pass<"norm-fuse-mixed-reductions", "::mlir::func::FuncOp"> {
  let summary = "Find the row and column reductions of a norm backward and "
                "fuse them into one norm.mixed_reduction";
  let description = [{
    A structural match over linalg on tensors (`linalg.generic` and the
    named `linalg.reduce` / `linalg.map` / `linalg.broadcast`, seen through
    their generic form without rewriting them). Over one iteration domain
    `[rows..., N]` it finds a *mixed-order reduction group*: row reductions
    (iterators `[parallel..., reduction]`), the elementwise ops that consume
    their results broadcast back over `N` (dx and its epilogues), and column
    reductions (`[reduction..., parallel]`) of values computed from the
    same inputs. Reductions join a group when they read the same
    full-domain tensor (`x`, `dy`), share an intermediate, or chain through
    row results (statistics recomputed inside the backward become successive
    row stages). Unit dims read with a constant-0 map (keepdim statistics,
    TOSA's `tensor.expand_shape` after `linalg.reduce`) are looked through.

    Each group becomes one `norm.mixed_reduction` whose regions hold the
    cloned scalar payloads; the group's ops and the helpers only they used
    are erased. Everything else stays exactly as it was. A group is left
    alone (and a remark says why) when one pass over the rows would be
    wrong or impossible: a column-reduction result that feeds the row
    computation, reductions over different domains, a non-additive
    combiner, a row reduction that starts from something other than zero.

    Before (abridged, one generic per step):

    ```mlir
    %s  = linalg.generic {iterator_types = ["parallel", "reduction"]}
            ins(%xhat, %wdy) outs(%zero_rows)   // sum_n(xhat * wdy)
    %dx = linalg.generic {iterator_types = ["parallel", "parallel"]}
            ins(%xhat, %wdy, %s, %rstd) ...     // %s broadcast over n
    %dw = linalg.generic {iterator_types = ["reduction", "parallel"]}
            ins(%dy, %xhat) outs(%zero_cols)    // sum_rows(dy * xhat)
    ```

    After:

    ```mlir
    %dx, %dw = norm.mixed_reduction full(%x, %dy : ...) row(%rstd : ...)
        col(%w : ...) col_init(%zero_cols : ...)
        row_stages { xhat * wdy } elementwise { dx } columns { dy * xhat }
        -> full(tensor<...>) col(tensor<...>)
    ```
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark per candidate reduction: fused (with the group's "
           "size) or why not">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::norm::NormDialect"
  ];
}

#endif // NORM_TRANSFORMS_PASSES_TD
