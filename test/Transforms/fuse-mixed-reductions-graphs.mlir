// RUN: norm-opt %s -split-input-file --norm-decompose -norm-fuse-mixed-reductions='remarks=true' -verify-diagnostics -mlir-print-op-on-diagnostic=false | FileCheck %s

// Norm backwards inside whole graphs: everything outside the pattern
// (contractions, convolutions, reductions over other domains, calls, ops of
// other dialects, values from enclosing regions) is an opaque producer of
// the group's inputs or consumer of its results. The group is cut at its
// boundary and fuses; the neighbours stay exactly as they were.

// dy comes out of a matmul (the next layer's input gradient), dx goes into
// one: the group fuses between them, reading the matmul's result as a
// full-domain input.
// CHECK-LABEL: func.func @matmul_before_and_after
// CHECK:         %[[DY:[0-9]+]] = linalg.matmul
// CHECK:         %[[DX:[a-z_0-9]+]], %{{.*}} = norm.mixed_reduction full(%{{.*}}, %[[DY]] : tensor<?x64xf32>, tensor<?x64xf32>)
// CHECK:         linalg.matmul ins(%[[DX]],
// CHECK:         return
func.func @matmul_before_and_after(%g: tensor<?x32xf32>, %w2: tensor<32x64xf32>,
    %x: tensor<?x64xf32>, %rstd: tensor<?xf32>, %w: tensor<64xf32>,
    %w1: tensor<64x16xf32>) -> (tensor<?x16xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %g, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%m) : tensor<?x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x64xf32>) -> tensor<?x64xf32>
  // expected-remark @+1 {{not fused: a contraction (no input spans all its loops, as in a matmul): it stays as it is, an opaque producer or consumer of any group}}
  %dy = linalg.matmul ins(%g, %w2 : tensor<?x32xf32>, tensor<32x64xf32>) outs(%z : tensor<?x64xf32>) -> tensor<?x64xf32>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xf32>)
      : tensor<?x64xf32>, tensor<?xf32> -> tensor<?x64xf32>, tensor<64xf32>
  %e1 = tensor.empty(%m) : tensor<?x16xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x16xf32>) -> tensor<?x16xf32>
  // expected-remark @+1 {{not fused: a contraction}}
  %h = linalg.matmul ins(%dx, %w1 : tensor<?x64xf32>, tensor<64x16xf32>) outs(%z1 : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %h, %dw : tensor<?x16xf32>, tensor<64xf32>
}

// -----

