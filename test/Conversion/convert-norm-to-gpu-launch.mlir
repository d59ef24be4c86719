// RUN: norm-opt %s -split-input-file --norm-lower-to-nvvm=latency-ctas=0 --convert-norm-to-gpu-launch -canonicalize | FileCheck %s
// RUN: norm-opt %s -split-input-file --norm-lower-to-nvvm="single-launch=false dependent-launch=false latency-ctas=0" --convert-norm-to-gpu-launch -canonicalize | FileCheck %s --check-prefix=TWO
// The host lowering reaches the LLVM dialect with upstream passes only.
// RUN: norm-opt %s -split-input-file --norm-lower-to-nvvm=latency-ctas=0 --convert-norm-to-gpu-launch | norm-opt -split-input-file -pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},convert-linalg-to-loops,convert-scf-to-cf,expand-strided-metadata,finalize-memref-to-llvm,gpu-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)' | FileCheck %s --check-prefix=LLVM
// With the latency kernels (the default), too: the graph of two groups
// around a matmul reaches LLVM, each group branching on its rows.
// RUN: norm-opt %s -split-input-file --norm-lower-to-nvvm --convert-norm-to-gpu-launch | norm-opt -split-input-file -pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},convert-linalg-to-loops,convert-scf-to-cf,expand-strided-metadata,finalize-memref-to-llvm,gpu-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)' | FileCheck %s --check-prefix=LLVMLAT
// RUN: not norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --convert-norm-to-gpu=latency-ctas=0 --convert-norm-to-gpu-launch 2>&1 | FileCheck %s --check-prefix=ORDER
// Bad option values are errors naming the option.
// RUN: not norm-opt %s --convert-norm-to-gpu-launch="host-shared=maybe" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: not norm-opt %s --convert-norm-to-gpu-launch="no-such=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOOPT
// BADOPT: for the --host-shared option: 'maybe' is invalid value for boolean argument
// NOOPT: no such option no-such

// A static RMSNorm backward: the group becomes its buffers, one launch
// sequence on the caller's stream, and its results as tensors.
// CHECK-LABEL: func.func @rms_static
// CHECK: %[[S:.*]] = call @normrt_ir_stream()
// CHECK: call @normrt_ir_begin(%[[S]])
// CHECK-DAG: bufferization.to_buffer %arg1 read_only : tensor<64x256xf32> to memref<64x256xf32>
// CHECK-DAG: gpu.alloc async {{.*}} () : memref<64x256xf32>
// CHECK: call @normrt_ir_sm_count()
// CHECK: call @normrt_ir_check_aligned
// The vector kernel for 16-byte aligned rows, else the scalar one.
// CHECK: llvm.ptrtoint
// CHECK: arith.remui
// The grid from the occupancy of the chosen kernel (query kind 3).
// CHECK: call @normrt_ir_next_launch(%c3_i32, %c1_i64)
// CHECK: scf.index_switch
// CHECK: gpu.launch_func async [%{{.*}}] @norm_kernels::@rms_static_0_main_scalar
// CHECK: gpu.launch_func async [%{{.*}}] @norm_kernels::@rms_static_0_main blocks
// CHECK: call @normrt_ir_query_result()
// CHECK: call @normrt_ir_workspace
// One cooperative launch where it fits (query kind 4), with a grid
// barrier word; else the main kernel and the final kernel after it.
// CHECK: call @normrt_ir_next_launch(%c4_i32, %c1_i64)
// CHECK: call @normrt_ir_grid_barrier
// CHECK: call @normrt_ir_next_launch(
// CHECK: gpu.launch_func async {{.*}} @norm_kernels::@rms_static_0_main_scalar {{.*}} args(
// The final kernel as a programmatic dependent (kind 2).
// CHECK: call @normrt_ir_next_launch(%c2_i32, %c1_i64)
// CHECK: gpu.launch_func async {{.*}} @norm_kernels::@rms_static_0_final blocks
// CHECK: %[[ST:.*]] = call @normrt_ir_end(%[[S]], %c1_i32)
// CHECK: %[[OK:.*]] = arith.cmpi eq, %[[ST]], %c0_i32
// CHECK: cf.assert %[[OK]]
// CHECK: %[[DX:.*]] = bufferization.to_tensor %{{.*}} restrict writable : memref<64x256xf32>
// CHECK: %[[DW:.*]] = bufferization.to_tensor %{{.*}} restrict writable : memref<256xf32>
// CHECK: return %[[DX]], %[[DW]]
// CHECK-NOT: norm.mixed_reduction

