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
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group reported on its first row reduction}}
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
// A row sum over [8, 16] used by ops over [8, 32]: different domains. The
// [8, 16] sum is a neighbour of the [8, 32] ops (an input they read), and
// [8, 32] has no row reduction of its own.
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
  // expected-remark @+1 {{not fused: no row reduction (over N) shares its inputs}}
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

// -----

// A non-additive row reduction (%u) reads a result the group would compute
// (%t) and feeds the group's dx: the fused op would read its own result, a
// use-def cycle (before: "fused", then "operand #1 does not dominate this
// use"). Nothing changes.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @cycle
// CHECK-NOT:     norm.mixed_reduction
// CHECK-COUNT-6: linalg.generic
// CHECK-NOT:     norm.mixed_reduction
func.func @cycle(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %er = tensor.empty() : tensor<4xf32>
  %ec = tensor.empty() : tensor<8xf32>
  %zr = linalg.fill ins(%c0 : f32) outs(%er : tensor<4xf32>) -> tensor<4xf32>
  %zc = linalg.fill ins(%c0 : f32) outs(%ec : tensor<8xf32>) -> tensor<8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %dy : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  // expected-remark @+1 {{not fused: an input of the group ('linalg.generic') is computed from one of its results (fusing would make a use-def cycle)}}
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<4x8xf32>) outs(%zr : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %t = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %s : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  // A row reduction whose combiner is not additive, reading %t.
  // expected-remark @+1 {{not fused: the reduction is not additive (its combiner is arith.subf)}}
  %u = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%t : tensor<4x8xf32>) outs(%zr : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.subf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %dx = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %u : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  // expected-remark @+1 {{not fused: an input of the group ('linalg.generic') is computed from one of its results (fusing would make a use-def cycle)}}
  %dw = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%p : tensor<4x8xf32>) outs(%zc : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %dx, %dw : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// f64 values: the fused op computes in f32, so an f64 group stays unfused
// (before: fused, then every lowering failed on `arith.extf f64 -> f32`).
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @f64_group
// CHECK-NOT:     norm.mixed_reduction
func.func @f64_group(%x: tensor<8x16xf64>, %dy: tensor<8x16xf64>) -> (tensor<8x16xf64>, tensor<16xf64>) {
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<8x16xf64>
  %er = tensor.empty() : tensor<8xf64>
  %zr = linalg.fill ins(%zero : f64) outs(%er : tensor<8xf64>) -> tensor<8xf64>
  // expected-remark @+1 {{not fused: an input has element type f64 (the fused op reads bf16, f16, f32 and i1-i32)}}
  %s = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %dy : tensor<8x16xf64>, tensor<8x16xf64>) outs(%zr : tensor<8xf64>) {
  ^bb0(%a: f64, %g: f64, %o: f64):
    %p = arith.mulf %a, %g : f64
    %v = arith.addf %o, %p : f64
    linalg.yield %v : f64
  } -> tensor<8xf64>
  %dx = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %s : tensor<8x16xf64>, tensor<8xf64>) outs(%e : tensor<8x16xf64>) {
  ^bb0(%g: f64, %a: f64, %o: f64):
    %v = arith.subf %g, %a : f64
    linalg.yield %v : f64
  } -> tensor<8x16xf64>
  %ec = tensor.empty() : tensor<16xf64>
  %zc = linalg.fill ins(%zero : f64) outs(%ec : tensor<16xf64>) -> tensor<16xf64>
  // expected-remark @+1 {{not fused: an input has element type f64 (the fused op reads bf16, f16, f32 and i1-i32)}}
  %dw = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x, %dy : tensor<8x16xf64>, tensor<8x16xf64>) outs(%zc : tensor<16xf64>) {
  ^bb0(%a: f64, %g: f64, %o: f64):
    %p = arith.mulf %a, %g : f64
    %v = arith.addf %o, %p : f64
    linalg.yield %v : f64
  } -> tensor<16xf64>
  return %dx, %dw : tensor<8x16xf64>, tensor<16xf64>
}
