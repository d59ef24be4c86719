// Regression: rank-3 input with both leading dims dynamic ([?, ?, N]).
// Partial accumulation collapses the full inputs to [?, N]; it must bring
// dx back with tensor.reshape, not tensor.expand_shape: LLVM 22's
// --expand-strided-metadata crashes on a memref.expand_shape with two
// dynamic sizes in one group (llvm-project issue 186830). The numeric
// suites check the results (differential "lead" programs, the lit input
// @rank3_dynamic_rows_f16_bias_only).
//
// RUN: norm-opt %s --norm-lower-to-cpu=programs=3 | FileCheck %s
// CHECK: llvm.func @rms_rank3_dynamic
// CHECK-NOT: memref.expand_shape

func.func @rms_rank3_dynamic(%dy: tensor<?x?x8xf32>, %x: tensor<?x?x8xf32>, %rstd: tensor<?x?xf32>, %w: tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<8xf32>) : tensor<?x?x8xf32>, tensor<?x?xf32> -> tensor<?x?x8xf32>, tensor<8xf32>
  return %dx, %dw : tensor<?x?x8xf32>, tensor<8xf32>
}
