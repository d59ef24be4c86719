// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions | FileCheck %s
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions='remarks=true' -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// GroupNorm's groups are slab domains: multi-axis=gpu (norm-opt compile's,
// the torch.compile route's) fuses them as the default does; batched rows
// only (multi-axis=batched) leaves them, with why.
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions=multi-axis=gpu | FileCheck %s
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions='remarks=true multi-axis=batched' -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=BATCHED
// BATCHED: remark: not fused: a multi-axis group (row sums over dims [2, 3, 4], column sums keeping dims [1, 2]), and only batched rows fuse (multi-axis=batched)

// The --norm-decompose output of both high-level ops is the canonical input
// of the recognition pass: every variant with a weight or a bias is one
// group. Without either there is no column reduction, so nothing to fuse.

// CHECK-LABEL: func.func @layer_bf16_f32_weight_bias
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<16x384xbf16>, tensor<16x384xbf16>) row(%{{.*}}, %{{.*}} : tensor<16xf32>, tensor<16xf32>) col(%{{.*}} : tensor<384xf32>)
// CHECK-SAME:    col_init(%{{.*}}, %{{.*}} : tensor<384xf32>, tensor<384xf32>) row_stages
// CHECK:         } -> full(tensor<16x384xbf16>) col(tensor<384xf32>, tensor<384xf32>)
// CHECK-NOT:     linalg.generic
// CHECK:         return
func.func @layer_bf16_f32_weight_bias(%dy: tensor<16x384xbf16>, %x: tensor<16x384xbf16>, %mean: tensor<16xf32>, %rstd: tensor<16xf32>, %w: tensor<384xf32>, %b: tensor<384xf32>) -> (tensor<16x384xbf16>, tensor<384xf32>, tensor<384xf32>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<384xf32>) bias(%b : tensor<384xf32>) : tensor<16x384xbf16>, tensor<16xf32> -> tensor<16x384xbf16>, tensor<384xf32>, tensor<384xf32>
  return %dx, %dw, %db : tensor<16x384xbf16>, tensor<384xf32>, tensor<384xf32>
}

// -----

// The bf16 dW is truncated after the fused op (one small generic over N).
// CHECK-LABEL: func.func @layer_f16_weight_only
// CHECK:         %{{.*}}, %[[DW:.*]] = norm.mixed_reduction
// CHECK:         } -> full(tensor<16x384xf16>) col(tensor<384xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[DW]] : tensor<384xf32>) outs(%{{.*}} : tensor<384xf16>)
// CHECK:           arith.truncf
func.func @layer_f16_weight_only(%dy: tensor<16x384xf16>, %x: tensor<16x384xf16>, %mean: tensor<16xf32>, %rstd: tensor<16xf32>, %w: tensor<384xf16>) -> (tensor<16x384xf16>, tensor<384xf16>) {
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<384xf16>) : tensor<16x384xf16>, tensor<16xf32> -> tensor<16x384xf16>, tensor<384xf16>
  return %dx, %dw : tensor<16x384xf16>, tensor<384xf16>
}

// -----

// CHECK-LABEL: func.func @layer_f32_bias_only
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<16x384xf32>, tensor<16x384xf32>) row(%{{.*}}, %{{.*}} : tensor<16xf32>, tensor<16xf32>) col_init(%{{.*}} : tensor<384xf32>)
// CHECK-NOT:     linalg.generic
func.func @layer_f32_bias_only(%dy: tensor<16x384xf32>, %x: tensor<16x384xf32>, %mean: tensor<16xf32>, %rstd: tensor<16xf32>, %b: tensor<384xf32>) -> (tensor<16x384xf32>, tensor<384xf32>) {
  %dx, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd bias(%b : tensor<384xf32>) : tensor<16x384xf32>, tensor<16xf32> -> tensor<16x384xf32>, tensor<384xf32>
  return %dx, %db : tensor<16x384xf32>, tensor<384xf32>
}

// -----

