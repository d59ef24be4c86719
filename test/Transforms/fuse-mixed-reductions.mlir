// RUN: norm-opt %s -split-input-file -norm-fuse-mixed-reductions | FileCheck %s
// RUN: %if mlir-opt-plugin %{ %mlir_opt_plugin %s -split-input-file --pass-pipeline='builtin.module(func.func(norm-fuse-mixed-reductions))' | FileCheck %s %}
// RUN: norm-opt %s -split-input-file -linalg-fuse-elementwise-ops -norm-fuse-mixed-reductions | FileCheck %s --check-prefix=FUSED

// Front-end forms of a norm backward, as torch-mlir / IREE importers emit
// them. Every function must end up with exactly one norm.mixed_reduction
// and no reduction left; the second RUN line first lets upstream fuse the
// elementwise producers into their consumers (bigger, multi-input generics).

#id = affine_map<(d0, d1) -> (d0, d1)>
#rowk = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>
// torch-mlir: one generic per step, keepdim statistics [M, 1], bf16.
// CHECK-LABEL: func.func @torch_layer_norm_bf16_keepdim
// CHECK-NOT:     linalg.generic
// CHECK:         %[[MS:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<64x1xf32> into tensor<64xf32>
// CHECK:         %[[DX:.*]], %[[DW:.*]]:2 = norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<64x256xbf16>, tensor<64x256xbf16>) row(%{{.*}}, %{{.*}} : tensor<64xf32>, tensor<64xf32>) col(%{{.*}} : tensor<256xbf16>) col_init(%{{.*}}, %{{.*}} : tensor<256xf32>, tensor<256xf32>) row_stages {
// CHECK:           norm.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK-NEXT:    } elementwise {
// CHECK:           arith.truncf {{.*}} f32 to bf16
// CHECK:           norm.yield %{{.*}} : bf16
// CHECK-NEXT:    } columns {
// CHECK:           norm.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK-NEXT:    } -> full(tensor<64x256xbf16>) col(tensor<256xf32>, tensor<256xf32>)
// CHECK-NOT:     norm.mixed_reduction
// FUSED-LABEL: func.func @torch_layer_norm_bf16_keepdim
// FUSED:         norm.mixed_reduction
// FUSED-NOT:     iterator_types = {{.*}}reduction
// FUSED:         return
func.func @torch_layer_norm_bf16_keepdim(%x: tensor<64x256xbf16>, %dy: tensor<64x256xbf16>,
    %mean: tensor<64x1xf32>, %rstd: tensor<64x1xf32>, %w: tensor<256xbf16>)
    -> (tensor<64x256xbf16>, tensor<256xbf16>, tensor<256xbf16>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 256.0 : f32
  %e = tensor.empty() : tensor<64x256xf32>
  %x32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x256xbf16>) outs(%e : tensor<64x256xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %v = arith.extf %a : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<64x256xf32>
  %dy32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy : tensor<64x256xbf16>) outs(%e : tensor<64x256xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %v = arith.extf %a : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<64x256xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #rowk, #rowk, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x32, %mean, %rstd : tensor<64x256xf32>, tensor<64x1xf32>, tensor<64x1xf32>) outs(%e : tensor<64x256xf32>) {
  ^bb0(%a: f32, %m: f32, %r: f32, %o: f32):
    %c = arith.subf %a, %m : f32
    %v = arith.mulf %c, %r : f32
    linalg.yield %v : f32
  } -> tensor<64x256xf32>
  %wdy = linalg.generic {indexing_maps = [#col, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w, %dy32 : tensor<256xbf16>, tensor<64x256xf32>) outs(%e : tensor<64x256xf32>) {
  ^bb0(%a: bf16, %g: f32, %o: f32):
    %w32 = arith.extf %a : bf16 to f32
    %v = arith.mulf %g, %w32 : f32
    linalg.yield %v : f32
  } -> tensor<64x256xf32>
  %ek = tensor.empty() : tensor<64x1xf32>
  %zk = linalg.fill ins(%zero : f32) outs(%ek : tensor<64x1xf32>) -> tensor<64x1xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #id, #rowk], iterator_types = ["parallel", "reduction"]}
      ins(%wdy, %xhat : tensor<64x256xf32>, tensor<64x256xf32>) outs(%zk : tensor<64x1xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %v = arith.addf %p, %o : f32
    linalg.yield %v : f32
  } -> tensor<64x1xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #rowk], iterator_types = ["parallel", "reduction"]}
      ins(%wdy : tensor<64x256xf32>) outs(%zk : tensor<64x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<64x1xf32>
  %dx32 = linalg.generic {indexing_maps = [#id, #id, #rowk, #rowk, #rowk, #id], iterator_types = ["parallel", "parallel"]}
      ins(%wdy, %xhat, %s1, %s2, %rstd : tensor<64x256xf32>, tensor<64x256xf32>, tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x1xf32>) outs(%e : tensor<64x256xf32>) {
  ^bb0(%g: f32, %h: f32, %a: f32, %b: f32, %r: f32, %o: f32):
    %c1 = arith.divf %a, %n : f32
    %c2 = arith.divf %b, %n : f32
    %t = arith.mulf %h, %c1 : f32
    %u = arith.addf %t, %c2 : f32
    %d = arith.subf %g, %u : f32
    %v = arith.mulf %r, %d : f32
    linalg.yield %v : f32
  } -> tensor<64x256xf32>
  %eb = tensor.empty() : tensor<64x256xbf16>
  %dx = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dx32 : tensor<64x256xf32>) outs(%eb : tensor<64x256xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %v = arith.truncf %a : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<64x256xbf16>
  %ec = tensor.empty() : tensor<256xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<256xf32>) -> tensor<256xf32>
  %dw32 = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy32, %xhat : tensor<64x256xf32>, tensor<64x256xf32>) outs(%zc : tensor<256xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<256xf32>
  %db32 = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy32 : tensor<64x256xf32>) outs(%zc : tensor<256xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<256xf32>
  %ecb = tensor.empty() : tensor<256xbf16>
  %dw = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%dw32 : tensor<256xf32>) outs(%ecb : tensor<256xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %v = arith.truncf %a : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<256xbf16>
  %db = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%db32 : tensor<256xf32>) outs(%ecb : tensor<256xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %v = arith.truncf %a : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<256xbf16>
  return %dx, %dw, %db : tensor<64x256xbf16>, tensor<256xbf16>, tensor<256xbf16>
}

// -----

// Named ops mixed with generics: linalg.reduce for both reductions,
// linalg.broadcast of the row sum, linalg.map for the elementwise steps.
// CHECK-LABEL: func.func @named_ops_rms_f32
// CHECK-NOT:     linalg.reduce
// CHECK-NOT:     linalg.broadcast
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<128x512xf32>, tensor<128x512xf32>) row(%{{.*}} : tensor<128xf32>) col_init(%{{.*}} : tensor<512xf32>) row_stages
// CHECK:         -> full(tensor<128x512xf32>) col(tensor<512xf32>)
// CHECK-NOT:     linalg.map
// FUSED-LABEL: func.func @named_ops_rms_f32
// FUSED:         norm.mixed_reduction
func.func @named_ops_rms_f32(%x: tensor<128x512xf32>, %dy: tensor<128x512xf32>, %rstd: tensor<128xf32>)
    -> (tensor<128x512xf32>, tensor<512xf32>) {
  %zero = arith.constant 0.0 : f32
  %invn = arith.constant 0.001953125 : f32
  %e = tensor.empty() : tensor<128x512xf32>
  %rb = linalg.broadcast ins(%rstd : tensor<128xf32>) outs(%e : tensor<128x512xf32>) dimensions = [1]
  %xhat = linalg.map { arith.mulf } ins(%x, %rb : tensor<128x512xf32>, tensor<128x512xf32>) outs(%e : tensor<128x512xf32>)
  %p = linalg.map { arith.mulf } ins(%dy, %xhat : tensor<128x512xf32>, tensor<128x512xf32>) outs(%e : tensor<128x512xf32>)
  %er = tensor.empty() : tensor<128xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<128xf32>) -> tensor<128xf32>
  %s = linalg.reduce { arith.addf } ins(%p : tensor<128x512xf32>) outs(%zr : tensor<128xf32>) dimensions = [1]
  %sb = linalg.broadcast ins(%s : tensor<128xf32>) outs(%e : tensor<128x512xf32>) dimensions = [1]
  %dx = linalg.map ins(%dy, %xhat, %sb, %rb : tensor<128x512xf32>, tensor<128x512xf32>, tensor<128x512xf32>, tensor<128x512xf32>) outs(%e : tensor<128x512xf32>)
    (%g: f32, %h: f32, %a: f32, %r: f32, %o: f32) {
      %c = arith.mulf %a, %invn : f32
      %t = arith.mulf %h, %c : f32
      %d = arith.subf %g, %t : f32
      %v = arith.mulf %d, %r : f32
      linalg.yield %v : f32
    }
  %ec = tensor.empty() : tensor<512xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<512xf32>) -> tensor<512xf32>
  %dw = linalg.reduce { arith.addf } ins(%p : tensor<128x512xf32>) outs(%zc : tensor<512xf32>) dimensions = [0]
  return %dx, %dw : tensor<128x512xf32>, tensor<512xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3k = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>
