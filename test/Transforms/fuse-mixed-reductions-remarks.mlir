// RUN: norm-opt %s -split-input-file -norm-fuse-mixed-reductions='remarks=true' -verify-diagnostics -mlir-print-op-on-diagnostic=false | FileCheck %s

// What a single pass over the rows cannot compute is left exactly as it was,
// and the remark says why. A fused group gets a remark with its size.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @fused_remark
// CHECK:         norm.mixed_reduction
func.func @fused_remark(%x: tensor<8x16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %er = tensor.empty() : tensor<8xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{fused a mixed-order reduction group of 3 ops: 1 row reduction(s) in 1 stage(s), 1 column reduction(s), 1 elementwise op(s)}}
  %s = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %dy : tensor<8x16xf32>, tensor<8x16xf32>) outs(%zr : tensor<8xf32>) {
  ^bb0(%a: f32, %g: f32, %o: f32):
    %p = arith.mulf %a, %g : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %dx = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %s : tensor<8x16xf32>, tensor<8xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%g: f32, %a: f32, %o: f32):
    %v = arith.subf %g, %a : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  %ec = tensor.empty() : tensor<16xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
  %dw = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<8x16xf32>) outs(%zc : tensor<16xf32>) {
  ^bb0(%g: f32, %o: f32):
    %v = arith.addf %o, %g : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %dx, %dw : tensor<8x16xf32>, tensor<16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// The column sum feeds the row computation (dx uses dw): it needs all rows
// before any row can finish.
// CHECK-LABEL: func.func @column_result_feeds_rows
// CHECK-NOT:     norm.mixed_reduction
// CHECK-COUNT-3: linalg.generic
func.func @column_result_feeds_rows(%x: tensor<8x16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %ec = tensor.empty() : tensor<16xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
  // expected-remark @+1 {{not fused: a column reduction result feeds the row computation, so one pass over the rows cannot compute it}}
  %dw = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<8x16xf32>) outs(%zc : tensor<16xf32>) {
  ^bb0(%g: f32, %o: f32):
    %v = arith.addf %o, %g : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  %er = tensor.empty() : tensor<8xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{not fused: a column reduction result feeds the row computation}}
  %s = linalg.generic {indexing_maps = [#id, #col, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %dw : tensor<8x16xf32>, tensor<16xf32>) outs(%zr : tensor<8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %p = arith.mulf %a, %c : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %dx = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %s : tensor<8x16xf32>, tensor<8xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%g: f32, %a: f32, %o: f32):
    %v = arith.mulf %g, %a : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %dx, %dw : tensor<8x16xf32>, tensor<16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// A row sum over [8, 16] used by ops over [8, 32]: different domains.
// CHECK-LABEL: func.func @different_domains
// CHECK-NOT:     norm.mixed_reduction
// CHECK-COUNT-3: linalg.generic
func.func @different_domains(%x: tensor<8x16xf32>, %y: tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<32xf32>) {
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty() : tensor<8xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{not fused: no additive column reduction (over the rows) shares its inputs}}
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%zr : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %e = tensor.empty() : tensor<8x32xf32>
  %t = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %s : tensor<8x32xf32>, tensor<8xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<8x32xf32>
  %ec = tensor.empty() : tensor<32xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<32xf32>) -> tensor<32xf32>
  // expected-remark @+1 {{not fused: it reads a reduction over a different domain}}
  %c = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%t : tensor<8x32xf32>) outs(%zc : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  return %t, %c : tensor<8x32xf32>, tensor<32xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// A column max is not an additive reduction: partial sums do not apply.
// CHECK-LABEL: func.func @non_additive_column_reduction
// CHECK-NOT:     norm.mixed_reduction
// CHECK:         arith.maximumf
func.func @non_additive_column_reduction(%x: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty() : tensor<8xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{not fused: no additive column reduction (over the rows) shares its inputs}}
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%zr : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %ec = tensor.empty() : tensor<16xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
  // expected-remark @+1 {{not fused: the reduction is not additive (its combiner is arith.maximumf)}}
  %m = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%zc : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %s, %m : tensor<8xf32>, tensor<16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// Row reductions alone (a softmax-like backward) are not a mixed group.
// CHECK-LABEL: func.func @row_reductions_only
// CHECK-NOT:     norm.mixed_reduction
func.func @row_reductions_only(%y: tensor<8x16xf32>, %dy: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty() : tensor<8xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{not fused: no additive column reduction (over the rows) shares its inputs}}
  %s = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y, %dy : tensor<8x16xf32>, tensor<8x16xf32>) outs(%zr : tensor<8xf32>) {
  ^bb0(%a: f32, %g: f32, %o: f32):
    %p = arith.mulf %a, %g : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %dx = linalg.generic {indexing_maps = [#id, #id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %dy, %s : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %g: f32, %b: f32, %o: f32):
    %d = arith.subf %g, %b : f32
    %v = arith.mulf %a, %d : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %dx : tensor<8x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// A row reduction that starts from a non-zero value is not recognised.
// CHECK-LABEL: func.func @row_reduction_from_nonzero
// CHECK-NOT:     norm.mixed_reduction
func.func @row_reduction_from_nonzero(%x: tensor<8x16xf32>, %init: tensor<8xf32>) -> (tensor<8xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  // expected-remark @+1 {{not fused: the row reduction starts from a value other than a zero fill}}
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %ec = tensor.empty() : tensor<16xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
  // expected-remark @+1 {{not fused: no row reduction (over N) shares its inputs}}
  %c = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%zc : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %s, %c : tensor<8xf32>, tensor<16xf32>
}