// Without the single launch: no fits query, a plain main launch, a plain
// final launch.
// TWO-LABEL: func.func @rms_static
// TWO-NOT: %c4_i32
// TWO-NOT: normrt_ir_grid_barrier
// TWO: gpu.launch_func async {{.*}} @norm_kernels::@rms_static_0_final
// TWO-NOT: %c2_i32

// LLVM-LABEL: llvm.func @rms_static
// LLVM: llvm.call @normrt_ir_begin
// LLVM: llvm.call @mgpuStreamCreate()
// LLVM: gpu.launch_func <%{{.*}} : !llvm.ptr> @norm_kernels::@rms_static_0_main
// LLVM: llvm.call @normrt_ir_end

// ORDER: error: convert-norm-to-gpu-launch: run gpu-module-to-binary first
func.func @rms_static(%dy: tensor<64x256xf32>, %x: tensor<64x256xf32>, %rstd: tensor<64xf32>, %w: tensor<256xf32>) -> (tensor<64x256xf32>, tensor<256xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<256xf32>)
      : tensor<64x256xf32>, tensor<64xf32> -> tensor<64x256xf32>, tensor<256xf32>
  return %dx, %dw : tensor<64x256xf32>, tensor<256xf32>
}

// -----

// A run-time N: the smallest resident tier that holds N, else the plan's
// own (looped) kernels; the domain's sizes come from the tensors.
// CHECK-LABEL: func.func @rms_dyn
// CHECK: tensor.dim %arg1, %c0
// CHECK: tensor.dim %arg1, %c1
// CHECK: gpu.alloc async {{.*}} (%{{.*}}, %{{.*}}) : memref<?x?xf32>
// Checks before the driver: rows >= 0 and N >= 1 (NORMRT_ERROR_OUT_OF_RANGE).
// CHECK: scf.if
// CHECK: call @normrt_ir_fail(%c5_i32, %{{.*}}) : (i32, !llvm.ptr) -> ()
// CHECK: call @normrt_ir_sm_count()
// CHECK: scf.if
// CHECK: @norm_kernels::@rms_dyn_0_tier{{[0-9]+}}_main
// CHECK: } else {
// CHECK: @norm_kernels::@rms_dyn_0_main
// LLVM-LABEL: llvm.func @rms_dyn
func.func @rms_dyn(%dy: tensor<?x?xf32>, %x: tensor<?x?xf32>, %rstd: tensor<?xf32>, %w: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<?xf32>)
      : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>, tensor<?xf32>
  return %dx, %dw : tensor<?x?xf32>, tensor<?xf32>
}

// -----

// Long f32 rows on sm_90a: clusters of 4 CTAs per row. The occupancy query
// counts clusters of 4 (the kernels carry their cluster shape), and the
// grid is 4 CTAs per program.
// CHECK-LABEL: func.func @rms_wide
// CHECK: call @normrt_ir_next_launch(%c3_i32, %c4_i64)
// CHECK: call @normrt_ir_query_result()
// CHECK: arith.muli %{{.*}}, %c4_i64
// CHECK: @norm_kernels::@rms_wide_0_main
func.func @rms_wide(%dy: tensor<?x32768xf32>, %x: tensor<?x32768xf32>,
    %rstd: tensor<?xf32>, %w: tensor<32768xf32>)
    -> (tensor<?x32768xf32>, tensor<32768xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<32768xf32>)
      : tensor<?x32768xf32>, tensor<?xf32> -> tensor<?x32768xf32>, tensor<32768xf32>
  return %dx, %dw : tensor<?x32768xf32>, tensor<32768xf32>
}

