// RUN: norm-opt %s --convert-norm-to-gpu=latency-ctas=0 -split-input-file | FileCheck %s
// RUN: norm-opt %s --convert-norm-to-gpu="remarks=true latency-ctas=0" -split-input-file -verify-diagnostics -o /dev/null
// RUN: norm-opt %s --convert-norm-to-gpu="chip=sm_80 remarks=true latency-ctas=0" -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: norm-opt %s --convert-norm-to-gpu="max-cluster-ctas=1 latency-ctas=0" -split-input-file | FileCheck %s --check-prefix=OFF
// RUN: norm-opt %s --convert-norm-to-gpu="features=+ptx80 latency-ctas=0" -split-input-file | FileCheck %s --check-prefix=OFF

// RMSNorm backward, f32, N = 32768 (static), as --norm-fuse-mixed-reductions
// leaves it: one CTA's registers hold at most 8192 columns (256 lanes of
// 32), so on sm_90 a thread-block cluster of 4 CTAs shares each row: CTA r
// keeps the r-th quarter in registers, and the row sum goes through
// distributed shared memory: lane r' < 4 of each CTA stores the CTA's part
// into CTA r''s slot of its rank with st.async, completing on r''s mbarrier
// of the slot set; every thread waits on its own CTA's mbarrier and adds
// the 4 slots in rank order; thread 0 arms the set for its next use.
// Without PTX 8.1 (st.async) the looped kernels.