// Two norms of different N (the hidden norm and a 32-wide head norm) with a
// matmul between them, and a residual gradient added to the first dx: two
// groups, each over its own domain; the residual add joins the first.
// CHECK-LABEL: func.func @two_norms_matmul_between
// CHECK:         %[[A:[a-z_0-9]+]], %{{.*}} = norm.mixed_reduction full(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>)
// CHECK:         %[[H:[0-9]+]] = linalg.matmul ins(%[[A]],
// CHECK:         norm.mixed_reduction full(%{{.*}}, %[[H]] : tensor<8x32xf32>, tensor<8x32xf32>)
// CHECK-NOT:     linalg.generic
func.func @two_norms_matmul_between(%dy: tensor<8x64xf32>, %x: tensor<8x64xf32>,
    %rstd: tensor<8xf32>, %w: tensor<64xf32>, %res: tensor<8x64xf32>,
    %wp: tensor<64x32xf32>, %q: tensor<8x32xf32>, %qmean: tensor<8xf32>,
    %qrstd: tensor<8xf32>, %qw: tensor<32xf32>)
    -> (tensor<8x32xf32>, tensor<64xf32>, tensor<32xf32>, tensor<32xf32>) {
  %zero = arith.constant 0.0 : f32
  // expected-remark @+2 {{fused a mixed-order reduction group of 6 ops: 1 row reduction(s) in 1 stage(s), 1 column reduction(s), 4 elementwise op(s)}}
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xf32>)
      : tensor<8x64xf32>, tensor<8xf32> -> tensor<8x64xf32>, tensor<64xf32>
  %e = tensor.empty() : tensor<8x64xf32>
  %sum = linalg.add ins(%dx, %res : tensor<8x64xf32>, tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %e1 = tensor.empty() : tensor<8x32xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  // expected-remark @+1 {{not fused: a contraction}}
  %h = linalg.matmul ins(%sum, %wp : tensor<8x64xf32>, tensor<64x32xf32>) outs(%z1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  // expected-remark @+4 {{fused a mixed-order reduction group}}
  // expected-remark @+3 {{fused: row reduction 2 of 2 of the group}}
  // expected-remark @+2 {{fused: column reduction 1 of 2 of the group}}
  // expected-remark @+1 {{fused: column reduction 2 of 2 of the group}}
  %dq, %dqw, %dqb = norm.layer_norm_grad %h, %q, %qmean, %qrstd
      weight(%qw : tensor<32xf32>) bias(%qw : tensor<32xf32>)
      : tensor<8x32xf32>, tensor<8xf32> -> tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>
  return %dq, %dw, %dqw, %dqb : tensor<8x32xf32>, tensor<64xf32>, tensor<32xf32>, tensor<32xf32>
}

// -----

// A batch_matmul feeds a [B, S, N] norm, a transposed-B contraction generic
// consumes dx: both are contractions, the group fuses over [2, 8, 64].
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhsT = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @batch_matmul_and_contraction_generic
// CHECK:         linalg.batch_matmul
// CHECK:         norm.mixed_reduction
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
func.func @batch_matmul_and_contraction_generic(%a: tensor<2x8x16xf32>,
    %b: tensor<2x16x64xf32>, %x: tensor<2x8x64xf32>, %rstd: tensor<2x8xf32>,
    %w: tensor<64xf32>, %wt: tensor<32x64xf32>) -> (tensor<16x32xf32>, tensor<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  // expected-remark @+1 {{not fused: a contraction}}
  %dy = linalg.batch_matmul ins(%a, %b : tensor<2x8x16xf32>, tensor<2x16x64xf32>) outs(%z : tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xf32>)
      : tensor<2x8x64xf32>, tensor<2x8xf32> -> tensor<2x8x64xf32>, tensor<64xf32>
  %flat = tensor.collapse_shape %dx [[0, 1], [2]] : tensor<2x8x64xf32> into tensor<16x64xf32>
  %e1 = tensor.empty() : tensor<16x32xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x32xf32>) -> tensor<16x32xf32>
  // expected-remark @+1 {{not fused: a contraction}}
  %h = linalg.generic {indexing_maps = [#lhs, #rhsT, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%flat, %wt : tensor<16x64xf32>, tensor<32x64xf32>) outs(%z1 : tensor<16x32xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  return %h, %dw : tensor<16x32xf32>, tensor<64xf32>
}

// -----

// A softmax nearby (its row max and row sum over another [8, 32] domain)
// and a loss's total sum scaling dy: the softmax's reductions stay, the
// total sum stays (a 0-d input of the group, read once), and the group
// fuses.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#all = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @softmax_and_loss_nearby
// CHECK:         arith.maxnumf
// CHECK:         %[[T:[0-9]+]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]
// CHECK:         tensor.extract %[[T]][]
// CHECK:         norm.mixed_reduction
func.func @softmax_and_loss_nearby(%logits: tensor<8x32xf32>, %loss: tensor<8x16xf32>,
    %dy0: tensor<8x16xf32>, %x: tensor<8x16xf32>, %rstd: tensor<8xf32>,
    %w: tensor<16xf32>) -> (tensor<8x32xf32>, tensor<8x16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %er = tensor.empty() : tensor<8xf32>
  %mr = linalg.fill ins(%ninf : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{not fused: the reduction is not additive (its combiner is arith.maxnumf)}}
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<8x32xf32>) outs(%mr : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maxnumf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %e32 = tensor.empty() : tensor<8x32xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max : tensor<8x32xf32>, tensor<8xf32>) outs(%e32 : tensor<8x32xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  } -> tensor<8x32xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{not fused: no additive column reduction (over the rows) shares its inputs}}
  %den = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<8x32xf32>) outs(%zr : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %den : tensor<8x32xf32>, tensor<8xf32>) outs(%e32 : tensor<8x32xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %v = arith.divf %a, %s : f32
    linalg.yield %v : f32
  } -> tensor<8x32xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  // expected-remark @+1 {{not fused: it reduces every dim (a total sum, not a row or column reduction)}}
  %total = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%loss : tensor<8x16xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  %e16 = tensor.empty() : tensor<8x16xf32>
  %dy = linalg.generic {indexing_maps = [#id, #all, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy0, %total : tensor<8x16xf32>, tensor<f32>) outs(%e16 : tensor<8x16xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %v = arith.mulf %a, %t : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<16xf32>)
      : tensor<8x16xf32>, tensor<8xf32> -> tensor<8x16xf32>, tensor<16xf32>
  return %p, %dx, %dw : tensor<8x32xf32>, tensor<8x16xf32>, tensor<16xf32>
}

// -----

// A row statistic computed over another domain (a per-row scale from a
// [8, 32] row sum) read by the group as a row input: a neighbour's
// reduction never makes the group fail.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @row_input_from_another_domain
// CHECK:         %[[S:[0-9]+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK:         norm.mixed_reduction full({{.*}}) row(%{{.*}}, %[[S]] : tensor<8xf32>, tensor<8xf32>)
func.func @row_input_from_another_domain(%y: tensor<8x32xf32>, %dy: tensor<8x16xf32>,
    %x: tensor<8x16xf32>, %rstd: tensor<8xf32>, %w: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty() : tensor<8xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{not fused: no additive column reduction (over the rows) shares its inputs}}
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<8x32xf32>) outs(%zr : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %sdy = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %s : tensor<8x16xf32>, tensor<8xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
  %dx, %dw = norm.rms_norm_grad %sdy, %x, %rstd weight(%w : tensor<16xf32>)
      : tensor<8x16xf32>, tensor<8xf32> -> tensor<8x16xf32>, tensor<16xf32>
  return %dx, %dw : tensor<8x16xf32>, tensor<16xf32>
}

