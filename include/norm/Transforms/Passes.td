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

#endif // NORM_TRANSFORMS_PASSES_TD