// CHECK-LABEL: func.func @rms_wide
// CHECK:         norm.gpu = #norm.kernel_plan<kernel = "rms_wide_0", vector = 4,
// CHECK-SAME:      threads_per_row = 256, rows_per_cta = 1, chunks_per_thread = 8,
// CHECK-SAME:      single_launch = false,
// CHECK-SAME:      column_groups = 0, split_column_groups = 0
// CHECK-SAME:      cluster_ctas = 4, dependent_launch = true>
// Two slot sets (row parity) of the one stage: a slot per rank for its one
// sum, and an mbarrier (8 bytes) per set.
// CHECK-DAG:   llvm.mlir.global internal @rms_wide_0_main_cluster_sums() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<8 x f32>
// CHECK-DAG:   llvm.mlir.global internal @rms_wide_0_main_cluster_barriers() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<4 x f32>
// CHECK:       gpu.func @rms_wide_0_main(
// CHECK-SAME:    nvvm.cluster_dim = array<i32: 4, 1, 1>
// The CTA's rank, its cluster (the program), the clusters, and its
// quarter of the 8192 chunks.
// CHECK:         %[[RANK:.*]] = arith.remui %{{.*}}, %c4_i64{{.*}} : i64
// CHECK:         %[[PROG:.*]] = arith.divui %{{.*}}, %c4_i64{{.*}} : i64
// CHECK:         %[[PROGS:.*]] = arith.divui %{{.*}}, %c4_i64{{.*}} : i64
// CHECK:         %[[PART:.*]] = arith.ceildivui %{{.*}}, %c4_i64{{.*}} : i64
// CHECK:         arith.muli %[[RANK]], %[[PART]] : i64
// CHECK:         %[[SLOTS:.*]] = llvm.mlir.addressof @rms_wide_0_main_cluster_sums : !llvm.ptr<3>
// CHECK:         %[[BARS:.*]] = llvm.mlir.addressof @rms_wide_0_main_cluster_barriers : !llvm.ptr<3>
// Thread 0 initialises the two mbarriers (one arrival a phase: its own),
// then, after a CTA barrier, arms their first phases with the 4 CTAs' 4
// bytes; the cluster barrier that orders that before any peer's push is
// split around the first row's loads.
// CHECK:         scf.if
// CHECK-COUNT-2:   nvvm.mbarrier.init %{{.*}}, %c1_i32 : !llvm.ptr<3>, i32
// CHECK-NEXT:      nvvm.fence.mbarrier.init
// CHECK:         gpu.barrier
// CHECK:         scf.if
// CHECK:           nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16_i32 : !llvm.ptr<3>, i32
// CHECK:           nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16_i32{{.*}} : !llvm.ptr<3>, i32
// CHECK:         nvvm.cluster.arrive {aligned}
// CHECK:         llvm.load {{.*}} -> vector<4xf32>
// CHECK:         nvvm.cluster.wait {aligned}
// CHECK-NEXT:    scf.for %[[IT:arg[0-9]+]] =
// The row sum: within the warp, across the CTA's warps, then the cluster.
// CHECK:           gpu.shuffle  xor
// CHECK:           gpu.barrier
// CHECK:           gpu.barrier
// CHECK:           %[[PARITY:.*]] = arith.remui %[[IT]], %c2_i64{{.*}} : i64
// CHECK:           %[[SET:.*]] = arith.addi
// CHECK:           %[[BAR:.*]] = llvm.getelementptr %[[BARS]][%[[SET]]] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, i64
// CHECK:           %[[PUSHER:.*]] = arith.cmpi ult, %{{.*}}, %c4_i64{{.*}} : i64
// CHECK:           scf.if %[[PUSHER]] {
// CHECK:             %[[PEER:.*]] = arith.trunci %{{.*}} : i64 to i32
// CHECK:             %[[THEIRBAR:.*]] = nvvm.mapa %[[BAR]], %[[PEER]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK:             %[[MINE:.*]] = llvm.getelementptr %[[SLOTS]][%{{.*}}] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, f32
// CHECK:             %[[THEIRS:.*]] = nvvm.mapa %[[MINE]], %[[PEER]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK:             nvvm.inline_ptx "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [$0], $1, [$2];" ro(%[[THEIRS]], %{{.*}}, %[[THEIRBAR]] : !llvm.ptr<7>, f32, !llvm.ptr<7>)
// CHECK:           }
// Phase parity (it / 2) % 2 of the set's mbarrier; thread 0 re-arms it.
// CHECK:           %[[USE:.*]] = arith.divui %[[IT]], %c2_i64{{.*}} : i64
// CHECK:           %[[PHASE:.*]] = arith.remui %[[USE]], %c2_i64{{.*}} : i64
// CHECK:           %[[P32:.*]] = arith.trunci %[[PHASE]] : i64 to i32
// CHECK:           nvvm.mbarrier.try_wait.parity %[[BAR]], %[[P32]], %{{.*}} : !llvm.ptr<3>, i32, i32
// CHECK:           scf.if
// CHECK:             nvvm.mbarrier.arrive.expect_tx %[[BAR]], %c16_i32{{.*}} : !llvm.ptr<3>, i32
// The four slots of this CTA, in rank order.
// CHECK:           %[[S0:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK:           %[[S1:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK:           %[[A01:.*]] = arith.addf %[[S0]], %[[S1]] : f32
// CHECK:           %[[S2:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK:           %[[A012:.*]] = arith.addf %[[A01]], %[[S2]] : f32
// CHECK:           %[[S3:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK:           arith.addf %[[A012]], %[[S3]] : f32
// After the row loop: no CTA leaves while a peer may still push to it.
// CHECK:         nvvm.cluster.arrive {aligned}
// CHECK-NEXT:    nvvm.cluster.wait {aligned}
// CHECK:       gpu.func @rms_wide_0_main_scalar(
// CHECK-SAME:    nvvm.cluster_dim = array<i32: 4, 1, 1>
// CHECK:       gpu.func @rms_wide_0_final(
// CHECK-NOT:     nvvm.cluster_dim