// REMARK-COUNT-3: remark: fused a mixed-order reduction group
// REMARK:         remark: not fused: no additive column reduction (over the rows) shares its inputs
// REMARK-COUNT-2: remark: fused a mixed-order reduction group
// REMARK-NOT:     remark: {{not fused|fused a}}
// CHECK-LABEL: func.func @layer_no_affine
// CHECK-NOT:     norm.mixed_reduction
func.func @layer_no_affine(%dy: tensor<16x384xf32>, %x: tensor<16x384xf32>, %mean: tensor<16xf32>, %rstd: tensor<16xf32>) -> tensor<16x384xf32> {
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<16x384xf32>, tensor<16xf32> -> tensor<16x384xf32>
  return %dx : tensor<16x384xf32>
}

// -----

// Zero-centred (Gemma) weight: the w + 1 is inside the cloned payloads.
// CHECK-LABEL: func.func @rms_bf16_zero_centered_3d
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<2x8x512xbf16>, tensor<2x8x512xbf16>) row(%{{.*}} : tensor<2x8xf32>) col(%{{.*}} : tensor<512xbf16>)
// CHECK:           %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:           arith.addf %{{.*}}, %[[ONE]] : f32
// CHECK:         } -> full(tensor<2x8x512xbf16>) col(tensor<512xf32>)
func.func @rms_bf16_zero_centered_3d(%dy: tensor<2x8x512xbf16>, %x: tensor<2x8x512xbf16>, %rstd: tensor<2x8xf32>, %w: tensor<512xbf16>) -> (tensor<2x8x512xbf16>, tensor<512xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<512xbf16>) {zero_centered_weight} : tensor<2x8x512xbf16>, tensor<2x8xf32> -> tensor<2x8x512xbf16>, tensor<512xbf16>
  return %dx, %dw : tensor<2x8x512xbf16>, tensor<512xbf16>
}

// -----

// CHECK-LABEL: func.func @rms_dynamic_weight_bias
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x?xf32>) row(%{{.*}} : tensor<?xf32>) col(%{{.*}} : tensor<?xf32>) col_init(%{{.*}}, %{{.*}} : tensor<?xf32>, tensor<?xf32>)
// CHECK:         } -> full(tensor<?x?xf32>) col(tensor<?xf32>, tensor<?xf32>)
func.func @rms_dynamic_weight_bias(%dy: tensor<?x?xf32>, %x: tensor<?x?xf32>, %rstd: tensor<?xf32>, %w: tensor<?xf32>, %b: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %dx, %dw, %db = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<?xf32>) bias(%b : tensor<?xf32>) : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
  return %dx, %dw, %db : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

// -----

// GroupNorm (issue 42): over the decomposed domain [N, G, C/G, H, W] the
// row reductions sum over the slab (C/G, H, W) and the column reductions
// keep the channel (G, C/G): one multi-axis group, whose statistics are
// [N, G] and whose weight and dγ / dβ are [G, C/G] views of [C].

