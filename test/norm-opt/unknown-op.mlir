// Ops the driver does not know: an unregistered dialect (custom and generic
// form) and an unknown op of a registered dialect (norm, arith). Each is an
// error at the op's location, nothing is printed, and the exit code is
// non-zero.
// RUN: not norm-opt %s -split-input-file 2>&1 | FileCheck %s
// RUN: not norm-opt %s -split-input-file 2>/dev/null \
// RUN:   | FileCheck %s --check-prefix=STDOUT --allow-empty
// STDOUT-NOT: {{[[:alnum:]]}}

func.func @unregistered_dialect_custom(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}unknown-op.mlir:[[@LINE+2]]:8: error: Dialect `foo' not found for custom op 'foo.bar'
  // CHECK: {{.*}}unknown-op.mlir:[[@LINE+1]]:8: note: Available dialects: {{.*}}linalg{{.*}}norm{{.*}}tensor
  %y = foo.bar %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @unregistered_dialect_generic(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}unknown-op.mlir:[[@LINE+1]]:17: error: operation being parsed with an unregistered dialect. If this is intended, please use -allow-unregistered-dialect
  %y = "foo.bar"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @unknown_norm_op_generic(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}unknown-op.mlir:[[@LINE+1]]:8: error: unregistered operation 'norm.frobnicate' found in dialect ('norm') that does not allow unknown operations
  %y = "norm.frobnicate"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @unknown_norm_op_custom(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}unknown-op.mlir:[[@LINE+1]]:8: error: custom op 'norm.layer_norm' is unknown
  %y = norm.layer_norm %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @unknown_arith_op(%a: f32, %b: f32) -> f32 {
  // CHECK: {{.*}}unknown-op.mlir:[[@LINE+1]]:8: error: custom op 'arith.addff' is unknown
  %c = arith.addff %a, %b : f32
  return %c : f32
}