// SM80: remark: GPU kernels rms_wide_0: looped, 512 lanes per row
// OFF-LABEL: func.func @rms_wide
// OFF:         chunks_per_thread = 0,
// OFF-NOT:     cluster_ctas
// OFF-NOT:     nvvm.cluster_dim
func.func @rms_wide(%arg0: tensor<?x32768xf32>, %arg1: tensor<?x32768xf32>, %arg2: tensor<?xf32>, %arg3: tensor<32768xf32>) -> (tensor<?x32768xf32>, tensor<32768xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 3.276800e+04 : f32
  %0 = tensor.empty() : tensor<32768xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<32768xf32>) -> tensor<32768xf32>
  // expected-remark @below {{GPU kernels rms_wide_0: resident, 256 lanes per row, 1 rows per CTA, vector 4, chunks per lane 8, clusters of 4 CTAs per row, dependent final launch, ~200 registers, CTAs per SM: occupancy}}
  %full_results, %col_results = norm.mixed_reduction full(%arg1, %arg0 : tensor<?x32768xf32>, tensor<?x32768xf32>) row(%arg2 : tensor<?xf32>) col(%arg3 : tensor<32768xf32>) col_init(%1 : tensor<32768xf32>) row_stages {
  ^bb0(%arg4: f32, %arg5: f32, %arg6: f32, %arg7: f32):
    %2 = arith.mulf %arg4, %arg6 : f32
    %3 = arith.mulf %arg5, %arg7 : f32
    %4 = arith.mulf %2, %3 : f32
    norm.yield %4 : f32
  } elementwise {
  ^bb0(%arg4: f32, %arg5: f32, %arg6: f32, %arg7: f32, %arg8: f32):
    %2 = arith.mulf %arg4, %arg6 : f32
    %3 = arith.mulf %arg5, %arg7 : f32
    %4 = arith.divf %arg8, %cst_0 : f32
    %5 = arith.mulf %2, %4 : f32
    %6 = arith.subf %3, %5 : f32
    %7 = arith.mulf %6, %arg6 : f32
    norm.yield %7 : f32
  } columns {
  ^bb0(%arg4: f32, %arg5: f32, %arg6: f32, %arg7: f32, %arg8: f32):
    %2 = arith.mulf %arg4, %arg6 : f32
    %3 = arith.mulf %arg5, %2 : f32
    norm.yield %3 : f32
  } -> full(tensor<?x32768xf32>) col(tensor<32768xf32>)
  return %full_results, %col_results : tensor<?x32768xf32>, tensor<32768xf32>
}

// -----

