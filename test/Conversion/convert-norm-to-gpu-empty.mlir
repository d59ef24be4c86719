// N = 0 on the GPU (issue 14: a SIGFPE in planKernel, and `compile` printed
// nothing): a located error. (Rows = 0 is a run-time size the launcher
// handles.)
// RUN: norm-opt %s --convert-norm-to-gpu -verify-diagnostics
// RUN: not norm-opt compile %s -o %t.ptx 2>&1 | FileCheck %s
// RUN: not norm-opt %s --norm-lower-to-nvvm -o /dev/null 2>&1 | FileCheck %s
// CHECK: convert-norm-to-gpu-empty.mlir:[[@LINE+5]]:{{[0-9]+}}: error: cannot map onto the GPU: N (dim 1 of the domain 'tensor<?x0xf32>') is 0; the kernels need at least one column

func.func @columns_zero(%x: tensor<?x0xf32>, %init: tensor<0xf32>)
    -> (tensor<?x0xf32>, tensor<0xf32>) {
  // expected-error @+1 {{cannot map onto the GPU: N (dim 1 of the domain 'tensor<?x0xf32>') is 0; the kernels need at least one column}}
  %dx, %dw = norm.mixed_reduction full(%x : tensor<?x0xf32>) col_init(%init : tensor<0xf32>) row_stages {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %s: f32):
    %v = arith.mulf %a, %s : f32
    norm.yield %v : f32
  } columns {
  ^bb0(%a: f32, %s: f32):
    norm.yield %a : f32
  } -> full(tensor<?x0xf32>) col(tensor<0xf32>)
  return %dx, %dw : tensor<?x0xf32>, tensor<0xf32>
}
