// RUN: norm-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(tosa-to-linalg-named,tosa-to-linalg,tosa-to-arith,tosa-to-tensor,norm-fuse-mixed-reductions))' | FileCheck %s --implicit-check-not=linalg.reduce --implicit-check-not=linalg.generic
// RUN: %if mlir-opt-plugin %{ %mlir_opt_plugin %s -split-input-file --pass-pipeline='builtin.module(func.func(tosa-to-linalg-named,tosa-to-linalg,tosa-to-arith,tosa-to-tensor,norm-fuse-mixed-reductions))' | FileCheck %s --implicit-check-not=linalg.reduce --implicit-check-not=linalg.generic %}

// TOSA input after the upstream TOSA-to-linalg passes: reductions come out
// as linalg.reduce + tensor.expand_shape to keepdim shapes, per-row scaling
// as generics over [M, 1], broadcasts as constant-0 indexing maps. Every
// one is fused: --implicit-check-not, as no linalg.reduce or linalg.generic
// may be left anywhere (a CHECK-NOT only looks between two matches).

// CHECK-LABEL: func.func @rms_norm_tosa
// CHECK-DAG:     %[[R:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<64x1xf32> into tensor<64xf32>
// CHECK-DAG:     %[[W:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<1x256xf32> into tensor<256xf32>
// CHECK:         %[[DX:.*]], %[[DW:.*]] = norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<64x256xf32>, tensor<64x256xf32>) row(%[[R]] : tensor<64xf32>) col(%[[W]] : tensor<256xf32>)
// CHECK:         } -> full(tensor<64x256xf32>) col(tensor<256xf32>)
// CHECK:         %[[DWK:.*]] = tensor.expand_shape %[[DW]] {{\[\[}}0, 1]] output_shape [1, 256]
// CHECK-NOT:     linalg.reduce
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[DX]], %[[DWK]]
func.func @rms_norm_tosa(%x: tensor<64x256xf32>, %dy: tensor<64x256xf32>, %rstd: tensor<64x1xf32>, %w: tensor<1x256xf32>) -> (tensor<64x256xf32>, tensor<1x256xf32>) {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %invn = "tosa.const"() <{values = dense<3.906250e-03> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %xhat = tosa.mul %x, %rstd, %shift : (tensor<64x256xf32>, tensor<64x1xf32>, tensor<1xi8>) -> tensor<64x256xf32>
  %wdy = tosa.mul %dy, %w, %shift : (tensor<64x256xf32>, tensor<1x256xf32>, tensor<1xi8>) -> tensor<64x256xf32>
  %p = tosa.mul %xhat, %wdy, %shift : (tensor<64x256xf32>, tensor<64x256xf32>, tensor<1xi8>) -> tensor<64x256xf32>
  %s = tosa.reduce_sum %p {axis = 1 : i32} : (tensor<64x256xf32>) -> tensor<64x1xf32>
  %c = tosa.mul %s, %invn, %shift : (tensor<64x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<64x1xf32>
  %xc = tosa.mul %xhat, %c, %shift : (tensor<64x256xf32>, tensor<64x1xf32>, tensor<1xi8>) -> tensor<64x256xf32>
  %d = tosa.sub %wdy, %xc : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %dx = tosa.mul %d, %rstd, %shift : (tensor<64x256xf32>, tensor<64x1xf32>, tensor<1xi8>) -> tensor<64x256xf32>
  %q = tosa.mul %dy, %xhat, %shift : (tensor<64x256xf32>, tensor<64x256xf32>, tensor<1xi8>) -> tensor<64x256xf32>
  %dw = tosa.reduce_sum %q {axis = 0 : i32} : (tensor<64x256xf32>) -> tensor<1x256xf32>
  return %dx, %dw : tensor<64x256xf32>, tensor<1x256xf32>
}

// -----

// LayerNorm in bf16 through TOSA casts: dx, dgamma and dbeta.
// CHECK-LABEL: func.func @layer_norm_tosa_bf16
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<32x128xbf16>, tensor<32x128xbf16>)
// CHECK-SAME:    col_init(%{{.*}}, %{{.*}} : tensor<128xf32>, tensor<128xf32>)
// CHECK:         } -> full(tensor<32x128xbf16>) col(tensor<128xf32>, tensor<128xf32>)
// CHECK-NOT:     linalg.reduce
func.func @layer_norm_tosa_bf16(%x: tensor<32x128xbf16>, %dy: tensor<32x128xbf16>, %mean: tensor<32x1xf32>, %rstd: tensor<32x1xf32>, %w: tensor<1x128xf32>) -> (tensor<32x128xbf16>, tensor<1x128xf32>, tensor<1x128xf32>) {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %invn = "tosa.const"() <{values = dense<7.812500e-03> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %x32 = tosa.cast %x : (tensor<32x128xbf16>) -> tensor<32x128xf32>
  %dy32 = tosa.cast %dy : (tensor<32x128xbf16>) -> tensor<32x128xf32>
  %xc = tosa.sub %x32, %mean : (tensor<32x128xf32>, tensor<32x1xf32>) -> tensor<32x128xf32>
  %xhat = tosa.mul %xc, %rstd, %shift : (tensor<32x128xf32>, tensor<32x1xf32>, tensor<1xi8>) -> tensor<32x128xf32>
  %wdy = tosa.mul %dy32, %w, %shift : (tensor<32x128xf32>, tensor<1x128xf32>, tensor<1xi8>) -> tensor<32x128xf32>
  %p = tosa.mul %xhat, %wdy, %shift : (tensor<32x128xf32>, tensor<32x128xf32>, tensor<1xi8>) -> tensor<32x128xf32>
  %s1 = tosa.reduce_sum %p {axis = 1 : i32} : (tensor<32x128xf32>) -> tensor<32x1xf32>
  %s2 = tosa.reduce_sum %wdy {axis = 1 : i32} : (tensor<32x128xf32>) -> tensor<32x1xf32>
  %c1 = tosa.mul %s1, %invn, %shift : (tensor<32x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<32x1xf32>
  %c2 = tosa.mul %s2, %invn, %shift : (tensor<32x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<32x1xf32>
  %t = tosa.mul %xhat, %c1, %shift : (tensor<32x128xf32>, tensor<32x1xf32>, tensor<1xi8>) -> tensor<32x128xf32>
  %u = tosa.add %t, %c2 : (tensor<32x128xf32>, tensor<32x1xf32>) -> tensor<32x128xf32>
  %d = tosa.sub %wdy, %u : (tensor<32x128xf32>, tensor<32x128xf32>) -> tensor<32x128xf32>
  %dx32 = tosa.mul %d, %rstd, %shift : (tensor<32x128xf32>, tensor<32x1xf32>, tensor<1xi8>) -> tensor<32x128xf32>
  %dx = tosa.cast %dx32 : (tensor<32x128xf32>) -> tensor<32x128xbf16>
  %q = tosa.mul %dy32, %xhat, %shift : (tensor<32x128xf32>, tensor<32x128xf32>, tensor<1xi8>) -> tensor<32x128xf32>
  %dw = tosa.reduce_sum %q {axis = 0 : i32} : (tensor<32x128xf32>) -> tensor<1x128xf32>
  %db = tosa.reduce_sum %dy32 {axis = 0 : i32} : (tensor<32x128xf32>) -> tensor<1x128xf32>
  return %dx, %dw, %db : tensor<32x128xbf16>, tensor<1x128xf32>, tensor<1x128xf32>
}

// -----

// adaLN through TOSA (issue 42): per-sample (1 + scale) [B, 1, N], row sums
// over N (axis 2), d(scale) / d(shift) over the tokens of each sample
// (axis 1, keepdim [B, 1, N]): one multi-axis group, the keepdim unit dims
// collapsed on the way in and expanded on the way out.
// CHECK-LABEL: func.func @adaln_tosa
// CHECK-DAG:     %[[SC:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<2x1x64xf32> into tensor<2x64xf32>
// CHECK:         %[[DX:.*]], %[[DC:.*]]:2 = norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<2x16x64xf32>) row(%{{.*}}, %{{.*}} : tensor<2x16xf32>, tensor<2x16xf32>) col(%[[SC]] : tensor<2x64xf32>)
// CHECK:         } {col_dims = array<i64: 0, 2>, row_sum_dims = array<i64: 2>} -> full(tensor<2x16x64xf32>) col(tensor<2x64xf32>, tensor<2x64xf32>)
// CHECK:         %[[S:.*]] = tensor.expand_shape %[[DC]]#0 {{\[\[}}0], [1, 2]] output_shape [2, 1, 64]
// CHECK:         %[[H:.*]] = tensor.expand_shape %[[DC]]#1 {{\[\[}}0], [1, 2]] output_shape [2, 1, 64]
// CHECK:         return %[[DX]], %[[S]], %[[H]]
func.func @adaln_tosa(%x: tensor<2x16x64xf32>, %dy: tensor<2x16x64xf32>, %mean: tensor<2x16x1xf32>, %rstd: tensor<2x16x1xf32>, %scale: tensor<2x1x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x1x64xf32>, tensor<2x1x64xf32>) {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %invn = "tosa.const"() <{values = dense<1.562500e-02> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %xc = tosa.sub %x, %mean : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %xhat = tosa.mul %xc, %rstd, %shift : (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<1xi8>) -> tensor<2x16x64xf32>
  %w = tosa.add %scale, %one : (tensor<2x1x64xf32>, tensor<1x1x1xf32>) -> tensor<2x1x64xf32>
  %g = tosa.mul %dy, %w, %shift : (tensor<2x16x64xf32>, tensor<2x1x64xf32>, tensor<1xi8>) -> tensor<2x16x64xf32>
  %p = tosa.mul %xhat, %g, %shift : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<1xi8>) -> tensor<2x16x64xf32>
  %s1 = tosa.reduce_sum %p {axis = 2 : i32} : (tensor<2x16x64xf32>) -> tensor<2x16x1xf32>
  %s2 = tosa.reduce_sum %g {axis = 2 : i32} : (tensor<2x16x64xf32>) -> tensor<2x16x1xf32>
  %c1 = tosa.mul %s1, %invn, %shift : (tensor<2x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x16x1xf32>
  %c2 = tosa.mul %s2, %invn, %shift : (tensor<2x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x16x1xf32>
  %t = tosa.mul %xhat, %c1, %shift : (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<1xi8>) -> tensor<2x16x64xf32>
  %u = tosa.add %t, %c2 : (tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  %d = tosa.sub %g, %u : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %dx = tosa.mul %d, %rstd, %shift : (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<1xi8>) -> tensor<2x16x64xf32>
  %q = tosa.mul %dy, %xhat, %shift : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<1xi8>) -> tensor<2x16x64xf32>
  %dscale = tosa.reduce_sum %q {axis = 1 : i32} : (tensor<2x16x64xf32>) -> tensor<2x1x64xf32>
  %dshift = tosa.reduce_sum %dy {axis = 1 : i32} : (tensor<2x16x64xf32>) -> tensor<2x1x64xf32>
  return %dx, %dscale, %dshift : tensor<2x16x64xf32>, tensor<2x1x64xf32>, tensor<2x1x64xf32>
}