// 16-bit rows of 48 KiB (N = 12288) take a cluster of 4 parts of 128
// lanes instead of the bulk ring (RMSNorm here, LayerNorm in the next
// case, with its two row sums a row ahead).
// CHECK-LABEL: func.func @rms_bf16_48k
// CHECK:         cluster_ctas = 4
// CHECK:         nvvm.cluster_dim = array<i32: 4, 1, 1>
// SM80: remark: GPU kernels rms_bf16_48k_0: looped, 512 lanes per row
// OFF-LABEL: func.func @rms_bf16_48k
// OFF-NOT:     cluster_ctas
// OFF:         bulk_stages = 3
func.func @rms_bf16_48k(%arg0: tensor<?x12288xbf16>, %arg1: tensor<?x12288xbf16>, %arg2: tensor<?xf32>, %arg3: tensor<12288xbf16>) -> (tensor<?x12288xbf16>, tensor<12288xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 1.228800e+04 : f32
  %0 = tensor.empty() : tensor<12288xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<12288xf32>) -> tensor<12288xf32>
  // expected-remark @below {{GPU kernels rms_bf16_48k_0: resident, 128 lanes per row, 1 rows per CTA, vector 8, chunks per lane 3, clusters of 4 CTAs per row, cp.async ring of 2 rows, dependent final launch, ~160 registers, CTAs per SM: occupancy}}
  %full_results, %col_results = norm.mixed_reduction full(%arg1, %arg0 : tensor<?x12288xbf16>, tensor<?x12288xbf16>) row(%arg2 : tensor<?xf32>) col(%arg3 : tensor<12288xbf16>) col_init(%1 : tensor<12288xf32>) row_stages {
  ^bb0(%arg4: bf16, %arg5: bf16, %arg6: f32, %arg7: bf16):
    %4 = arith.extf %arg4 : bf16 to f32
    %5 = arith.mulf %4, %arg6 : f32
    %6 = arith.extf %arg5 : bf16 to f32
    %7 = arith.extf %arg7 : bf16 to f32
    %8 = arith.mulf %6, %7 : f32
    %9 = arith.mulf %5, %8 : f32
    norm.yield %9 : f32
  } elementwise {
  ^bb0(%arg4: bf16, %arg5: bf16, %arg6: f32, %arg7: bf16, %arg8: f32):
    %4 = arith.extf %arg4 : bf16 to f32
    %5 = arith.mulf %4, %arg6 : f32
    %6 = arith.extf %arg5 : bf16 to f32
    %7 = arith.extf %arg7 : bf16 to f32
    %8 = arith.mulf %6, %7 : f32
    %9 = arith.divf %arg8, %cst_0 : f32
    %10 = arith.mulf %5, %9 : f32
    %11 = arith.subf %8, %10 : f32
    %12 = arith.mulf %11, %arg6 : f32
    %13 = arith.truncf %12 : f32 to bf16
    norm.yield %13 : bf16
  } columns {
  ^bb0(%arg4: bf16, %arg5: bf16, %arg6: f32, %arg7: bf16, %arg8: f32):
    %4 = arith.extf %arg5 : bf16 to f32
    %5 = arith.extf %arg4 : bf16 to f32
    %6 = arith.mulf %5, %arg6 : f32
    %7 = arith.mulf %4, %6 : f32
    norm.yield %7 : f32
  } -> full(tensor<?x12288xbf16>) col(tensor<12288xf32>)
  return %full_results, %col_results : tensor<?x12288xbf16>, tensor<12288xf32>
}

// -----

