// RUN: norm-opt %s -split-input-file -norm-fuse-mixed-reductions="remarks=true" -verify-diagnostics | FileCheck %s

// Channels-first norms: N is not the innermost dim. The rows are the other
// dims in order, so the statistics of x [B, C, S] are [B, S] and the
// weight is [C]; the fused op records N's dim as n_dim.

#x = affine_map<(b, c, s) -> (b, c, s)>
#st = affine_map<(b, c, s) -> (b, s)>
#w = affine_map<(b, c, s) -> (c)>
// ConvNeXt's LayerNorm2d backward, x [B, C, S] with a run-time batch and
// spatial size: dx, dW and dB in one group.
// CHECK-LABEL: func.func @layer_norm_2d_f32
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<?x96x?xf32>, tensor<?x96x?xf32>) row(%{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x?xf32>) col(%{{.*}} : tensor<96xf32>) col_init(%{{.*}}, %{{.*}} : tensor<96xf32>, tensor<96xf32>)
// CHECK:         {n_dim = 1 : i64} -> full(tensor<?x96x?xf32>) col(tensor<96xf32>, tensor<96xf32>)
// CHECK-NOT:     iterator_types = {{.*}}reduction
func.func @layer_norm_2d_f32(%x: tensor<?x96x?xf32>, %dy: tensor<?x96x?xf32>,
    %mean: tensor<?x?xf32>, %rstd: tensor<?x?xf32>, %w: tensor<96xf32>)
    -> (tensor<?x96x?xf32>, tensor<96xf32>, tensor<96xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 96.0 : f32
  %b = tensor.dim %x, %c0 : tensor<?x96x?xf32>
  %s = tensor.dim %x, %c2 : tensor<?x96x?xf32>
  %e = tensor.empty(%b, %s) : tensor<?x96x?xf32>
  %xhat = linalg.generic {indexing_maps = [#x, #st, #st, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %mean, %rstd : tensor<?x96x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x96x?xf32>) {
  ^bb0(%a: f32, %m: f32, %r: f32, %o: f32):
    %c = arith.subf %a, %m : f32
    %v = arith.mulf %c, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x96x?xf32>
  %wdy = linalg.generic {indexing_maps = [#x, #w, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy, %w : tensor<?x96x?xf32>, tensor<96xf32>) outs(%e : tensor<?x96x?xf32>) {
  ^bb0(%g: f32, %ww: f32, %o: f32):
    %v = arith.mulf %g, %ww : f32
    linalg.yield %v : f32
  } -> tensor<?x96x?xf32>
  %es = tensor.empty(%b, %s) : tensor<?x?xf32>
  %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<?x?xf32>) -> tensor<?x?xf32>
  // expected-remark @below {{fused a mixed-order reduction group of}}
  %sums:2 = linalg.generic {indexing_maps = [#x, #x, #st, #st], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%wdy, %xhat : tensor<?x96x?xf32>, tensor<?x96x?xf32>) outs(%zs, %zs : tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%g: f32, %h: f32, %o1: f32, %o2: f32):
    %p = arith.mulf %h, %g : f32
    %v1 = arith.addf %o1, %p : f32
    %v2 = arith.addf %o2, %g : f32
    linalg.yield %v1, %v2 : f32, f32
  } -> (tensor<?x?xf32>, tensor<?x?xf32>)
  %dx = linalg.generic {indexing_maps = [#x, #x, #st, #st, #st, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%wdy, %xhat, %sums#0, %sums#1, %rstd : tensor<?x96x?xf32>, tensor<?x96x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x96x?xf32>) {
  ^bb0(%g: f32, %h: f32, %a: f32, %bb: f32, %r: f32, %o: f32):
    %c1v = arith.divf %a, %n : f32
    %c2v = arith.divf %bb, %n : f32
    %t = arith.mulf %c1v, %h : f32
    %u = arith.addf %c2v, %t : f32
    %d = arith.subf %g, %u : f32
    %v = arith.mulf %d, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x96x?xf32>
  %ec = tensor.empty() : tensor<96xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<96xf32>) -> tensor<96xf32>
  // expected-remark @below {{fused: column reduction 1 of 1}}
  %cols:2 = linalg.generic {indexing_maps = [#x, #x, #w, #w], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%dy, %xhat : tensor<?x96x?xf32>, tensor<?x96x?xf32>) outs(%zc, %zc : tensor<96xf32>, tensor<96xf32>) {
  ^bb0(%g: f32, %h: f32, %o1: f32, %o2: f32):
    %p = arith.mulf %g, %h : f32
    %v1 = arith.addf %o1, %p : f32
    %v2 = arith.addf %o2, %g : f32
    linalg.yield %v1, %v2 : f32, f32
  } -> (tensor<96xf32>, tensor<96xf32>)
  return %dx, %cols#0, %cols#1 : tensor<?x96x?xf32>, tensor<96xf32>, tensor<96xf32>
}

// -----

#x4 = affine_map<(b, c, h, w) -> (b, c, h, w)>
#st4 = affine_map<(b, c, h, w) -> (b, 0, h, w)>
#w4 = affine_map<(b, c, h, w) -> (c)>
// Rank 4, [B, C, H, W] bf16 RMSNorm with keepdim statistics [B, 1, H, W].
// CHECK-LABEL: func.func @rms_norm_nchw_bf16
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<8x64x7x7xbf16>, tensor<8x64x7x7xbf16>) row(%{{.*}} : tensor<8x7x7xf32>) col(%{{.*}} : tensor<64xbf16>)
// CHECK:         {n_dim = 1 : i64} -> full(tensor<8x64x7x7xbf16>) col(tensor<64xf32>)
// CHECK-NOT:     iterator_types = {{.*}}reduction
func.func @rms_norm_nchw_bf16(%x: tensor<8x64x7x7xbf16>, %dy: tensor<8x64x7x7xbf16>,
    %rstd: tensor<8x1x7x7xf32>, %w: tensor<64xbf16>) -> (tensor<8x64x7x7xbf16>, tensor<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 64.0 : f32
  %es = tensor.empty() : tensor<8x1x7x7xf32>
  %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<8x1x7x7xf32>) -> tensor<8x1x7x7xf32>
  // expected-remark @below {{fused a mixed-order reduction group of}}
  %sum = linalg.generic {indexing_maps = [#x4, #x4, #st4, #w4, #st4], iterator_types = ["parallel", "reduction", "parallel", "parallel"]}
      ins(%x, %dy, %rstd, %w : tensor<8x64x7x7xbf16>, tensor<8x64x7x7xbf16>, tensor<8x1x7x7xf32>, tensor<64xbf16>) outs(%zs : tensor<8x1x7x7xf32>) {
  ^bb0(%a: bf16, %g: bf16, %r: f32, %ww: bf16, %o: f32):
    %a32 = arith.extf %a : bf16 to f32
    %g32 = arith.extf %g : bf16 to f32
    %w32 = arith.extf %ww : bf16 to f32
    %h = arith.mulf %a32, %r : f32
    %wg = arith.mulf %g32, %w32 : f32
    %p = arith.mulf %h, %wg : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<8x1x7x7xf32>
  %e = tensor.empty() : tensor<8x64x7x7xbf16>
  %dx = linalg.generic {indexing_maps = [#x4, #x4, #st4, #w4, #st4, #x4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %dy, %rstd, %w, %sum : tensor<8x64x7x7xbf16>, tensor<8x64x7x7xbf16>, tensor<8x1x7x7xf32>, tensor<64xbf16>, tensor<8x1x7x7xf32>) outs(%e : tensor<8x64x7x7xbf16>) {
  ^bb0(%a: bf16, %g: bf16, %r: f32, %ww: bf16, %sm: f32, %o: bf16):
    %a32 = arith.extf %a : bf16 to f32
    %g32 = arith.extf %g : bf16 to f32
    %w32 = arith.extf %ww : bf16 to f32
    %h = arith.mulf %a32, %r : f32
    %wg = arith.mulf %g32, %w32 : f32
    %m = arith.divf %sm, %n : f32
    %t = arith.mulf %h, %m : f32
    %d = arith.subf %wg, %t : f32
    %v = arith.mulf %d, %r : f32
    %v16 = arith.truncf %v : f32 to bf16
    linalg.yield %v16 : bf16
  } -> tensor<8x64x7x7xbf16>
  %ec = tensor.empty() : tensor<64xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<64xf32>) -> tensor<64xf32>
  // expected-remark @below {{fused: column reduction 1 of 1}}
  %dw = linalg.generic {indexing_maps = [#x4, #x4, #st4, #w4], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%x, %dy, %rstd : tensor<8x64x7x7xbf16>, tensor<8x64x7x7xbf16>, tensor<8x1x7x7xf32>) outs(%zc : tensor<64xf32>) {
  ^bb0(%a: bf16, %g: bf16, %r: f32, %o: f32):
    %a32 = arith.extf %a : bf16 to f32
    %g32 = arith.extf %g : bf16 to f32
    %h = arith.mulf %a32, %r : f32
    %p = arith.mulf %g32, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<64xf32>
  return %dx, %dw : tensor<8x64x7x7xbf16>, tensor<64xf32>
}

// -----

#x = affine_map<(c, b, s) -> (c, b, s)>
#st = affine_map<(c, b, s) -> (b, s)>
#w = affine_map<(c, b, s) -> (c)>
// N outermost: x [C, B, S] (the rows are [B, S], each column a contiguous
// [B, S] plane).
// CHECK-LABEL: func.func @n_outermost_rms_f32
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<32x4x16xf32>, tensor<32x4x16xf32>) row(%{{.*}} : tensor<4x16xf32>)
// CHECK:         {n_dim = 0 : i64} -> full(tensor<32x4x16xf32>) col(tensor<32xf32>)
func.func @n_outermost_rms_f32(%x: tensor<32x4x16xf32>, %dy: tensor<32x4x16xf32>,
    %rstd: tensor<4x16xf32>) -> (tensor<32x4x16xf32>, tensor<32xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 32.0 : f32
  %es = tensor.empty() : tensor<4x16xf32>
  %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-remark @below {{fused a mixed-order reduction group of}}
  %sum = linalg.generic {indexing_maps = [#x, #x, #st, #st], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%x, %dy, %rstd : tensor<32x4x16xf32>, tensor<32x4x16xf32>, tensor<4x16xf32>) outs(%zs : tensor<4x16xf32>) {
  ^bb0(%a: f32, %g: f32, %r: f32, %o: f32):
    %h = arith.mulf %a, %r : f32
    %p = arith.mulf %h, %g : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<4x16xf32>
  %e = tensor.empty() : tensor<32x4x16xf32>
  %dx = linalg.generic {indexing_maps = [#x, #x, #st, #st, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %dy, %rstd, %sum : tensor<32x4x16xf32>, tensor<32x4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) outs(%e : tensor<32x4x16xf32>) {
  ^bb0(%a: f32, %g: f32, %r: f32, %sm: f32, %o: f32):
    %h = arith.mulf %a, %r : f32
    %m = arith.divf %sm, %n : f32
    %t = arith.mulf %h, %m : f32
    %d = arith.subf %g, %t : f32
    %v = arith.mulf %d, %r : f32
    linalg.yield %v : f32
  } -> tensor<32x4x16xf32>
  %ec = tensor.empty() : tensor<32xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<32xf32>) -> tensor<32xf32>
  // expected-remark @below {{fused: column reduction 1 of 1}}
  %dw = linalg.generic {indexing_maps = [#x, #x, #st, #w], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x, %dy, %rstd : tensor<32x4x16xf32>, tensor<32x4x16xf32>, tensor<4x16xf32>) outs(%zc : tensor<32xf32>) {
  ^bb0(%a: f32, %g: f32, %r: f32, %o: f32):
    %h = arith.mulf %a, %r : f32
    %p = arith.mulf %g, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  return %dx, %dw : tensor<32x4x16xf32>, tensor<32xf32>
}
