// Regression: when a column result accumulates into a function argument
// (dW added to the previous gradient: `outs(%prev_dw)`), the deallocation
// pipeline returns a `bufferization.clone` of that buffer; --norm-lower-to-cpu
// must lower it (convert-bufferization-to-memref), so the output is pure
// LLVM dialect that mlir-runner accepts.
//
// RUN: norm-opt %s --norm-lower-to-cpu=programs=2 | FileCheck %s
// RUN: %if mlir-opt-plugin %{ %mlir_opt_plugin %s --pass-pipeline='builtin.module(norm-lower-to-cpu{programs=2})' | FileCheck %s %}
// CHECK: llvm.func @accumulate_dw
// CHECK-NOT: bufferization.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @accumulate_dw(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %prev_dw: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %er = tensor.empty() : tensor<4xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %dy : tensor<4x8xf32>, tensor<4x8xf32>) outs(%zr : tensor<4xf32>) {
  ^bb0(%a: f32, %g: f32, %o: f32):
    %p = arith.mulf %a, %g : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %dx = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %s : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%g: f32, %a: f32, %o: f32):
    %v = arith.subf %g, %a : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %dw = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x, %dy : tensor<4x8xf32>, tensor<4x8xf32>) outs(%prev_dw : tensor<8xf32>) {
  ^bb0(%a: f32, %g: f32, %o: f32):
    %p = arith.mulf %a, %g : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %dx, %dw : tensor<4x8xf32>, tensor<8xf32>
}