// CHECK-LABEL: func.func @layer_bf16_48k
// CHECK:         async_stages = 3
// CHECK-SAME:    cluster_ctas = 4
// CHECK-SAME:    cluster_sums_ahead = true
// OFF-LABEL: func.func @layer_bf16_48k
// OFF-NOT:     cluster_ctas
// OFF:         bulk_stages = 2
func.func @layer_bf16_48k(%arg0: tensor<?x12288xbf16>, %arg1: tensor<?x12288xbf16>, %arg2: tensor<?xf32>, %arg3: tensor<?xf32>, %arg4: tensor<12288xbf16>) -> (tensor<?x12288xbf16>, tensor<12288xf32>, tensor<12288xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 1.228800e+04 : f32
  %0 = tensor.empty() : tensor<12288xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<12288xf32>) -> tensor<12288xf32>
  // expected-remark @below {{GPU kernels layer_bf16_48k_0: resident, 128 lanes per row, 1 rows per CTA, vector 8, chunks per lane 3, clusters of 4 CTAs per row, cp.async ring of 3 rows, row sums a row ahead, dependent final launch, ~184 registers, CTAs per SM: occupancy}}
  %full_results, %col_results:2 = norm.mixed_reduction full(%arg1, %arg0 : tensor<?x12288xbf16>, tensor<?x12288xbf16>) row(%arg2, %arg3 : tensor<?xf32>, tensor<?xf32>) col(%arg4 : tensor<12288xbf16>) col_init(%1, %1 : tensor<12288xf32>, tensor<12288xf32>) row_stages {
  ^bb0(%arg6: bf16, %arg7: bf16, %arg8: f32, %arg9: f32, %arg10: bf16):
    %8 = arith.extf %arg6 : bf16 to f32
    %9 = arith.subf %8, %arg8 : f32
    %10 = arith.mulf %9, %arg9 : f32
    %11 = arith.extf %arg7 : bf16 to f32
    %12 = arith.extf %arg10 : bf16 to f32
    %13 = arith.mulf %11, %12 : f32
    %14 = arith.mulf %10, %13 : f32
    norm.yield %14, %13 : f32, f32
  } elementwise {
  ^bb0(%arg6: bf16, %arg7: bf16, %arg8: f32, %arg9: f32, %arg10: bf16, %arg11: f32, %arg12: f32):
    %8 = arith.extf %arg6 : bf16 to f32
    %9 = arith.subf %8, %arg8 : f32
    %10 = arith.mulf %9, %arg9 : f32
    %11 = arith.extf %arg7 : bf16 to f32
    %12 = arith.extf %arg10 : bf16 to f32
    %13 = arith.mulf %11, %12 : f32
    %14 = arith.divf %arg11, %cst_0 : f32
    %15 = arith.mulf %10, %14 : f32
    %16 = arith.divf %arg12, %cst_0 : f32
    %17 = arith.addf %15, %16 : f32
    %18 = arith.subf %13, %17 : f32
    %19 = arith.mulf %18, %arg9 : f32
    %20 = arith.truncf %19 : f32 to bf16
    norm.yield %20 : bf16
  } columns {
  ^bb0(%arg6: bf16, %arg7: bf16, %arg8: f32, %arg9: f32, %arg10: bf16, %arg11: f32, %arg12: f32):
    %8 = arith.extf %arg7 : bf16 to f32
    %9 = arith.extf %arg6 : bf16 to f32
    %10 = arith.subf %9, %arg8 : f32
    %11 = arith.mulf %10, %arg9 : f32
    %12 = arith.mulf %8, %11 : f32
    norm.yield %12, %8 : f32, f32
  } -> full(tensor<?x12288xbf16>) col(tensor<12288xf32>, tensor<12288xf32>)
  return %full_results, %col_results#0, %col_results#1 : tensor<?x12288xbf16>, tensor<12288xf32>, tensor<12288xf32>
}

// -----