// CHECK-LABEL: func.func @group_norm_nchw
// CHECK:         %[[W:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [4, 2] : tensor<8xf32> into tensor<4x2xf32>
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<2x4x2x4x4xbf16>, tensor<2x4x2x4x4xbf16>) row(%{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>) col(%[[W]] : tensor<4x2xf32>) col_init(%{{.*}}, %{{.*}} : tensor<4x2xf32>, tensor<4x2xf32>)
// CHECK:         } {col_dims = array<i64: 1, 2>, row_sum_dims = array<i64: 2, 3, 4>} -> full(tensor<2x4x2x4x4xbf16>) col(tensor<4x2xf32>, tensor<4x2xf32>)
// CHECK-NOT:     linalg.generic
// CHECK:         return
// REMARK: remark: fused a mixed-order reduction group of 10 ops: 2 row reduction(s) in 1 stage(s), 2 column reduction(s)
func.func @group_norm_nchw(%dy: tensor<2x8x4x4xbf16>, %x: tensor<2x8x4x4xbf16>, %mean: tensor<2x4xf32>, %rstd: tensor<2x4xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<8xf32>) bias(%b : tensor<8xf32>) {groups = 4 : i64} : tensor<2x8x4x4xbf16>, tensor<2x4xf32> -> tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>
  return %dx, %dw, %db : tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Channels last with a run-time batch: [N, H, W, G, C/G], the slab is
// (H, W, C/G), the channel (G, C/G).

// CHECK-LABEL: func.func @group_norm_channels_last_dynamic
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<?x4x4x4x2xbf16>, tensor<?x4x4x4x2xbf16>) row(%{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<?x4xf32>) col(%{{.*}} : tensor<4x2xbf16>) col_init(%{{.*}}, %{{.*}} : tensor<4x2xf32>, tensor<4x2xf32>)
// CHECK:         } {col_dims = array<i64: 3, 4>, row_sum_dims = array<i64: 1, 2, 4>} -> full(tensor<?x4x4x4x2xbf16>) col(tensor<4x2xf32>, tensor<4x2xf32>)
// (dγ, dβ sum in f32, then round to the bf16 weight's type, as decomposed)
// CHECK-COUNT-2: arith.truncf %{{.*}} : f32 to bf16
// CHECK:         return
// REMARK: remark: fused a mixed-order reduction group of 10 ops
func.func @group_norm_channels_last_dynamic(%dy: tensor<?x4x4x8xbf16>, %x: tensor<?x4x4x8xbf16>, %mean: tensor<?x4xf32>, %rstd: tensor<?x4xf32>, %w: tensor<8xbf16>, %b: tensor<8xbf16>) -> (tensor<?x4x4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<8xbf16>) bias(%b : tensor<8xbf16>) {groups = 4 : i64, channels_last} : tensor<?x4x4x8xbf16>, tensor<?x4xf32> -> tensor<?x4x4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>
  return %dx, %dw, %db : tensor<?x4x4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}

// -----

// GroupNorm without weight or bias has no column reduction: nothing to
// fuse (as for the other norms), each row reduction (over two dims, so
// no 2-D row-only group either) with its remark.

// CHECK-LABEL: func.func @group_norm_no_affine
// CHECK-NOT:     norm.mixed_reduction
// CHECK:         return
// REMARK-COUNT-2: remark: not fused: no reduction of its domain pairs with it (a row reduction needs a column reduction that keeps one of the dims it sums over)
func.func @group_norm_no_affine(%dy: tensor<2x8x16xf32>, %x: tensor<2x8x16xf32>, %mean: tensor<2x2xf32>, %rstd: tensor<2x2xf32>) -> tensor<2x8x16xf32> {
  %dx = norm.group_norm_grad %dy, %x, %mean, %rstd {groups = 2 : i64} : tensor<2x8x16xf32>, tensor<2x2xf32> -> tensor<2x8x16xf32>
  return %dx : tensor<2x8x16xf32>
}

// -----

// GroupNorm NCHW as a front end may write it in named ops over the
// expanded [N, G, C/G, HW] view: linalg.reduce over dims [2, 3] for the
// slab sums and [0, 3] for dγ / dβ, linalg.broadcast of the [N, G]
// statistics and of the [G, C/G] weight. One multi-axis group.