// -----

// dy from a call and from a convolution (through a reshape): both opaque.
// CHECK-LABEL: func.func @call_and_convolution
// CHECK:         call @next_layer_grad
// CHECK:         norm.mixed_reduction
// CHECK:         linalg.conv_2d_nhwc_hwcf
// CHECK:         norm.mixed_reduction
func.func private @next_layer_grad(tensor<16x16xf32>) -> tensor<16x16xf32>
func.func @call_and_convolution(%g: tensor<16x16xf32>, %img: tensor<1x6x6x8xf32>,
    %k: tensor<3x3x8x16xf32>, %x: tensor<16x16xf32>, %rstd: tensor<16xf32>,
    %w: tensor<16xf32>, %x2: tensor<16x16xf32>)
    -> (tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %dy = func.call @next_layer_grad(%g) : (tensor<16x16xf32>) -> tensor<16x16xf32>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<16xf32>)
      : tensor<16x16xf32>, tensor<16xf32> -> tensor<16x16xf32>, tensor<16xf32>
  %e = tensor.empty() : tensor<1x4x4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x4x16xf32>) -> tensor<1x4x4x16xf32>
  // expected-remark @+1 {{not fused: a convolution: it stays as it is, an opaque producer or consumer of any group}}
  %c = linalg.conv_2d_nhwc_hwcf ins(%img, %k : tensor<1x6x6x8xf32>, tensor<3x3x8x16xf32>) outs(%z : tensor<1x4x4x16xf32>) -> tensor<1x4x4x16xf32>
  %dy2 = tensor.collapse_shape %c [[0, 1, 2], [3]] : tensor<1x4x4x16xf32> into tensor<16x16xf32>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
  %dx2, %dw2 = norm.rms_norm_grad %dy2, %x2, %rstd weight(%w : tensor<16xf32>)
      : tensor<16x16xf32>, tensor<16xf32> -> tensor<16x16xf32>, tensor<16xf32>
  return %dx, %dw, %dx2, %dw2 : tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>
}

// -----

// The body of a training loop: the group sits in an scf.for and reads the
// loop's carried gradient and a value defined outside the loop; dW
// accumulates across iterations through the iter_arg.
// CHECK-LABEL: func.func @loop_body
// CHECK:         scf.for
// CHECK:           linalg.matmul
// CHECK:           norm.mixed_reduction
// CHECK:           scf.yield
func.func @loop_body(%g0: tensor<8x16xf32>, %wm: tensor<16x16xf32>, %x: tensor<8x16xf32>,
    %rstd: tensor<8xf32>, %w: tensor<16xf32>, %n: index) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %ec = tensor.empty() : tensor<16xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%g = %g0, %acc = %zc) -> (tensor<8x16xf32>, tensor<16xf32>) {
    // expected-remark @+1 {{not fused: a contraction}}
    %dy = linalg.matmul ins(%g, %wm : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
    // expected-remark @+2 {{fused a mixed-order reduction group}}
    // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
    %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<16xf32>)
        : tensor<8x16xf32>, tensor<8xf32> -> tensor<8x16xf32>, tensor<16xf32>
    %sum = linalg.add ins(%acc, %dw : tensor<16xf32>, tensor<16xf32>) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
    scf.yield %dx, %sum : tensor<8x16xf32>, tensor<16xf32>
  }
  return %r#0, %r#1 : tensor<8x16xf32>, tensor<16xf32>
}

// -----

// Safety rules hold in a graph: a BatchNorm-style backward (column
// reductions only) beside a matmul stays unfused.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @batchnorm_style_beside_matmul
// CHECK-NOT:     norm.mixed_reduction
func.func @batchnorm_style_beside_matmul(%a: tensor<8x4xf32>, %b: tensor<4x16xf32>,
    %x: tensor<8x16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark @+1 {{not fused: a contraction}}
  %dy = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %ec = tensor.empty() : tensor<16xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
  // expected-remark @+1 {{not fused: no row reduction (over N) shares its inputs}}
  %db = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<8x16xf32>) outs(%zc : tensor<16xf32>) {
  ^bb0(%g: f32, %o: f32):
    %v = arith.addf %o, %g : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  // expected-remark @+1 {{not fused: no row reduction (over N) shares its inputs}}
  %dw = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %x : tensor<8x16xf32>, tensor<8x16xf32>) outs(%zc : tensor<16xf32>) {
  ^bb0(%g: f32, %v0: f32, %o: f32):
    %m = arith.mulf %g, %v0 : f32
    %v = arith.addf %o, %m : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %db, %dw : tensor<16xf32>, tensor<16xf32>
}

