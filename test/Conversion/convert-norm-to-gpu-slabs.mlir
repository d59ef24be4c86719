// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions=multi-axis=gpu --convert-norm-to-gpu | FileCheck %s
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions=multi-axis=gpu --convert-norm-to-gpu=remarks=true -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: norm-opt %s -split-input-file --norm-lower-to-nvvm --convert-norm-to-gpu-launch -canonicalize | FileCheck %s --check-prefix=LAUNCH

// GroupNorm (issue 42): its multi-axis group is a slab domain
// ([N, G, C/G, HW], or [N, HW, G, C/G] channels last), and runs the slab
// kernel: a CTA per (n, g) slab, the row sums reduced in the CTA, the
// column sums per channel into one partial row per sample, then the final
// kernel over the G x C/G column slots of the N partial rows.

// REMARK: remark: GPU kernels group_norm_nchw_0: GroupNorm slabs: a CTA of 512 threads per slab
// REMARK: remark: GPU kernels group_norm_nhwc_dynamic_0: GroupNorm slabs
// CHECK-LABEL: func.func @group_norm_nchw
// CHECK:         norm.gpu = #norm.kernel_plan<kernel = "group_norm_nchw_0"
// CHECK-SAME:      slab_rows = true
// CHECK:         gpu.func @group_norm_nchw_0_main_scalar(
// CHECK:         gpu.func @group_norm_nchw_0_final(

// The host: N x G = 8 slabs of C/G x H x W = 2 x 16 elements; the final
// kernel's P = N = 2 partial rows of G x C/G = 8 columns.
// LAUNCH-LABEL: func.func @group_norm_nchw
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nchw_0_main_scalar blocks in (%c8, %c1, %c1) threads in (%c512, %c1, %c1) {{.*}} %c8_i64 : i64, %c32_i64 : i64,
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nchw_0_final blocks in (%c1, %c1, %c1) {{.*}} %c2_i64 : i64, %c8_i64 : i64)
func.func @group_norm_nchw(%dy: tensor<2x8x4x4xbf16>, %x: tensor<2x8x4x4xbf16>, %mean: tensor<2x4xf32>, %rstd: tensor<2x4xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<8xf32>) bias(%b : tensor<8xf32>) {groups = 4 : i64} : tensor<2x8x4x4xbf16>, tensor<2x4xf32> -> tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>
  return %dx, %dw, %db : tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Channels last, N and the spatial dims at run time: the slabs and their
// elements come from the tensors' dims.
// CHECK-LABEL: func.func @group_norm_nhwc_dynamic
// CHECK:         slab_rows = true
// CHECK:         gpu.func @group_norm_nhwc_dynamic_0_main_scalar(
// LAUNCH-LABEL: func.func @group_norm_nhwc_dynamic
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nhwc_dynamic_0_main_scalar
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nhwc_dynamic_0_final
func.func @group_norm_nhwc_dynamic(%dy: tensor<?x4x?x8xbf16>, %x: tensor<?x4x?x8xbf16>, %mean: tensor<?x4xf32>, %rstd: tensor<?x4xf32>, %w: tensor<8xbf16>, %b: tensor<8xbf16>) -> (tensor<?x4x?x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<8xbf16>) bias(%b : tensor<8xbf16>) {groups = 4 : i64, channels_last} : tensor<?x4x?x8xbf16>, tensor<?x4xf32> -> tensor<?x4x?x8xbf16>, tensor<8xbf16>, tensor<8xbf16>
  return %dx, %dw, %db : tensor<?x4x?x8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}