// LayerNorm's row stage yields two sums: the vector kernel pushes row
// it + 1's sums (read from the ring) before it waits for row it's, with a
// ring of 3 rows and four slot sets (mbarriers) per row stage; the scalar
// fallback (no ring) keeps two and waits in its own row.
// CHECK-LABEL: func.func @layer_bf16_ahead
// CHECK:         async_stages = 3
// CHECK-SAME:    cluster_ctas = 4
// CHECK-SAME:    cluster_sums_ahead = true
// CHECK:       llvm.mlir.global internal @layer_bf16_ahead_0_main_scalar_cluster_barriers(){{.*}} : !llvm.array<4 x f32>
// CHECK:       llvm.mlir.global internal @layer_bf16_ahead_0_main_cluster_barriers(){{.*}} : !llvm.array<8 x f32>
// CHECK-LABEL: gpu.func @layer_bf16_ahead_0_main(
// Row 0's sums go out once the peers' mbarriers are armed.
// CHECK:         nvvm.cluster.wait
// CHECK-NEXT:    nvvm.cp.async.wait.group 1
// CHECK:         nvvm.inline_ptx "st.async
// CHECK:         scf.for %[[IT:[a-z0-9]+]] =
// Row it + 2's copies, row it + 1 landed, its sums pushed (but past the
// last row), then row it's awaited (use it / 4 of its set).
// CHECK:           nvvm.cp.async.wait.group 1
// CHECK-NEXT:      %[[NEXT:.*]] = arith.addi %[[IT]], %{{.*}} : i64
// CHECK-NEXT:      %[[MORE:.*]] = arith.cmpi ult, %[[NEXT]], %{{.*}} : i64
// CHECK-NEXT:      scf.if %[[MORE]] {
// CHECK:             nvvm.inline_ptx "st.async
// CHECK:           %[[USE:.*]] = arith.divui %[[IT]], %c4_i64{{.*}} : i64
// CHECK:           arith.remui %[[USE]], %c2_i64
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           nvvm.mbarrier.arrive.expect_tx
// CHECK:           scf.yield
// CHECK:         nvvm.cp.async.wait.group 0
// CHECK-NEXT:    nvvm.cluster.arrive
func.func @layer_bf16_ahead(%arg0: tensor<?x16384xbf16>, %arg1: tensor<?x16384xbf16>, %arg2: tensor<?xf32>, %arg3: tensor<?xf32>, %arg4: tensor<16384xbf16>) -> (tensor<?x16384xbf16>, tensor<16384xf32>, tensor<16384xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 1.638400e+04 : f32
  %0 = tensor.empty() : tensor<16384xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<16384xf32>) -> tensor<16384xf32>
  // expected-remark @below {{GPU kernels layer_bf16_ahead_0: resident, 128 lanes per row, 1 rows per CTA, vector 8, chunks per lane 4, clusters of 4 CTAs per row, cp.async ring of 3 rows, row sums a row ahead, dependent final launch, ~232 registers, CTAs per SM: occupancy}}
  %full_results, %col_results:2 = norm.mixed_reduction full(%arg1, %arg0 : tensor<?x16384xbf16>, tensor<?x16384xbf16>) row(%arg2, %arg3 : tensor<?xf32>, tensor<?xf32>) col(%arg4 : tensor<16384xbf16>) col_init(%1, %1 : tensor<16384xf32>, tensor<16384xf32>) row_stages {
  ^bb0(%arg6: bf16, %arg7: bf16, %arg8: f32, %arg9: f32, %arg10: bf16):
    %8 = arith.extf %arg6 : bf16 to f32
    %9 = arith.subf %8, %arg8 : f32
    %10 = arith.mulf %9, %arg9 : f32
    %11 = arith.extf %arg7 : bf16 to f32
    %12 = arith.extf %arg10 : bf16 to f32
    %13 = arith.mulf %11, %12 : f32
    %14 = arith.mulf %10, %13 : f32
    norm.yield %14, %13 : f32, f32
  } elementwise {
  ^bb0(%arg6: bf16, %arg7: bf16, %arg8: f32, %arg9: f32, %arg10: bf16, %arg11: f32, %arg12: f32):
    %8 = arith.extf %arg6 : bf16 to f32
    %9 = arith.subf %8, %arg8 : f32
    %10 = arith.mulf %9, %arg9 : f32
    %11 = arith.extf %arg7 : bf16 to f32
    %12 = arith.extf %arg10 : bf16 to f32
    %13 = arith.mulf %11, %12 : f32
    %14 = arith.divf %arg11, %cst_0 : f32
    %15 = arith.mulf %10, %14 : f32
    %16 = arith.divf %arg12, %cst_0 : f32
    %17 = arith.addf %15, %16 : f32
    %18 = arith.subf %13, %17 : f32
    %19 = arith.mulf %18, %arg9 : f32
    %20 = arith.truncf %19 : f32 to bf16
    norm.yield %20 : bf16
  } columns {
  ^bb0(%arg6: bf16, %arg7: bf16, %arg8: f32, %arg9: f32, %arg10: bf16, %arg11: f32, %arg12: f32):
    %8 = arith.extf %arg7 : bf16 to f32
    %9 = arith.extf %arg6 : bf16 to f32
    %10 = arith.subf %9, %arg8 : f32
    %11 = arith.mulf %10, %arg9 : f32
    %12 = arith.mulf %8, %11 : f32
    norm.yield %12, %8 : f32, f32
  } -> full(tensor<?x16384xbf16>) col(tensor<16384xf32>, tensor<16384xf32>)
  return %full_results, %col_results#0, %col_results#1 : tensor<?x16384xbf16>, tensor<16384xf32>, tensor<16384xf32>
}