// Rank-3 [B, S, N] with keepdim statistics [B, S, 1], dynamic batch and
// sequence, f16 LayerNorm without weight but with bias: db sums over B and S.
// CHECK-LABEL: func.func @rank3_dynamic_rows_f16_bias_only
// CHECK:         tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<?x?x1xf32> into tensor<?x?xf32>
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<?x?x1024xf16>, tensor<?x?x1024xf16>) row(%{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x?xf32>) col_init(%{{.*}} : tensor<1024xf32>)
// CHECK:         -> full(tensor<?x?x1024xf16>) col(tensor<1024xf32>)
// CHECK-NOT:     iterator_types = {{.*}}reduction
// FUSED-LABEL: func.func @rank3_dynamic_rows_f16_bias_only
// FUSED:         norm.mixed_reduction
// FUSED-NOT:     iterator_types = {{.*}}reduction
func.func @rank3_dynamic_rows_f16_bias_only(%x: tensor<?x?x1024xf16>, %dy: tensor<?x?x1024xf16>,
    %mean: tensor<?x?x1xf32>, %rstd: tensor<?x?x1xf32>) -> (tensor<?x?x1024xf16>, tensor<1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 1024.0 : f32
  %b = tensor.dim %x, %c0 : tensor<?x?x1024xf16>
  %s = tensor.dim %x, %c1 : tensor<?x?x1024xf16>
  %e = tensor.empty(%b, %s) : tensor<?x?x1024xf32>
  %xhat = linalg.generic {indexing_maps = [#id3, #row3k, #row3k, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %mean, %rstd : tensor<?x?x1024xf16>, tensor<?x?x1xf32>, tensor<?x?x1xf32>) outs(%e : tensor<?x?x1024xf32>) {
  ^bb0(%a: f16, %m: f32, %r: f32, %o: f32):
    %a32 = arith.extf %a : f16 to f32
    %c = arith.subf %a32, %m : f32
    %v = arith.mulf %c, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x?x1024xf32>
  %ek = tensor.empty(%b, %s) : tensor<?x?x1xf32>
  %zk = linalg.fill ins(%zero : f32) outs(%ek : tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %s1:2 = linalg.generic {indexing_maps = [#id3, #id3, #row3k, #row3k], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy, %xhat : tensor<?x?x1024xf16>, tensor<?x?x1024xf32>) outs(%zk, %zk : tensor<?x?x1xf32>, tensor<?x?x1xf32>) {
  ^bb0(%g: f16, %h: f32, %o1: f32, %o2: f32):
    %g32 = arith.extf %g : f16 to f32
    %p = arith.mulf %h, %g32 : f32
    %v1 = arith.addf %o1, %p : f32
    %v2 = arith.addf %o2, %g32 : f32
    linalg.yield %v1, %v2 : f32, f32
  } -> (tensor<?x?x1xf32>, tensor<?x?x1xf32>)
  %eh = tensor.empty(%b, %s) : tensor<?x?x1024xf16>
  %dx = linalg.generic {indexing_maps = [#id3, #id3, #row3k, #row3k, #row3k, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy, %xhat, %s1#0, %s1#1, %rstd : tensor<?x?x1024xf16>, tensor<?x?x1024xf32>, tensor<?x?x1xf32>, tensor<?x?x1xf32>, tensor<?x?x1xf32>) outs(%eh : tensor<?x?x1024xf16>) {
  ^bb0(%g: f16, %h: f32, %a: f32, %bb: f32, %r: f32, %o: f16):
    %g32 = arith.extf %g : f16 to f32
    %c1v = arith.divf %a, %n : f32
    %c2v = arith.divf %bb, %n : f32
    %t = arith.mulf %c1v, %h : f32
    %u = arith.addf %c2v, %t : f32
    %d = arith.subf %g32, %u : f32
    %v = arith.mulf %d, %r : f32
    %v16 = arith.truncf %v : f32 to f16
    linalg.yield %v16 : f16
  } -> tensor<?x?x1024xf16>
  %ec = tensor.empty() : tensor<1024xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<1024xf32>) -> tensor<1024xf32>
  %db = linalg.generic {indexing_maps = [#id3, #col3], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy : tensor<?x?x1024xf16>) outs(%zc : tensor<1024xf32>) {
  ^bb0(%g: f16, %o: f32):
    %g32 = arith.extf %g : f16 to f32
    %v = arith.addf %g32, %o : f32
    linalg.yield %v : f32
  } -> tensor<1024xf32>
  return %dx, %db : tensor<?x?x1024xf16>, tensor<1024xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#scalar = affine_map<(d0, d1) -> ()>
// Riders of a training graph, all in one group: dynamic rows and N, a loss
// scale on dy (0-d tensor), dW accumulated into the previous gradient, dW
// and dB from one multi-result generic, a residual gradient added into dx.
// CHECK-LABEL: func.func @training_riders_dynamic
// CHECK:         %[[SCALE:.*]] = tensor.extract %{{.*}}[] : tensor<f32>
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) row(%{{.*}} : tensor<?xf32>) col(%{{.*}} : tensor<?xf32>) col_init(%[[PREV:.*]], %{{.*}} : tensor<?xf32>, tensor<?xf32>)
// CHECK:           arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK:         -> full(tensor<?x?xf32>) col(tensor<?xf32>, tensor<?xf32>)
// CHECK-NOT:     linalg.generic
// FUSED-LABEL: func.func @training_riders_dynamic
// FUSED:         norm.mixed_reduction
// FUSED-NOT:     iterator_types = {{.*}}reduction
func.func @training_riders_dynamic(%x: tensor<?x?xf32>, %dy: tensor<?x?xf32>, %rstd: tensor<?xf32>,
    %w: tensor<?xf32>, %scale: tensor<f32>, %dres: tensor<?x?xf32>, %prev_dw: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x?xf32>
  %nd = tensor.dim %x, %c1 : tensor<?x?xf32>
  %ni = arith.index_cast %nd : index to i64
  %n = arith.uitofp %ni : i64 to f32
  %e = tensor.empty(%m, %nd) : tensor<?x?xf32>
  %sdy = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %scale : tensor<?x?xf32>, tensor<f32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %v = arith.mulf %a, %s : f32
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  %xhat = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%rstd, %x : tensor<?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%r: f32, %a: f32, %o: f32):
    %v = arith.mulf %r, %a : f32
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  %er = tensor.empty(%m) : tensor<?xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  %s = linalg.generic {indexing_maps = [#id, #col, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sdy, %w, %xhat : tensor<?x?xf32>, tensor<?xf32>, tensor<?x?xf32>) outs(%zr : tensor<?xf32>) {
  ^bb0(%g: f32, %ww: f32, %h: f32, %o: f32):
    %wdy = arith.mulf %ww, %g : f32
    %p = arith.mulf %wdy, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<?xf32>
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #row, #row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sdy, %w, %xhat, %s, %rstd, %dres : tensor<?x?xf32>, tensor<?xf32>, tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%g: f32, %ww: f32, %h: f32, %a: f32, %r: f32, %res: f32, %o: f32):
    %wdy = arith.mulf %ww, %g : f32
    %c = arith.divf %a, %n : f32
    %t = arith.mulf %h, %c : f32
    %d = arith.subf %wdy, %t : f32
    %v = arith.mulf %d, %r : f32
    %out = arith.addf %v, %res : f32
    linalg.yield %out : f32
  } -> tensor<?x?xf32>
  %ec = tensor.empty(%nd) : tensor<?xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<?xf32>) -> tensor<?xf32>
  %dwb:2 = linalg.generic {indexing_maps = [#id, #id, #col, #col], iterator_types = ["reduction", "parallel"]}
      ins(%sdy, %xhat : tensor<?x?xf32>, tensor<?x?xf32>) outs(%prev_dw, %zc : tensor<?xf32>, tensor<?xf32>) {
  ^bb0(%g: f32, %h: f32, %o1: f32, %o2: f32):
    %p = arith.mulf %g, %h : f32
    %v1 = arith.addf %o1, %p : f32
    %v2 = arith.addf %o2, %g : f32
    linalg.yield %v1, %v2 : f32, f32
  } -> (tensor<?xf32>, tensor<?xf32>)
  return %dx, %dwb#0, %dwb#1 : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// Statistics recomputed from x inside the backward: mean, then the variance
// over x - mean, then rstd per row, then the dx reductions: three chained
// row stages over one domain.
// CHECK-LABEL: func.func @recomputed_statistics
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<32x768xf32>, tensor<32x768xf32>) col(%{{.*}} : tensor<768xf32>) col_init(%{{.*}}, %{{.*}} : tensor<768xf32>, tensor<768xf32>) row_stages {
// CHECK:           norm.yield %{{.*}} : f32
// CHECK-NEXT:    }, {
// CHECK:           norm.yield %{{.*}} : f32
// CHECK-NEXT:    }, {
// CHECK:           math.rsqrt
// CHECK:           norm.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK-NEXT:    } elementwise {
// CHECK-NOT:     linalg.generic
// FUSED-LABEL: func.func @recomputed_statistics
// FUSED:         norm.mixed_reduction
// FUSED-NOT:     iterator_types = {{.*}}reduction
func.func @recomputed_statistics(%x: tensor<32x768xf32>, %dy: tensor<32x768xf32>, %w: tensor<768xf32>)
    -> (tensor<32x768xf32>, tensor<768xf32>, tensor<768xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 768.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e = tensor.empty() : tensor<32x768xf32>
  %er = tensor.empty() : tensor<32xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<32xf32>) -> tensor<32xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<32x768xf32>) outs(%zr : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  %mean = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%sum : tensor<32xf32>) outs(%er : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.divf %a, %n : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  %xc = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : tensor<32x768xf32>, tensor<32xf32>) outs(%e : tensor<32x768xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %v = arith.subf %a, %m : f32
    linalg.yield %v : f32
  } -> tensor<32x768xf32>
  %ssq = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%xc : tensor<32x768xf32>) outs(%zr : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %sq = arith.mulf %a, %a : f32
    %v = arith.addf %o, %sq : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  %rstd = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%ssq : tensor<32xf32>) outs(%er : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %var = arith.divf %a, %n : f32
    %ve = arith.addf %var, %eps : f32
    %v = math.rsqrt %ve : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xc, %rstd : tensor<32x768xf32>, tensor<32xf32>) outs(%e : tensor<32x768xf32>) {
  ^bb0(%a: f32, %r: f32, %o: f32):
    %v = arith.mulf %a, %r : f32
    linalg.yield %v : f32
  } -> tensor<32x768xf32>
  %wdy = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w : tensor<32x768xf32>, tensor<768xf32>) outs(%e : tensor<32x768xf32>) {
  ^bb0(%g: f32, %ww: f32, %o: f32):
    %v = arith.mulf %g, %ww : f32
    linalg.yield %v : f32
  } -> tensor<32x768xf32>
  %s:2 = linalg.generic {indexing_maps = [#id, #id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%xhat, %wdy : tensor<32x768xf32>, tensor<32x768xf32>) outs(%zr, %zr : tensor<32xf32>, tensor<32xf32>) {
  ^bb0(%h: f32, %g: f32, %o1: f32, %o2: f32):
    %p = arith.mulf %h, %g : f32
    %v1 = arith.addf %o1, %p : f32
    %v2 = arith.addf %o2, %g : f32
    linalg.yield %v1, %v2 : f32, f32
  } -> (tensor<32xf32>, tensor<32xf32>)
  %dx = linalg.generic {indexing_maps = [#id, #id, #row, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xhat, %wdy, %s#0, %s#1, %rstd : tensor<32x768xf32>, tensor<32x768xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) outs(%e : tensor<32x768xf32>) {
  ^bb0(%h: f32, %g: f32, %a: f32, %b: f32, %r: f32, %o: f32):
    %c1 = arith.divf %a, %n : f32
    %c2 = arith.divf %b, %n : f32
    %t = arith.mulf %h, %c1 : f32
    %u = arith.addf %t, %c2 : f32
    %d = arith.subf %g, %u : f32
    %v = arith.mulf %d, %r : f32
    linalg.yield %v : f32
  } -> tensor<32x768xf32>
  %ec = tensor.empty() : tensor<768xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<768xf32>) -> tensor<768xf32>
  %dw = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %xhat : tensor<32x768xf32>, tensor<32x768xf32>) outs(%zc : tensor<768xf32>) {
  ^bb0(%g: f32, %h: f32, %o: f32):
    %p = arith.mulf %g, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<768xf32>
  %db = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<32x768xf32>) outs(%zc : tensor<768xf32>) {
  ^bb0(%g: f32, %o: f32):
    %v = arith.addf %o, %g : f32
    linalg.yield %v : f32
  } -> tensor<768xf32>
  return %dx, %dw, %db : tensor<32x768xf32>, tensor<768xf32>, tensor<768xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#rowk3 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#colk3 = affine_map<(d0, d1, d2) -> (0, 0, d2)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>
// torch's post-grad graph (test/Import/graphs): rows [B, S], dW a keepdim
// sum over both row dims ([1, 1, N]). The fused op accumulates it as [N],
// expanded back for its users.
// CHECK-LABEL: func.func @torch_rms_keepdim_column_3d
// CHECK:         %[[INIT:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2]] : tensor<1x1x256xf32> into tensor<256xf32>
// CHECK:         %[[DX:.*]], %[[DW:.*]] = norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<?x128x256xf32>, tensor<?x128x256xf32>) row(%{{.*}} : tensor<?x128xf32>) col(%{{.*}} : tensor<256xf32>) col_init(%[[INIT]] : tensor<256xf32>)
// CHECK:         } -> full(tensor<?x128x256xf32>) col(tensor<256xf32>)
// CHECK:         %[[BACK:.*]] = tensor.expand_shape %[[DW]] {{\[\[}}0, 1, 2]] output_shape [1, 1, 256] : tensor<256xf32> into tensor<1x1x256xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[DX]], %[[BACK]]
// FUSED-LABEL: func.func @torch_rms_keepdim_column_3d
// FUSED:         norm.mixed_reduction
func.func @torch_rms_keepdim_column_3d(%x: tensor<?x128x256xf32>, %dy: tensor<?x128x256xf32>,
    %rstd: tensor<?x128x1xf32>, %w: tensor<256xf32>) -> (tensor<?x128x256xf32>, tensor<1x1x256xf32>) {
  %c0 = arith.constant 0 : index
  %b = tensor.dim %x, %c0 : tensor<?x128x256xf32>
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 256.0 : f32
  %e = tensor.empty(%b) : tensor<?x128x256xf32>
  %xhat = linalg.generic {indexing_maps = [#id3, #rowk3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %rstd : tensor<?x128x256xf32>, tensor<?x128x1xf32>) outs(%e : tensor<?x128x256xf32>) {
  ^bb0(%a: f32, %r: f32, %o: f32):
    %v = arith.mulf %a, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x128x256xf32>
  %ek = tensor.empty() : tensor<1x1x256xf32>
  %zk = linalg.fill ins(%zero : f32) outs(%ek : tensor<1x1x256xf32>) -> tensor<1x1x256xf32>
  %dw = linalg.generic {indexing_maps = [#id3, #id3, #colk3], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy, %xhat : tensor<?x128x256xf32>, tensor<?x128x256xf32>) outs(%zk : tensor<1x1x256xf32>) {
  ^bb0(%g: f32, %h: f32, %o: f32):
    %p = arith.mulf %g, %h : f32
    %v = arith.addf %p, %o : f32
    linalg.yield %v : f32
  } -> tensor<1x1x256xf32>
  %wdy = linalg.generic {indexing_maps = [#id3, #col3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy, %w : tensor<?x128x256xf32>, tensor<256xf32>) outs(%e : tensor<?x128x256xf32>) {
  ^bb0(%g: f32, %a: f32, %o: f32):
    %v = arith.mulf %g, %a : f32
    linalg.yield %v : f32
  } -> tensor<?x128x256xf32>
  %er = tensor.empty(%b) : tensor<?x128x1xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<?x128x1xf32>) -> tensor<?x128x1xf32>
  %s = linalg.generic {indexing_maps = [#id3, #id3, #rowk3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%wdy, %xhat : tensor<?x128x256xf32>, tensor<?x128x256xf32>) outs(%zr : tensor<?x128x1xf32>) {
  ^bb0(%a: f32, %h: f32, %o: f32):
    %p = arith.mulf %a, %h : f32
    %v = arith.addf %p, %o : f32
    linalg.yield %v : f32
  } -> tensor<?x128x1xf32>
  %dx = linalg.generic {indexing_maps = [#id3, #id3, #rowk3, #rowk3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%wdy, %xhat, %s, %rstd : tensor<?x128x256xf32>, tensor<?x128x256xf32>, tensor<?x128x1xf32>, tensor<?x128x1xf32>) outs(%e : tensor<?x128x256xf32>) {
  ^bb0(%g: f32, %h: f32, %a: f32, %r: f32, %o: f32):
    %c = arith.divf %a, %n : f32
    %t = arith.mulf %h, %c : f32
    %d = arith.subf %g, %t : f32
    %v = arith.mulf %d, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x128x256xf32>
  return %dx, %dw : tensor<?x128x256xf32>, tensor<1x1x256xf32>
}

// -----

// A [4, 1, 1, 8] domain (one pooled row per sample, a ConvNeXt head's
// LayerNorm2d): dy is read as its [4, 8] source, leaving out the unit dims;
// index 0 either way, so it is a full input, read with the unit dims inserted.
// CHECK-LABEL: func.func @unit_row_dims(
// CHECK:       %[[DY:.*]] = tensor.expand_shape %arg1 {{\[\[}}0], [1, 2, 3]] output_shape [4, 1, 1, 8] : tensor<4x8xf32> into tensor<4x1x1x8xf32>
// CHECK:       norm.mixed_reduction full(%arg0, %[[DY]] :
// CHECK-NOT:   linalg.generic
#full = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#view = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
#rows = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
#cols = affine_map<(d0, d1, d2, d3) -> (d3)>
func.func @unit_row_dims(%x: tensor<4x1x1x8xf32>, %dy: tensor<4x8xf32>)
    -> (tensor<4x1x1x8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x1x1x1xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x1x1x1xf32>) -> tensor<4x1x1x1xf32>
  %rowsum = linalg.generic {indexing_maps = [#full, #view, #rows],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %dy : tensor<4x1x1x8xf32>, tensor<4x8xf32>) outs(%r0 : tensor<4x1x1x1xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4x1x1x1xf32>
  %ef = tensor.empty() : tensor<4x1x1x8xf32>
  %dx = linalg.generic {indexing_maps = [#full, #view, #rows, #full],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %dy, %rowsum : tensor<4x1x1x8xf32>, tensor<4x8xf32>, tensor<4x1x1x1xf32>) outs(%ef : tensor<4x1x1x8xf32>) {
  ^bb0(%a: f32, %b: f32, %s: f32, %o: f32):
    %m = arith.mulf %a, %s : f32
    %d = arith.subf %b, %m : f32
    linalg.yield %d : f32
  } -> tensor<4x1x1x8xf32>
  %ec = tensor.empty() : tensor<8xf32>
  %c0 = linalg.fill ins(%zero : f32) outs(%ec : tensor<8xf32>) -> tensor<8xf32>
  %colsum = linalg.generic {indexing_maps = [#full, #view, #cols],
      iterator_types = ["reduction", "reduction", "reduction", "parallel"]}
      ins(%x, %dy : tensor<4x1x1x8xf32>, tensor<4x8xf32>) outs(%c0 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %dx, %colsum : tensor<4x1x1x8xf32>, tensor<8xf32>
}