// -----

// Two groups of different domains, a matmul between them: each group is
// lowered where it stands, in its own launch sequence; the matmul is left
// alone and reads the first group's result as a tensor; dW of the bf16
// LayerNorm comes out of the final kernel's epilogue.
// CHECK-LABEL: func.func @two_groups
// CHECK: call @normrt_ir_begin
// CHECK: @norm_kernels::@two_groups_0_main
// CHECK: call @normrt_ir_end
// CHECK: %[[DX:.*]] = bufferization.to_tensor {{.*}} : memref<?x256xf32>
// CHECK: linalg.matmul ins(%[[DX]],
// CHECK: call @normrt_ir_begin
// CHECK: @norm_kernels::@two_groups_1_main
// CHECK: call @normrt_ir_end
// CHECK: bufferization.to_tensor {{.*}} : memref<?x128xbf16>
// LLVMLAT-LABEL: llvm.func @two_groups
// LLVMLAT: llvm.call @normrt_ir_begin
// LLVMLAT: gpu.launch_func {{.*}} @norm_kernels::@two_groups_0_latency_scalar
// LLVMLAT: gpu.launch_func {{.*}} @norm_kernels::@two_groups_0_latency blocks
// LLVMLAT: gpu.launch_func {{.*}} @norm_kernels::@two_groups_0_main_scalar
// LLVMLAT: gpu.launch_func {{.*}} @norm_kernels::@two_groups_0_final
// LLVMLAT: llvm.call @normrt_ir_end
// LLVMLAT: llvm.call @normrt_ir_begin
// LLVMLAT: gpu.launch_func {{.*}} @norm_kernels::@two_groups_1_latency_scalar
// LLVMLAT: gpu.launch_func {{.*}} @norm_kernels::@two_groups_1_main
// LLVMLAT: llvm.call @normrt_ir_end
// LLVM-LABEL: llvm.func @two_groups
// LLVM-COUNT-2: llvm.call @normrt_ir_begin
func.func @two_groups(
    %dy: tensor<?x256xf32>, %x: tensor<?x256xf32>, %rstd: tensor<?xf32>,
    %w: tensor<256xf32>, %m: tensor<256x256xf32>, %acc: tensor<?x256xf32>,
    %dq: tensor<?x128xbf16>, %q: tensor<?x128xbf16>, %q_mean: tensor<?xf32>,
    %q_rstd: tensor<?xf32>, %q_w: tensor<128xf32>)
    -> (tensor<?x256xf32>, tensor<256xf32>, tensor<?x128xbf16>,
        tensor<128xf32>, tensor<128xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<256xf32>)
      : tensor<?x256xf32>, tensor<?xf32> -> tensor<?x256xf32>, tensor<256xf32>
  %y = linalg.matmul ins(%dx, %m : tensor<?x256xf32>, tensor<256x256xf32>)
      outs(%acc : tensor<?x256xf32>) -> tensor<?x256xf32>
  %dqx, %dqw, %dqb = norm.layer_norm_grad %dq, %q, %q_mean, %q_rstd
      weight(%q_w : tensor<128xf32>) bias(%q_w : tensor<128xf32>)
      : tensor<?x128xbf16>, tensor<?xf32>
      -> tensor<?x128xbf16>, tensor<128xf32>, tensor<128xf32>
  return %y, %dw, %dqx, %dqw, %dqb
      : tensor<?x256xf32>, tensor<256xf32>, tensor<?x128xbf16>,
        tensor<128xf32>, tensor<128xf32>
}
