// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu | FileCheck %s
// RUN: norm-opt %s -split-input-file --norm-lower-to-nvvm --convert-norm-to-gpu-launch -canonicalize | FileCheck %s --check-prefix=LAUNCH

// Batched rows (adaLN over x [B, S, N]: row sums over N, column sums
// keeping B and N; issue 42) map onto the 2-D kernels of one sample's
// [S, N] problem with the sample as blockIdx.y: the kernels offset every
// pointer to their sample's at the entry (full tensors by S x stride, the
// row inputs by S, the column inputs and the partial rows by N), the
// partial rows hold every sample's N columns side by side ([C, P, B x N]),
// and the final kernel reduces B x N columns. Two launches (no grid
// barrier across samples), no clusters, split kernels or peeled rows.

// CHECK-LABEL: func.func @adaln_batched
// CHECK:         norm.gpu = #norm.kernel_plan<kernel = "adaln_batched_0"
// CHECK-SAME:      single_launch = false
// CHECK:         gpu.func @adaln_batched_0_main(
// CHECK:           %[[B:.*]] = gpu.block_id  y
// CHECK:           %[[NB:.*]] = gpu.grid_dim  y
// CHECK:           gpu.func @adaln_batched_0_main_scalar(
// CHECK:         gpu.func @adaln_batched_0_final(

// The host: the main kernels' grid is (P, B) over a sample's rows (S = 3),
// the final kernel's B x N = 16 columns of P partial rows.
// LAUNCH-LABEL: func.func @adaln_batched
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@adaln_batched_0_main_scalar blocks in (%{{.*}}, %c2, %c1) {{.*}} args({{.*}}, %c3_i64 : i64, %c8_i64 : i64,
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@adaln_batched_0_main blocks in (%{{.*}}, %c2, %c1)
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@adaln_batched_0_final blocks in (%c1, %c1, %c1) {{.*}} args({{.*}}, %c16_i64 : i64)
func.func @adaln_batched(%xhat: tensor<2x3x8xf32>, %dy: tensor<2x3x8xf32>, %rstd: tensor<2x3xf32>, %scale: tensor<2x8xf32>, %z: tensor<2x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %one = arith.constant 1.0 : f32
  %nf = arith.constant 8.0 : f32
  %dx, %dc:2 = norm.mixed_reduction full(%xhat, %dy : tensor<2x3x8xf32>, tensor<2x3x8xf32>) row(%rstd : tensor<2x3xf32>) col(%scale : tensor<2x8xf32>) col_init(%z, %z : tensor<2x8xf32>, tensor<2x8xf32>)
  row_stages {
  ^bb0(%h: f32, %d: f32, %r: f32, %s: f32):
    %w = arith.addf %s, %one : f32
    %g = arith.mulf %d, %w : f32
    %gh = arith.mulf %g, %h : f32
    norm.yield %gh, %g : f32, f32
  }
  elementwise {
  ^bb0(%h: f32, %d: f32, %r: f32, %s: f32, %sgh: f32, %sg: f32):
    %w = arith.addf %s, %one : f32
    %g = arith.mulf %d, %w : f32
    %a = arith.divf %sgh, %nf : f32
    %b = arith.divf %sg, %nf : f32
    %ha = arith.mulf %h, %a : f32
    %t = arith.subf %g, %b : f32
    %u = arith.subf %t, %ha : f32
    %v = arith.mulf %u, %r : f32
    norm.yield %v : f32
  }
  columns {
  ^bb0(%h: f32, %d: f32, %r: f32, %s: f32, %sgh: f32, %sg: f32):
    %p = arith.mulf %d, %h : f32
    norm.yield %p, %d : f32, f32
  } {row_sum_dims = array<i64: 2>, col_dims = array<i64: 0, 2>} -> full(tensor<2x3x8xf32>) col(tensor<2x8xf32>, tensor<2x8xf32>)
  return %dx, %dc#0, %dc#1 : tensor<2x3x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