// CHECK-LABEL: func.func @group_norm_named
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) row(%{{.*}}, %{{.*}} : tensor<2x2xf32>, tensor<2x2xf32>) col(%{{.*}} : tensor<2x4xf32>)
// CHECK:         } {col_dims = array<i64: 1, 2>, row_sum_dims = array<i64: 2, 3>} -> full(tensor<2x2x4x16xf32>) col(tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NOT:     linalg.
// CHECK:         return
// REMARK: remark: fused a mixed-order reduction group of 19 ops: 2 row reduction(s) in 1 stage(s), 2 column reduction(s), 15 elementwise op(s)
func.func @group_norm_named(%x: tensor<2x8x16xf32>, %dy: tensor<2x8x16xf32>, %mean: tensor<2x2xf32>, %rstd: tensor<2x2xf32>, %w: tensor<8xf32>) -> (tensor<2x8x16xf32>, tensor<8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %invm = arith.constant 0.015625 : f32
  %xe = tensor.expand_shape %x [[0], [1, 2], [3]] output_shape [2, 2, 4, 16] : tensor<2x8x16xf32> into tensor<2x2x4x16xf32>
  %dye = tensor.expand_shape %dy [[0], [1, 2], [3]] output_shape [2, 2, 4, 16] : tensor<2x8x16xf32> into tensor<2x2x4x16xf32>
  %we = tensor.expand_shape %w [[0, 1]] output_shape [2, 4] : tensor<8xf32> into tensor<2x4xf32>
  %e4 = tensor.empty() : tensor<2x2x4x16xf32>
  %er = tensor.empty() : tensor<2x2xf32>
  %ec = tensor.empty() : tensor<2x4xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<2x2xf32>) -> tensor<2x2xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mb = linalg.broadcast ins(%mean : tensor<2x2xf32>) outs(%e4 : tensor<2x2x4x16xf32>) dimensions = [2, 3]
  %rb = linalg.broadcast ins(%rstd : tensor<2x2xf32>) outs(%e4 : tensor<2x2x4x16xf32>) dimensions = [2, 3]
  %wb = linalg.broadcast ins(%we : tensor<2x4xf32>) outs(%e4 : tensor<2x2x4x16xf32>) dimensions = [0, 3]
  %xc = linalg.sub ins(%xe, %mb : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %xhat = linalg.mul ins(%xc, %rb : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %wdy = linalg.mul ins(%dye, %wb : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %p = linalg.mul ins(%wdy, %xhat : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %s1 = linalg.reduce ins(%p : tensor<2x2x4x16xf32>) outs(%zr : tensor<2x2xf32>) dimensions = [2, 3]
    (%in: f32, %acc: f32) { %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32 }
  %s2 = linalg.reduce ins(%wdy : tensor<2x2x4x16xf32>) outs(%zr : tensor<2x2xf32>) dimensions = [2, 3]
    (%in: f32, %acc: f32) { %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32 }
  %s1b = linalg.broadcast ins(%s1 : tensor<2x2xf32>) outs(%e4 : tensor<2x2x4x16xf32>) dimensions = [2, 3]
  %s2b = linalg.broadcast ins(%s2 : tensor<2x2xf32>) outs(%e4 : tensor<2x2x4x16xf32>) dimensions = [2, 3]
  %t = linalg.mul ins(%xhat, %s1b : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %u = linalg.add ins(%t, %s2b : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %um = linalg.map ins(%u : tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>)
    (%a: f32, %o: f32) { %m = arith.mulf %a, %invm : f32
      linalg.yield %m : f32 }
  %d = linalg.sub ins(%wdy, %um : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %dxe = linalg.mul ins(%d, %rb : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %q = linalg.mul ins(%dye, %xhat : tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) outs(%e4 : tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %dwe = linalg.reduce ins(%q : tensor<2x2x4x16xf32>) outs(%zc : tensor<2x4xf32>) dimensions = [0, 3]
    (%in: f32, %acc: f32) { %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32 }
  %dbe = linalg.reduce ins(%dye : tensor<2x2x4x16xf32>) outs(%zc : tensor<2x4xf32>) dimensions = [0, 3]
    (%in: f32, %acc: f32) { %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32 }
  %dx = tensor.collapse_shape %dxe [[0], [1, 2], [3]] : tensor<2x2x4x16xf32> into tensor<2x8x16xf32>
  %dw = tensor.collapse_shape %dwe [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %db = tensor.collapse_shape %dbe [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  return %dx, %dw, %db : tensor<2x8x16xf32>, tensor<8xf32>, tensor<8xf32>
}
