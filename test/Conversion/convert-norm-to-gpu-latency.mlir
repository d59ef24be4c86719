// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --convert-norm-to-gpu | FileCheck %s
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --convert-norm-to-gpu="remarks=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --convert-norm-to-gpu="latency-ctas=0" | FileCheck %s --check-prefix=OFF
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --convert-norm-to-gpu="latency-max-rows=0" | FileCheck %s --check-prefix=OFF
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --convert-norm-to-gpu="chip=sm_80" | FileCheck %s --check-prefix=OFF
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --convert-norm-to-gpu="features=+ptx80" | FileCheck %s --check-prefix=OFF
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --convert-norm-to-gpu="latency-ctas=4 latency-max-rows=8" | FileCheck %s --check-prefix=FEW
// RUN: norm-opt %s -split-input-file --norm-lower-to-nvvm --convert-norm-to-gpu-launch -canonicalize | FileCheck %s --check-prefix=LAUNCH

// The latency kernels of a static N (issue 44): for calls of at most
// latency-max-rows (32) rows, and 2048 / (a CTA's chunks of a row), one
// thread-block cluster of latency-ctas (16) CTAs of 512 threads. LayerNorm
// bf16, N = 1024: CTA r owns columns [64 r, 64 r + 64), 8 chunks, so up to
// 32 rows; 8 lanes of one 16-byte chunk per row, 64 rows at once. Each row stage's sums go to the CTA's parts, the cluster adds
// the 16 parts of each row in rank order (mapa: reads of the peers' shared
// memory, between two cluster barriers), and the CTA finishes its columns
// of dW and dB itself: no grid barrier and no partial buffer. sm_80 (no
// clusters), PTX 8.0 (the cluster plans need 8.1), latency-ctas=0 and
// latency-max-rows=0 have none.

// CHECK-LABEL: func.func @layer_bf16
// CHECK:         norm.gpu = #norm.kernel_plan<kernel = "layer_bf16_0"
// CHECK-SAME:      latency_ctas = 16, latency_rows = 32>
// CHECK:       gpu.module @norm_kernels
// CHECK:         gpu.func @layer_bf16_0_latency(
// CHECK-SAME:      known_block_size = array<i32: 512, 1, 1>, nvvm.cluster_dim = array<i32: 16, 1, 1>
// CHECK:           nvvm.cluster.arrive
// CHECK:           nvvm.cluster.wait
// CHECK-COUNT-16:  nvvm.mapa
// CHECK:           nvvm.cluster.arrive
// CHECK:           nvvm.cluster.wait
// CHECK-NOT:       gpu.func
// CHECK-NOT:       atom
// CHECK:           gpu.barrier
// CHECK:           gpu.return
// CHECK:         gpu.func @layer_bf16_0_latency_scalar(
// CHECK-SAME:      nvvm.cluster_dim = array<i32: 16, 1, 1>
// REMARK: GPU kernels layer_bf16_0: {{.*}}, latency kernels of one 16-CTA cluster for up to 32 rows,
// OFF-LABEL: func.func @layer_bf16
// OFF-NOT:     latency_ctas
// OFF-NOT:     _latency
// FEW-LABEL: func.func @layer_bf16
// FEW:         latency_ctas = 4, latency_rows = 8>
// LAUNCH-LABEL: func.func @layer_bf16
// LAUNCH:         %[[ATMOST:.*]] = arith.cmpi sle, %{{.*}}, %c32_i64
// LAUNCH:         %[[TAKE:.*]] = arith.andi %{{.*}}, %[[ATMOST]]
// LAUNCH:         scf.if %[[TAKE]] {
// LAUNCH:           scf.index_switch
// LAUNCH:             gpu.launch_func async [%{{.*}}] @norm_kernels::@layer_bf16_0_latency_scalar blocks in (%c16, %c1, %c1) threads in (%c512, %c1, %c1) dynamic_shared_memory_size %c32768_i32
// LAUNCH:             gpu.launch_func async [%{{.*}}] @norm_kernels::@layer_bf16_0_latency blocks in (%c16, %c1, %c1) threads in (%c512, %c1, %c1) dynamic_shared_memory_size %c32768_i32
// LAUNCH:         } else {
// LAUNCH:           @norm_kernels::@layer_bf16_0_main_scalar
func.func @layer_bf16(%dy: tensor<?x1024xbf16>, %x: tensor<?x1024xbf16>,
    %mean: tensor<?xf32>, %rstd: tensor<?xf32>, %w: tensor<1024xbf16>)
    -> (tensor<?x1024xbf16>, tensor<1024xbf16>, tensor<1024xbf16>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd
      weight(%w : tensor<1024xbf16>) bias(%w : tensor<1024xbf16>)
      : tensor<?x1024xbf16>, tensor<?xf32>
      -> tensor<?x1024xbf16>, tensor<1024xbf16>, tensor<1024xbf16>
  return %dx, %dw, %db
      : tensor<?x1024xbf16>, tensor<1024xbf16>, tensor<1024xbf16>
}

// -----

// Rows of 8 vector chunks (RMSNorm bf16, N = 64): a cluster of 8 CTAs, one
// chunk each, so that every CTA owns a part.
// CHECK-LABEL: func.func @rms_short
// CHECK:         latency_ctas = 8, latency_rows = 32>
// CHECK:         gpu.func @rms_short_0_latency(
// CHECK-SAME:      nvvm.cluster_dim = array<i32: 8, 1, 1>
func.func @rms_short(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>,
    %rstd: tensor<?xf32>, %w: tensor<64xbf16>)
    -> (tensor<?x64xbf16>, tensor<64xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xbf16>)
      : tensor<?x64xbf16>, tensor<?xf32> -> tensor<?x64xbf16>, tensor<64xbf16>
  return %dx, %dw : tensor<?x64xbf16>, tensor<64xbf16>
}

// -----

// A run-time N has no latency kernels (their parts are sized at compile
// time).
// CHECK-LABEL: func.func @dynamic_n
// CHECK-NOT:     latency_ctas
// CHECK:         gpu.module
// CHECK-NOT:     _latency
func.func @dynamic_n(%dy: tensor<?x?xf32>, %x: tensor<?x?xf32>,
    %rstd: tensor<?xf32>, %w: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<?xf32>)
      : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>, tensor<?xf32>
  return %dx, %dw : tensor<?x?xf32>, tensor<?xf32>
}
