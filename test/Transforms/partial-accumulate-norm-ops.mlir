// RUN: norm-opt %s -split-input-file --pass-pipeline='builtin.module(norm-decompose,func.func(norm-fuse-mixed-reductions,norm-partial-accumulate{programs=4}),canonicalize,cse)' | FileCheck %s

// The loop structure for the norm ops as front ends emit them: recognition
// then partial accumulation with P = 4, one case per form.

// LayerNorm, bf16, weight and bias: two row sums in one stage, two column
// results, so two fp32 accumulators carried through the row loop, two
// [4, N] partial buffers, and two fixed-order final reductions (programs
// 0..3 in order) before the narrowing truncf of dW and dB.

// CHECK-LABEL: func.func @layer_weight_bias
// CHECK:         %[[ZEROS:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<64xf32>)
// CHECK:         %[[PART:.*]] = tensor.empty() : tensor<4x64xf32>
// CHECK:         %[[FA:.*]]:3 = scf.forall (%[[P:.*]]) in (4) shared_outs(%{{.*}} = %{{.*}}, %[[PW:.*]] = %[[PART]], %[[PB:.*]] = %[[PART]]) -> (tensor<16x64xbf16>, tensor<4x64xf32>, tensor<4x64xf32>)
// CHECK:           scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %[[ZEROS]], %{{.*}} = %[[ZEROS]]) -> (tensor<?x64xbf16>, tensor<64xf32>, tensor<64xf32>)
// CHECK:             scf.for {{.*}} -> (f32, f32)
// CHECK:             scf.for {{.*}} -> (tensor<?x64xbf16>, tensor<64xf32>, tensor<64xf32>)
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[PW]][%[[P]], 0] [1, 64] [1, 1]
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[PB]][%[[P]], 0] [1, 64] [1, 1]
// CHECK:         scf.for %{{.*}} = %c0 to %c64
// CHECK:           scf.for %{{.*}} = %c0 to %c4 {{.*}} -> (f32)
// CHECK:         scf.for %{{.*}} = %c0 to %c64
// CHECK:           scf.for %{{.*}} = %c0 to %c4 {{.*}} -> (f32)
// CHECK-COUNT-2: arith.truncf %{{.*}} : f32 to bf16
func.func @layer_weight_bias(%dy: tensor<16x64xbf16>, %x: tensor<16x64xbf16>, %mean: tensor<16xf32>, %rstd: tensor<16xf32>, %w: tensor<64xbf16>, %b: tensor<64xbf16>) -> (tensor<16x64xbf16>, tensor<64xbf16>, tensor<64xbf16>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xbf16>) bias(%b : tensor<64xbf16>) : tensor<16x64xbf16>, tensor<16xf32> -> tensor<16x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
  return %dx, %dw, %db : tensor<16x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
}

// -----

// LayerNorm, f16, bias only: one column result (dB), one partial buffer.

// CHECK-LABEL: func.func @layer_bias_only
// CHECK:         scf.forall (%{{.*}}) in (4) shared_outs(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<8x32xf16>, tensor<4x32xf32>)
// CHECK:           scf.for {{.*}} -> (tensor<?x32xf16>, tensor<32xf32>)
// CHECK:         scf.for %{{.*}} = %c0 to %c32
// CHECK:           scf.for %{{.*}} = %c0 to %c4 {{.*}} -> (f32)
// CHECK-NOT:     scf.forall
func.func @layer_bias_only(%dy: tensor<8x32xf16>, %x: tensor<8x32xf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %b: tensor<32xf16>) -> (tensor<8x32xf16>, tensor<32xf16>) {
  %dx, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd bias(%b : tensor<32xf16>) : tensor<8x32xf16>, tensor<8xf32> -> tensor<8x32xf16>, tensor<32xf16>
  return %dx, %db : tensor<8x32xf16>, tensor<32xf16>
}

// -----

// RMSNorm, f32 weight, zero-centred, dynamic rows: the forall's block of
// rows is ceil(M / 4); dx slices are dynamic.

// CHECK-LABEL: func.func @rms_zero_centred_dynamic
// CHECK:         %[[M:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x128xf32>
// CHECK:         arith.ceildivui %[[M]], %c4
// CHECK:         scf.forall (%{{.*}}) in (4) {{.*}} -> (tensor<?x128xf32>, tensor<4x128xf32>)
// CHECK:           scf.for {{.*}} -> (tensor<?x128xf32>, tensor<128xf32>)
// CHECK:             scf.for {{.*}} -> (f32)
// CHECK:         scf.for %{{.*}} = %c0 to %c128
// CHECK:           scf.for %{{.*}} = %c0 to %c4 {{.*}} -> (f32)
func.func @rms_zero_centred_dynamic(%dy: tensor<?x128xf32>, %x: tensor<?x128xf32>, %rstd: tensor<?xf32>, %w: tensor<128xf32>) -> (tensor<?x128xf32>, tensor<128xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<128xf32>) {zero_centered_weight} : tensor<?x128xf32>, tensor<?xf32> -> tensor<?x128xf32>, tensor<128xf32>
  return %dx, %dw : tensor<?x128xf32>, tensor<128xf32>
}

// -----

// RMSNorm without weight: no column reduction, nothing fused, so no loop.

// CHECK-LABEL: func.func @rms_no_weight
// CHECK-NOT:     scf.forall
// CHECK:         linalg.generic
func.func @rms_no_weight(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %rstd: tensor<4xf32>) -> tensor<4x8xf32> {
  %dx = norm.rms_norm_grad %dy, %x, %rstd : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  return %dx : tensor<4x8xf32>
}
