// Malformed IR: each chunk fails to parse; the error names this file with
// the line and column of the offending token (split chunks keep the line
// numbers of the whole file), and no IR is printed (stdout holds only the
// chunk separators).
// RUN: not norm-opt %s -split-input-file 2>&1 | FileCheck %s
// RUN: not norm-opt %s -split-input-file 2>/dev/null \
// RUN:   | FileCheck %s --check-prefix=STDOUT --allow-empty
// STDOUT-NOT: {{[[:alnum:]]}}

func.func @missing_colon(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}syntax-error.mlir:[[@LINE+3]]:12: error: expected ':'
  // CHECK-NEXT: {{^}}  return %x{{$}}
  // CHECK-NEXT: {{^}}           ^{{$}}
  return %x
}

// -----

// An unknown element type.
// CHECK: {{.*}}syntax-error.mlir:[[@LINE+1]]:34: error: expected non-function type
func.func @bad_type(%x: tensor<4xbf17>) {
  return
}

// -----

// An unbalanced signature.
// CHECK: {{.*}}syntax-error.mlir:[[@LINE+1]]:40: error: expected ')'
func.func @unbalanced(%x: tensor<4xf32> -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

func.func @undefined_value() -> tensor<4xf32> {
  // CHECK: {{.*}}syntax-error.mlir:[[@LINE+1]]:10: error: use of undeclared SSA value name
  return %nope : tensor<4xf32>
}

// -----

// The norm ops' custom syntax: the `->` before the result types is missing.
func.func @norm_missing_arrow(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %rstd: tensor<4xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}syntax-error.mlir:[[@LINE+1]]:75: error: expected '->'
  %dx = norm.rms_norm_grad %dy, %x, %rstd : tensor<4x8xf32>, tensor<4xf32> tensor<4x8xf32>
  return %dx : tensor<4x8xf32>
}

// -----

// The norm ops' custom syntax: `weight` without its type.
func.func @norm_weight_without_type(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %rstd: tensor<4xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}syntax-error.mlir:[[@LINE+1]]:52: error: expected ':'
  %dx = norm.rms_norm_grad %dy, %x, %rstd weight(%w) : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  return %dx : tensor<4x8xf32>
}

// -----

// The input ends inside a region: reported at the end of the last token.
// CHECK: {{.*}}syntax-error.mlir:[[@LINE+2]]:9: error: expected operation name in quotes
func.func @unterminated() {
  return