// -----

// BatchNorm2d's backward over [N, C, HW] (issue 42's safety rule): every
// sum is per channel over (N, HW), and dx reads those sums. No reduction
// sums over a dim another keeps, so no pairing (2-D or multi-axis) takes
// it: nothing fuses.
#bn = affine_map<(n, c, s) -> (n, c, s)>
#bnc = affine_map<(n, c, s) -> (c)>
// CHECK-LABEL: func.func @batchnorm2d_backward
// CHECK-NOT:     norm.mixed_reduction
func.func @batchnorm2d_backward(%dy: tensor<4x8x16xf32>, %xhat: tensor<4x8x16xf32>, %g: tensor<8xf32>) -> (tensor<4x8x16xf32>, tensor<8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %m = arith.constant 64.0 : f32
  %ec = tensor.empty() : tensor<8xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{not fused: no row reduction (over N) shares its inputs}}
  %db = linalg.generic {indexing_maps = [#bn, #bnc], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%dy : tensor<4x8x16xf32>) outs(%zc : tensor<8xf32>) {
  ^bb0(%d: f32, %o: f32):
    %v = arith.addf %o, %d : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  // expected-remark @+1 {{not fused: no row reduction (over N) shares its inputs}}
  %dg = linalg.generic {indexing_maps = [#bn, #bn, #bnc], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%dy, %xhat : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%zc : tensor<8xf32>) {
  ^bb0(%d: f32, %h: f32, %o: f32):
    %p = arith.mulf %d, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %e = tensor.empty() : tensor<4x8x16xf32>
  %dx = linalg.generic {indexing_maps = [#bn, #bn, #bnc, #bnc, #bnc, #bn], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy, %xhat, %db, %dg, %g : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<4x8x16xf32>) {
  ^bb0(%d: f32, %h: f32, %sb: f32, %sg: f32, %w: f32, %o: f32):
    %mb = arith.divf %sb, %m : f32
    %mg = arith.divf %sg, %m : f32
    %hm = arith.mulf %h, %mg : f32
    %t = arith.subf %d, %mb : f32
    %u = arith.subf %t, %hm : f32
    %v = arith.mulf %u, %w : f32
    linalg.yield %v : f32
  } -> tensor<4x8x16xf32>
  return %dx, %dg, %db : tensor<4x8x16xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A reduction over one dim (a 1-D sum) gets its remark too.
#v = affine_map<(d0) -> (d0)>
#s = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @one_dim_sum
func.func @one_dim_sum(%a: tensor<16xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  // expected-remark @+1 {{not fused: a reduction over one dim (a group needs a [rows..., N] domain)}}
  %s = linalg.generic {indexing_maps = [#v, #s], iterator_types = ["reduction"]}
      ins(%a : tensor<16xf32>) outs(%z : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %v = arith.addf %o, %x : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A reduction on buffers (a host that bufferized part of its graph) gets
// its remark too: the pass takes linalg on tensors.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @reduction_on_buffers
func.func @reduction_on_buffers(%a: memref<8x16xf32>, %s: memref<8xf32>) {
  // expected-remark @+1 {{not fused: it works on buffers (the pass takes linalg on tensors)}}
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<8x16xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %v = arith.addf %o, %x : f32
    linalg.yield %v : f32
  }
  return
}

// -----

// A row sum over y [?, ?] scales dy of a norm over [?, ?]: the same static
// shape, but nothing ties y's N to the norm's (linalg ties only the tensors
// an op reads over all its loops), so the sum is a neighbour over other
// run-time extents and becomes a row input; fusing it as a row stage would
// sum y over the norm's N.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @row_sum_over_other_dynamic_extents
// CHECK:         %[[S:[0-9]+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK:         norm.mixed_reduction full({{.*}}) row(%{{.*}}, %[[S]] : tensor<?xf32>, tensor<?xf32>)
func.func @row_sum_over_other_dynamic_extents(%y: tensor<?x?xf32>, %dy: tensor<?x?xf32>,
    %x: tensor<?x?xf32>, %rstd: tensor<?xf32>, %w: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %y, %c0 : tensor<?x?xf32>
  %er = tensor.empty(%m) : tensor<?xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  // expected-remark @+1 {{not fused: no additive column reduction (over the rows) shares its inputs}}
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<?x?xf32>) outs(%zr : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<?xf32>
  %n = tensor.dim %dy, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %sdy = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %s : tensor<?x?xf32>, tensor<?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1}}
  %dx, %dw = norm.rms_norm_grad %sdy, %x, %rstd weight(%w : tensor<?xf32>)
      : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>, tensor<?xf32>
  return %dx, %dw, %s : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

// -----

// A transposed-B matmul (LLVM 22 spells matmul_transpose_b as linalg.matmul
// with indexing_maps) produces dy: a contraction like any other.
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhsT = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @matmul_transpose_b_before
// CHECK:         %[[DY:[0-9]+]] = linalg.matmul indexing_maps
// CHECK:         norm.mixed_reduction full(%{{.*}}, %[[DY]] :
func.func @matmul_transpose_b_before(%g: tensor<8x16xf32>, %wt: tensor<32x16xf32>,
    %x: tensor<8x32xf32>, %rstd: tensor<8xf32>, %w: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<32xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  // expected-remark @+1 {{not fused: a contraction}}
  %dy = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%g, %wt : tensor<8x16xf32>, tensor<32x16xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1}}
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<32xf32>)
      : tensor<8x32xf32>, tensor<8xf32> -> tensor<8x32xf32>, tensor<32xf32>
  return %dx, %dw : tensor<8x32xf32>, tensor<32xf32>
}

// -----

#x = affine_map<(b, c, s) -> (b, c, s)>
#st = affine_map<(b, c, s) -> (b, s)>
#w = affine_map<(b, c, s) -> (c)>
// Channels-first inside a graph: dy of an RMSNorm over C = 16 of x [2, 16,
// 6] comes out of a batch_matmul, its dx goes into one whose result (through
// another) is the dy of a second channels-first group of another C (8).
// Both groups fuse with n_dim = 1; the three contractions stay.
// CHECK-LABEL: func.func @channels_first_between_matmuls
// CHECK:         %[[DY:[0-9]+]] = linalg.batch_matmul
// CHECK:         %[[DX:[a-z_0-9]+]], %[[DW1:[a-z_0-9]+]] = norm.mixed_reduction full(%{{.*}}, %[[DY]] : tensor<2x16x6xf32>, tensor<2x16x6xf32>)
// CHECK:           {n_dim = 1 : i64} -> full(tensor<2x16x6xf32>)
// CHECK:         linalg.batch_matmul ins(%{{.*}}, %[[DX]] :
// CHECK:         %[[DY2:[0-9]+]] = linalg.batch_matmul
// CHECK:         norm.mixed_reduction full(%{{.*}}, %[[DY2]] : tensor<2x8x6xf32>, tensor<2x8x6xf32>)
// CHECK:           {n_dim = 1 : i64} -> full(tensor<2x8x6xf32>)
func.func @channels_first_between_matmuls(%ma: tensor<2x16x4xf32>, %mg: tensor<2x4x6xf32>,
    %x1: tensor<2x16x6xf32>, %r1: tensor<2x6xf32>, %w1: tensor<16xf32>,
    %mp: tensor<2x3x16xf32>, %mq: tensor<2x8x3xf32>,
    %x2: tensor<2x8x6xf32>, %r2: tensor<2x6xf32>, %w2: tensor<8xf32>)
    -> (tensor<2x8x6xf32>, tensor<16xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %n1 = arith.constant 16.0 : f32
  %n2 = arith.constant 8.0 : f32
  %edy = tensor.empty() : tensor<2x16x6xf32>
  %fdy = linalg.fill ins(%zero : f32) outs(%edy : tensor<2x16x6xf32>) -> tensor<2x16x6xf32>
  // expected-remark @+1 {{not fused: a contraction}}
  %dy1 = linalg.batch_matmul ins(%ma, %mg : tensor<2x16x4xf32>, tensor<2x4x6xf32>) outs(%fdy : tensor<2x16x6xf32>) -> tensor<2x16x6xf32>
  %es1 = tensor.empty() : tensor<2x6xf32>
  %zs1 = linalg.fill ins(%zero : f32) outs(%es1 : tensor<2x6xf32>) -> tensor<2x6xf32>
  // expected-remark @+1 {{fused a mixed-order reduction group}}
  %s1 = linalg.generic {indexing_maps = [#x, #x, #st, #w, #st], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x1, %dy1, %r1, %w1 : tensor<2x16x6xf32>, tensor<2x16x6xf32>, tensor<2x6xf32>, tensor<16xf32>) outs(%zs1 : tensor<2x6xf32>) {
  ^bb0(%a: f32, %g: f32, %rr: f32, %ww: f32, %o: f32):
    %h = arith.mulf %a, %rr : f32
    %wg = arith.mulf %g, %ww : f32
    %p = arith.mulf %h, %wg : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<2x6xf32>
  %e1 = tensor.empty() : tensor<2x16x6xf32>
  %dx1 = linalg.generic {indexing_maps = [#x, #x, #st, #w, #st, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x1, %dy1, %r1, %w1, %s1 : tensor<2x16x6xf32>, tensor<2x16x6xf32>, tensor<2x6xf32>, tensor<16xf32>, tensor<2x6xf32>) outs(%e1 : tensor<2x16x6xf32>) {
  ^bb0(%a: f32, %g: f32, %rr: f32, %ww: f32, %sm: f32, %o: f32):
    %h = arith.mulf %a, %rr : f32
    %wg = arith.mulf %g, %ww : f32
    %m = arith.divf %sm, %n1 : f32
    %t = arith.mulf %h, %m : f32
    %d = arith.subf %wg, %t : f32
    %v = arith.mulf %d, %rr : f32
    linalg.yield %v : f32
  } -> tensor<2x16x6xf32>
  %ec1 = tensor.empty() : tensor<16xf32>
  %zc1 = linalg.fill ins(%zero : f32) outs(%ec1 : tensor<16xf32>) -> tensor<16xf32>
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
  %dw1 = linalg.generic {indexing_maps = [#x, #x, #st, #w], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%x1, %dy1, %r1 : tensor<2x16x6xf32>, tensor<2x16x6xf32>, tensor<2x6xf32>) outs(%zc1 : tensor<16xf32>) {
  ^bb0(%a: f32, %g: f32, %rr: f32, %o: f32):
    %h = arith.mulf %a, %rr : f32
    %p = arith.mulf %g, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  %eo = tensor.empty() : tensor<2x3x6xf32>
  %fo = linalg.fill ins(%zero : f32) outs(%eo : tensor<2x3x6xf32>) -> tensor<2x3x6xf32>
  // expected-remark @+1 {{not fused: a contraction}}
  %o1 = linalg.batch_matmul ins(%mp, %dx1 : tensor<2x3x16xf32>, tensor<2x16x6xf32>) outs(%fo : tensor<2x3x6xf32>) -> tensor<2x3x6xf32>
  %ed2 = tensor.empty() : tensor<2x8x6xf32>
  %fd2 = linalg.fill ins(%zero : f32) outs(%ed2 : tensor<2x8x6xf32>) -> tensor<2x8x6xf32>
  // expected-remark @+1 {{not fused: a contraction}}
  %dy2 = linalg.batch_matmul ins(%mq, %o1 : tensor<2x8x3xf32>, tensor<2x3x6xf32>) outs(%fd2 : tensor<2x8x6xf32>) -> tensor<2x8x6xf32>
  %es2 = tensor.empty() : tensor<2x6xf32>
  %zs2 = linalg.fill ins(%zero : f32) outs(%es2 : tensor<2x6xf32>) -> tensor<2x6xf32>
  // expected-remark @+1 {{fused a mixed-order reduction group}}
  %s2 = linalg.generic {indexing_maps = [#x, #x, #st, #w, #st], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x2, %dy2, %r2, %w2 : tensor<2x8x6xf32>, tensor<2x8x6xf32>, tensor<2x6xf32>, tensor<8xf32>) outs(%zs2 : tensor<2x6xf32>) {
  ^bb0(%a: f32, %g: f32, %rr: f32, %ww: f32, %o: f32):
    %h = arith.mulf %a, %rr : f32
    %wg = arith.mulf %g, %ww : f32
    %p = arith.mulf %h, %wg : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<2x6xf32>
  %e2 = tensor.empty() : tensor<2x8x6xf32>
  %dx2 = linalg.generic {indexing_maps = [#x, #x, #st, #w, #st, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x2, %dy2, %r2, %w2, %s2 : tensor<2x8x6xf32>, tensor<2x8x6xf32>, tensor<2x6xf32>, tensor<8xf32>, tensor<2x6xf32>) outs(%e2 : tensor<2x8x6xf32>) {
  ^bb0(%a: f32, %g: f32, %rr: f32, %ww: f32, %sm: f32, %o: f32):
    %h = arith.mulf %a, %rr : f32
    %wg = arith.mulf %g, %ww : f32
    %m = arith.divf %sm, %n2 : f32
    %t = arith.mulf %h, %m : f32
    %d = arith.subf %wg, %t : f32
    %v = arith.mulf %d, %rr : f32
    linalg.yield %v : f32
  } -> tensor<2x8x6xf32>
  %ec2 = tensor.empty() : tensor<8xf32>
  %zc2 = linalg.fill ins(%zero : f32) outs(%ec2 : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{fused: column reduction 1 of 1 of the group}}
  %dw2 = linalg.generic {indexing_maps = [#x, #x, #st, #w], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%x2, %dy2, %r2 : tensor<2x8x6xf32>, tensor<2x8x6xf32>, tensor<2x6xf32>) outs(%zc2 : tensor<8xf32>) {
  ^bb0(%a: f32, %g: f32, %rr: f32, %o: f32):
    %h = arith.mulf %a, %rr : f32
    %p = arith.mulf %g, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %dx2, %dw1, %dw2 : tensor<2x8x6xf32>, tensor<16xf32>, tensor<8xf32>
}

// -----

// adaLN's chain (pytorch 193061) once CSE has merged what its two norms
// share (the broadcast statistics and 1 + scale; found by the differential
// test, prog_86 of its multi-axis stream): the second norm's d(scale) and
// d(shift) start from the first's, so they cannot join its group (a use-def
// cycle: the verifier caught it before recognition refused it). One group;
// the second norm's sums stay, beside it.
// CHECK-LABEL: func.func @prog_86
// CHECK-COUNT-1: norm.mixed_reduction
// CHECK-NOT:     norm.mixed_reduction
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @prog_86(%arg0: tensor<2x8x1xf32>, %arg1: tensor<2x8x1xf32>, %arg2: tensor<2x16xf32>, %arg3: tensor<2x8x16xf32>, %arg4: tensor<2x8x16xf32>, %arg5: tensor<2x8x1xf32>, %arg6: tensor<2x8x16xf32>, %arg7: tensor<2x8x16xf32>, %arg8: tensor<2x8x1xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 1.600000e+01 : f32
  %0 = tensor.empty() : tensor<2x16xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<2x16xf32>) -> tensor<2x16xf32>
  %collapsed = tensor.collapse_shape %arg5 [[0], [1, 2]] : tensor<2x8x1xf32> into tensor<2x8xf32>
  %2 = tensor.empty() : tensor<2x8x16xf32>
  %broadcasted = linalg.broadcast ins(%collapsed : tensor<2x8xf32>) outs(%2 : tensor<2x8x16xf32>) dimensions = [2] 
  %collapsed_1 = tensor.collapse_shape %arg8 [[0], [1, 2]] : tensor<2x8x1xf32> into tensor<2x8xf32>
  %broadcasted_2 = linalg.broadcast ins(%collapsed_1 : tensor<2x8xf32>) outs(%2 : tensor<2x8x16xf32>) dimensions = [2] 
  %mapped = linalg.map { arith.subf } ins(%arg7, %broadcasted : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>)
  %3 = linalg.mul ins(%broadcasted_2, %mapped : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %4 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg2 : tensor<2x16xf32>) outs(%0 : tensor<2x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %cst_27 = arith.constant 1.000000e+00 : f32
    %19 = arith.addf %cst_27, %in : f32
    linalg.yield %19 : f32
  } -> tensor<2x16xf32>
  %broadcasted_3 = linalg.broadcast ins(%4 : tensor<2x16xf32>) outs(%2 : tensor<2x8x16xf32>) dimensions = [1] 
  %mapped_4 = linalg.map { arith.mulf } ins(%broadcasted_3, %arg3 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>)
  %5 = linalg.mul ins(%3, %mapped_4 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %6 = tensor.empty() : tensor<2x8xf32>
  %7 = linalg.fill ins(%cst : f32) outs(%6 : tensor<2x8xf32>) -> tensor<2x8xf32>
  // expected-remark @below {{fused: column reduction 1 of 4}}
  %reduced = linalg.reduce ins(%5 : tensor<2x8x16xf32>) outs(%7 : tensor<2x8xf32>) dimensions = [2] 
    (%in: f32, %init: f32) {
      %19 = arith.addf %in, %init : f32
      linalg.yield %19 : f32
    }
  // expected-remark @below {{fused: column reduction 2 of 4}}
  %reduced_5 = linalg.reduce { arith.addf } ins(%mapped_4 : tensor<2x8x16xf32>) outs(%7 : tensor<2x8xf32>) dimensions = [2] 
  %8 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%reduced : tensor<2x8xf32>) outs(%6 : tensor<2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %19 = arith.divf %in, %cst_0 : f32
    linalg.yield %19 : f32
  } -> tensor<2x8xf32>
  %9 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%reduced_5 : tensor<2x8xf32>) outs(%6 : tensor<2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %19 = arith.divf %in, %cst_0 : f32
    linalg.yield %19 : f32
  } -> tensor<2x8xf32>
  %broadcasted_6 = linalg.broadcast ins(%8 : tensor<2x8xf32>) outs(%2 : tensor<2x8x16xf32>) dimensions = [2] 
  %10 = linalg.mul ins(%broadcasted_6, %3 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %broadcasted_7 = linalg.broadcast ins(%9 : tensor<2x8xf32>) outs(%2 : tensor<2x8x16xf32>) dimensions = [2] 
  %11 = linalg.add ins(%10, %broadcasted_7 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %12 = linalg.sub ins(%mapped_4, %11 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %13 = linalg.mul ins(%broadcasted_2, %12 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // expected-remark @below {{fused a mixed-order reduction group of 20 ops}}
  %reduced_8 = linalg.reduce { arith.addf } ins(%arg3 : tensor<2x8x16xf32>) outs(%1 : tensor<2x16xf32>) dimensions = [1] 
  %mapped_9 = linalg.map { arith.mulf } ins(%3, %arg3 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>)
  // expected-remark @below {{fused: row reduction 2 of 2}}
  %reduced_10 = linalg.reduce { arith.addf } ins(%mapped_9 : tensor<2x8x16xf32>) outs(%1 : tensor<2x16xf32>) dimensions = [1] 
  %collapsed_11 = tensor.collapse_shape %arg0 [[0], [1, 2]] : tensor<2x8x1xf32> into tensor<2x8xf32>
  %broadcasted_12 = linalg.broadcast ins(%collapsed_11 : tensor<2x8xf32>) outs(%2 : tensor<2x8x16xf32>) dimensions = [2] 
  %collapsed_13 = tensor.collapse_shape %arg1 [[0], [1, 2]] : tensor<2x8x1xf32> into tensor<2x8xf32>
  %broadcasted_14 = linalg.broadcast ins(%collapsed_13 : tensor<2x8xf32>) outs(%2 : tensor<2x8x16xf32>) dimensions = [2] 
  %14 = linalg.sub ins(%arg4, %broadcasted_12 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %mapped_15 = linalg.map { arith.mulf } ins(%14, %broadcasted_14 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>)
  %15 = linalg.mul ins(%arg6, %broadcasted_3 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %mapped_16 = linalg.map { arith.mulf } ins(%mapped_15, %15 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>)
  // expected-remark @below {{fused: column reduction 3 of 4}}
  %reduced_17 = linalg.reduce ins(%mapped_16 : tensor<2x8x16xf32>) outs(%7 : tensor<2x8xf32>) dimensions = [2] 
    (%in: f32, %init: f32) {
      %19 = arith.addf %in, %init : f32
      linalg.yield %19 : f32
    }
  // expected-remark @below {{fused: column reduction 4 of 4}}
  %reduced_18 = linalg.reduce { arith.addf } ins(%15 : tensor<2x8x16xf32>) outs(%7 : tensor<2x8xf32>) dimensions = [2] 
  %16 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%reduced_17 : tensor<2x8xf32>) outs(%6 : tensor<2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %cst_27 = arith.constant 6.250000e-02 : f32
    %19 = arith.mulf %cst_27, %in : f32
    linalg.yield %19 : f32
  } -> tensor<2x8xf32>
  %17 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%reduced_18 : tensor<2x8xf32>) outs(%6 : tensor<2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %19 = arith.divf %in, %cst_0 : f32
    linalg.yield %19 : f32
  } -> tensor<2x8xf32>
  %broadcasted_19 = linalg.broadcast ins(%16 : tensor<2x8xf32>) outs(%2 : tensor<2x8x16xf32>) dimensions = [2] 
  %mapped_20 = linalg.map { arith.mulf } ins(%broadcasted_19, %mapped_15 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>)
  %broadcasted_21 = linalg.broadcast ins(%17 : tensor<2x8xf32>) outs(%2 : tensor<2x8x16xf32>) dimensions = [2] 
  %mapped_22 = linalg.map { arith.addf } ins(%broadcasted_21, %mapped_20 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>)
  %mapped_23 = linalg.map { arith.subf } ins(%15, %mapped_22 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>)
  %mapped_24 = linalg.map { arith.mulf } ins(%broadcasted_14, %mapped_23 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>)
  %18 = linalg.mul ins(%mapped_15, %arg6 : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%2 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // expected-remark @below {{not fused: the row reduction starts from a value other than a zero fill}}
  %reduced_25 = linalg.reduce ins(%18 : tensor<2x8x16xf32>) outs(%reduced_10 : tensor<2x16xf32>) dimensions = [1] 
    (%in: f32, %init: f32) {
      %19 = arith.addf %in, %init : f32
      linalg.yield %19 : f32
    }
  // expected-remark @below {{not fused: the row reduction starts from a value other than a zero fill}}
  %reduced_26 = linalg.reduce { arith.addf } ins(%arg6 : tensor<2x8x16xf32>) outs(%reduced_8 : tensor<2x16xf32>) dimensions = [1] 
  return %13, %mapped_24, %reduced_25, %reduced_26 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>
}
