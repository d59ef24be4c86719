// Regression: rank-3 input with both leading dims dynamic ([?, ?, N]).
// Partial accumulation collapses the full inputs to [?, N]; it must bring
// dx back with tensor.reshape, not tensor.expand_shape: LLVM 22's
// --expand-strided-metadata crashes on a memref.expand_shape with two
// dynamic sizes in one group (llvm-project issue 186830). The numeric
// suites check the results (differential "lead" programs, the lit input
// @rank3_dynamic_rows_f16_bias_only).
//
// The same for a multi-axis group's column results: adaLN's d(shift)
// [B, N] with B and N both dynamic comes back from [B * N] the same way
// (found by the differential test's multi-axis programs).
//
// RUN: norm-opt %s --norm-lower-to-cpu=programs=3 | FileCheck %s
// CHECK-DAG: llvm.func @rms_rank3_dynamic
// CHECK-DAG: llvm.func @adaln_dynamic_b_and_n
// CHECK-NOT: memref.expand_shape

func.func @rms_rank3_dynamic(%dy: tensor<?x?x8xf32>, %x: tensor<?x?x8xf32>, %rstd: tensor<?x?xf32>, %w: tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<8xf32>) : tensor<?x?x8xf32>, tensor<?x?xf32> -> tensor<?x?x8xf32>, tensor<8xf32>
  return %dx, %dw : tensor<?x?x8xf32>, tensor<8xf32>
}

func.func @adaln_dynamic_b_and_n(%dy: tensor<?x3x?xf32>) -> (tensor<?x3x?xf32>, tensor<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = tensor.dim %dy, %c0 : tensor<?x3x?xf32>
  %n = tensor.dim %dy, %c2 : tensor<?x3x?xf32>
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty(%b) : tensor<?x3xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<?x3xf32>) -> tensor<?x3xf32>
  %ec = tensor.empty(%b, %n) : tensor<?x?xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<?x?xf32>) -> tensor<?x?xf32>
  %s1 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy : tensor<?x3x?xf32>) outs(%zr : tensor<?x3xf32>) {
  ^bb0(%d: f32, %o: f32):
    %v = arith.addf %o, %d : f32
    linalg.yield %v : f32
  } -> tensor<?x3xf32>
  %e = tensor.empty(%b, %n) : tensor<?x3x?xf32>
  %dx = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy, %s1 : tensor<?x3x?xf32>, tensor<?x3xf32>) outs(%e : tensor<?x3x?xf32>) {
  ^bb0(%d: f32, %t: f32, %o: f32):
    %v = arith.subf %d, %t : f32
    linalg.yield %v : f32
  } -> tensor<?x3x?xf32>
  %dsh = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dy : tensor<?x3x?xf32>) outs(%zc : tensor<?x?xf32>) {
  ^bb0(%d: f32, %o: f32):
    %v = arith.addf %o, %d : f32
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  return %dx, %dsh : tensor<?x3x?xf32>, tensor<?x?xf32>
}
