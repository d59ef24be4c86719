//===- NormDialect.td - The norm dialect -------------------*- tablegen -*-===//
//
// Part of norm-opt. The norm dialect: normalization backward ops.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_NORMDIALECT_TD
#define NORM_DIALECT_NORM_IR_NORMDIALECT_TD

include "mlir/IR/OpBase.td"

def Norm_Dialect : Dialect {
  let name = "norm";
  let cppNamespace = "::mlir::norm";
  let summary = "Normalization backward ops and their mixed-order reductions";
  let description = [{
    The `norm` dialect holds the backward of LayerNorm and RMSNorm at the
    level a front end that already knows the op can emit
    (`norm.layer_norm_grad`, `norm.rms_norm_grad`). `--norm-decompose` lowers
    them to the linalg-on-tensors form an ML compiler emits for the same
    math, which is the single input form of the rest of the pipeline.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
  let useDefaultAttributePrinterParser = 1;
}

class Norm_Op<string mnemonic, list<Trait> traits = []>
    : Op<Norm_Dialect, mnemonic, traits>;

#endif // NORM_DIALECT_NORM_IR_NORMDIALECT_TD
