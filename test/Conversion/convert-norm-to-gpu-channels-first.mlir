// Channels-first groups (n_dim: N is not the last dim) on the GPU: the
// strided kernel (StridedKernel.cpp, docs/gpu.md "Channels-first rows"),
// its plan, its launch.
// RUN: norm-opt %s --convert-norm-to-gpu | FileCheck %s
// RUN: norm-opt %s --convert-norm-to-gpu="threads-per-row=128 rows-per-cta=4 vector-bytes=4" | FileCheck %s --check-prefix=OPTS
// RUN: norm-opt %s --convert-norm-to-gpu="max-resident-elements=8" | FileCheck %s --check-prefix=LOOPED
// RUN: norm-opt %s --convert-norm-to-gpu="remarks=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: norm-opt %s --norm-lower-to-nvvm --convert-norm-to-gpu-launch -canonicalize | FileCheck %s --check-prefix=LAUNCH
// (A run-time N is refused: convert-norm-to-gpu-invalid.mlir.)

// LayerNorm2d's backward, f32 x [B, 96, S]: dx, dW, dB.
// The plan: 8 warps of 32 rows x 2 per lane split N, each holding its 12
// columns in registers between the passes (12 x 2 values per input), two
// such groups per CTA of 512 threads, their [2][2][96] f32 accumulators
// in dynamic shared memory; one cooperative launch where it fits.
// CHECK-LABEL: func.func @layer_cf
// CHECK:         norm.gpu = #norm.kernel_plan<kernel = "layer_cf_0", vector = 2,
// CHECK-SAME:      threads_per_row = 256, rows_per_cta = 2, chunks_per_thread = 12,
// CHECK-SAME:      block = 512, combine_in_cta = true, single_launch = true,
// CHECK-SAME:      final_threads = 512, dynamic_shared_bytes = 1536
// CHECK:       gpu.module @norm_kernels
// The vector kernel (2 rows per lane: I a multiple of 2), the scalar one,
// the final kernel of the two-launch path.
// CHECK:         gpu.func @layer_cf_0_main(
// CHECK-SAME:      workgroup(%{{.*}} : memref<2048xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<1024xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// Loads of 2 consecutive rows of one column, I elements apart per column.
// CHECK:           llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xf32>
// The column sums of the warp's 12 columns x 2 sums (24 values, padded to
// 32) over its lanes: a reduce-scatter, each level sending half of what a
// lane keeps (16 + 8 + 4 + 2 + 1 shuffles, not a butterfly of 5 per sum);
// every lane then owns one sum and adds it to the group's accumulator.
// CHECK-COUNT-16:  gpu.shuffle  xor %{{[0-9]+}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32
// CHECK-COUNT-8:   gpu.shuffle  xor %{{[0-9]+}}, %c8_i32{{(_[0-9]+)?}}, %c32_i32
// CHECK-COUNT-4:   gpu.shuffle  xor %{{[0-9]+}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32
// CHECK-COUNT-2:   gpu.shuffle  xor %{{[0-9]+}}, %c2_i32{{(_[0-9]+)?}}, %c32_i32
// CHECK:           gpu.shuffle  xor %{{[0-9]+}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32
// CHECK-NOT:       gpu.shuffle
// CHECK:         gpu.func @layer_cf_0_main_scalar(
// CHECK:         gpu.func @layer_cf_0_final(
// OPTS-LABEL:  func.func @layer_cf
// OPTS:          norm.gpu = #norm.kernel_plan<kernel = "layer_cf_0", vector = 1,
// OPTS-SAME:       threads_per_row = 128, rows_per_cta = 4, chunks_per_thread = 24,
// OPTS-NOT:      gpu.func @layer_cf_0_main(
// OPTS:          gpu.func @layer_cf_0_main_scalar(
// REMARK: remark: GPU kernels layer_cf_0: channels-first rows: 2 rows per lane (1 in the scalar kernel), 8 warps splitting N, 2 tiles per CTA, 12 columns per warp held, CTAs per SM: occupancy
// max-resident-elements below 12 columns x 1 row: no held columns, each
// pass loops over the warp's columns, 16 / 4 of them per iteration.
// LOOPED:        norm.gpu = #norm.kernel_plan<kernel = "layer_cf_0", vector = 4,
// LOOPED-SAME:     threads_per_row = 256, rows_per_cta = 2, chunks_per_thread = 0,
// LAUNCH-LABEL: func.func @layer_cf
// rows = B x S, the column stride I = S, every tensor checked for it.
// LAUNCH:         %[[B:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x96x?xf32>
// LAUNCH:         %[[S:.*]] = tensor.dim %{{.*}}, %c2 : tensor<?x96x?xf32>
// LAUNCH:         %[[ROWS:.*]] = arith.muli %[[B]], %[[S]] : index
// The occupancy query, then the launch: the scalar kernel, or the vector
// one where the pointers, N and I allow; cols = 96, then I for the two
// full inputs and dx.
// LAUNCH:         gpu.launch_func async [%{{.*}}] @norm_kernels::@layer_cf_0_main_scalar
// LAUNCH:         gpu.launch_func async [%{{.*}}] @norm_kernels::@layer_cf_0_main blocks
// LAUNCH:         gpu.launch_func async [%{{.*}}] @norm_kernels::@layer_cf_0_main_scalar blocks in (%{{.*}}, %c1, %c1) threads in (%c512, %c1, %c1) dynamic_shared_memory_size %c1536_i32 args({{.*}}, %c96_i64 : i64, %[[I:.*]] : i64, %[[I]] : i64, %[[I]] : i64,
func.func @layer_cf(%x: tensor<?x96x?xf32>, %dy: tensor<?x96x?xf32>, %mean: tensor<?x?xf32>, %rstd: tensor<?x?xf32>, %w: tensor<96xf32>, %z: tensor<96xf32>) -> (tensor<?x96x?xf32>, tensor<96xf32>, tensor<96xf32>) {
  %n = arith.constant 96.0 : f32
  %dx, %dw, %db = norm.mixed_reduction full(%x, %dy : tensor<?x96x?xf32>, tensor<?x96x?xf32>) row(%mean, %rstd : tensor<?x?xf32>, tensor<?x?xf32>) col(%w : tensor<96xf32>) col_init(%z, %z : tensor<96xf32>, tensor<96xf32>)
  row_stages {
  ^bb0(%xe: f32, %g: f32, %m: f32, %r: f32, %we: f32):
    %c = arith.subf %xe, %m : f32
    %h = arith.mulf %c, %r : f32
    %wg = arith.mulf %g, %we : f32
    %p = arith.mulf %h, %wg : f32
    norm.yield %p, %wg : f32, f32
  } elementwise {
  ^bb0(%xe: f32, %g: f32, %m: f32, %r: f32, %we: f32, %s1: f32, %s2: f32):
    %c = arith.subf %xe, %m : f32
    %h = arith.mulf %c, %r : f32
    %wg = arith.mulf %g, %we : f32
    %a = arith.divf %s1, %n : f32
    %b = arith.divf %s2, %n : f32
    %t = arith.mulf %a, %h : f32
    %u = arith.addf %t, %b : f32
    %d = arith.subf %wg, %u : f32
    %v = arith.mulf %d, %r : f32
    norm.yield %v : f32
  } columns {
  ^bb0(%xe: f32, %g: f32, %m: f32, %r: f32, %we: f32, %s1: f32, %s2: f32):
    %c = arith.subf %xe, %m : f32
    %h = arith.mulf %c, %r : f32
    %p = arith.mulf %g, %h : f32
    norm.yield %p, %g : f32, f32
  } {n_dim = 1 : i64} -> full(tensor<?x96x?xf32>) col(tensor<96xf32>, tensor<96xf32>)
  return %dx, %dw, %db : tensor<?x96x?xf32>, tensor<96xf32>, tensor<96xf32>
}
