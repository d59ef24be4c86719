// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions=multi-axis=gpu --convert-norm-to-gpu | FileCheck %s
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions=multi-axis=gpu --convert-norm-to-gpu=remarks=true -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: norm-opt %s -split-input-file --norm-lower-to-nvvm=slab-split-min-bytes=0 --convert-norm-to-gpu-launch -canonicalize | FileCheck %s --check-prefix=LAUNCH
// RUN: norm-opt %s -split-input-file --norm-lower-to-nvvm --convert-norm-to-gpu-launch -canonicalize | FileCheck %s --check-prefix=MINBYTES
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions=multi-axis=gpu --convert-norm-to-gpu=max-cluster-ctas=1 | FileCheck %s --check-prefix=NOSPLIT
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions=multi-axis=gpu --convert-norm-to-gpu | norm-opt -split-input-file | FileCheck %s --check-prefix=REPARSE
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions=multi-axis=gpu --convert-norm-to-gpu=slab-run-bytes=8 | FileCheck %s --check-prefix=RUNBYTES

// GroupNorm (issue 42): its multi-axis group is a slab domain
// ([N, G, C/G, HW], or [N, HW, G, C/G] channels last), and runs the slab
// kernel: a CTA per (n, g) slab, the row sums reduced in the CTA, the
// column sums per channel into one partial row per sample, then the final
// kernel over the G x C/G column slots of the N partial rows.

// REMARK: remark: GPU kernels group_norm_nchw_0: GroupNorm slabs: a CTA of 512 threads per slab, column sums per channel in the CTA, split kernels of 2 CTAs (a cluster) per slab for few slabs
// REMARK: remark: GPU kernels group_norm_nhwc_dynamic_0: GroupNorm slabs
// CHECK-LABEL: func.func @group_norm_nchw
// CHECK:         norm.gpu = #norm.kernel_plan<kernel = "group_norm_nchw_0"
// CHECK-SAME:      split_column_groups = 2
// CHECK-SAME:      slab_rows = true, split_min_bytes = 32768>
// CHECK:         gpu.func @group_norm_nchw_0_main_scalar(
// CHECK-NOT:       nvvm.cluster
// CHECK:         gpu.return

// The split kernels (few slabs): a cluster of Q = 2 CTAs per slab, CTA q
// takes part q of the spatial extent; the CTA's row sums go to its shared
// slots, and after the cluster barrier every CTA adds the Q slots in rank
// order through distributed shared memory; it leaves after a second
// cluster barrier (its arrive a release, after its remote loads), when
// its peers have read its slots.
// CHECK:         gpu.func @group_norm_nchw_0_main_split_scalar({{.*}} nvvm.cluster_dim = array<i32: 2, 1, 1>
// CHECK:           llvm.mlir.addressof @group_norm_nchw_0_main_split_scalar_cluster_sums
// CHECK:           nvvm.cluster.arrive {aligned}
// CHECK-NEXT:      nvvm.cluster.wait {aligned}
// CHECK:           nvvm.mapa {{.*}}, %c0_i32
// CHECK:           nvvm.mapa {{.*}}, %c1_i32
// CHECK:           nvvm.cluster.arrive {aligned}
// CHECK:           nvvm.cluster.wait {aligned}
// CHECK-NEXT:      gpu.return
// CHECK:         gpu.func @group_norm_nchw_0_final(

// The host: N x G = 8 slabs of C/G x H x W = 2 x 16 elements; at most
// half as many slabs as SMs take the split kernels (grid 2 x 8), and the
// final kernel's P = N x 2 = 4 (else N = 2) partial rows of G x C/G = 8
// columns. (slab-split-min-bytes=0 here: by default a split CTA must walk
// 32 KiB of each input, and these 64-byte slabs never split, MINBYTES.)
// LAUNCH-LABEL: func.func @group_norm_nchw
// LAUNCH:         %[[SMS:.*]] = call @normrt_ir_sm_count()
// LAUNCH:         %[[FEW:.*]] = arith.cmpi sge, %[[SMS]], %c16_i64
// LAUNCH:         %[[P:.*]] = arith.select %[[FEW]], %c4_i64, %c2_i64
// LAUNCH:         %[[GRID:.*]] = arith.select %[[FEW]], %c16_i64, %c8_i64
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nchw_0_main_scalar blocks in (%{{.*}}, %c1, %c1) threads in (%c512, %c1, %c1) {{.*}} %c8_i64 : i64, %c32_i64 : i64,
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nchw_0_main_split_scalar blocks in (%{{.*}}, %c1, %c1) threads in (%c512, %c1, %c1)
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nchw_0_final blocks in (%c1, %c1, %c1) {{.*}} %[[P]] : i64, %c8_i64 : i64)

// By default the split needs 2 x 32 KiB a slab (Q = 2 CTAs of 32 KiB of
// each input): these slabs of 64 bytes take a CTA each, P = N = 2.
// MINBYTES-LABEL: func.func @group_norm_nchw
// MINBYTES-NOT:     arith.select
// MINBYTES:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nchw_0_final blocks in (%c1, %c1, %c1) {{.*}} %c2_i64 : i64, %c8_i64 : i64)

// max-cluster-ctas=1: no split kernels.
// NOSPLIT-LABEL: func.func @group_norm_nchw
// NOSPLIT:         split_column_groups = 0,
// NOSPLIT:         gpu.func @group_norm_nchw_0_main_scalar(
// NOSPLIT-NOT:     _main_split
func.func @group_norm_nchw(%dy: tensor<2x8x4x4xbf16>, %x: tensor<2x8x4x4xbf16>, %mean: tensor<2x4xf32>, %rstd: tensor<2x4xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<8xf32>) bias(%b : tensor<8xf32>) {groups = 4 : i64} : tensor<2x8x4x4xbf16>, tensor<2x4xf32> -> tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>
  return %dx, %dw, %db : tensor<2x8x4x4xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Channels last, N and the spatial dims at run time: the slabs and their
// elements come from the tensors' dims. Runs of C/G = 2 bf16 (4 bytes):
// a CTA takes all 4 groups of a sample (16 bytes, no 128), a thread 2
// channels of one group; clusters of 8 CTAs for few units.
// CHECK-LABEL: func.func @group_norm_nhwc_dynamic
// CHECK:         split_column_groups = 8
// CHECK-SAME:    slab_rows = true, slab_groups = 4
// With slab-run-bytes=8, runs of 8 bytes: 2 groups a CTA.
// RUNBYTES-LABEL: func.func @group_norm_nhwc_dynamic
// RUNBYTES:         slab_rows = true, slab_groups = 2
// CHECK:         gpu.func @group_norm_nhwc_dynamic_0_main_scalar(
// With N and the spatial dims at run time the byte rule is the
// launcher's: a unit's K = 4 slabs of `cols` bf16 elements (8 bytes a
// slab element) split into Q = 8 parts of at least 32 KiB each.
// MINBYTES-LABEL: func.func @group_norm_nhwc_dynamic
// MINBYTES:         %[[UNIT:.*]] = arith.muli %{{.*}}, %c8_i64 : i64
// MINBYTES:         %[[FEW:.*]] = arith.cmpi sle, %{{.*}}, %{{.*}} : i64
// MINBYTES:         %[[BIG:.*]] = arith.cmpi sge, %[[UNIT]], %c262144_i64 : i64
// MINBYTES:         arith.andi %[[FEW]], %[[BIG]] : i1
// LAUNCH-LABEL: func.func @group_norm_nhwc_dynamic
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nhwc_dynamic_0_main_scalar
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nhwc_dynamic_0_final
func.func @group_norm_nhwc_dynamic(%dy: tensor<?x4x?x8xbf16>, %x: tensor<?x4x?x8xbf16>, %mean: tensor<?x4xf32>, %rstd: tensor<?x4xf32>, %w: tensor<8xbf16>, %b: tensor<8xbf16>) -> (tensor<?x4x?x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<8xbf16>) bias(%b : tensor<8xbf16>) {groups = 4 : i64, channels_last} : tensor<?x4x?x8xbf16>, tensor<?x4xf32> -> tensor<?x4x?x8xbf16>, tensor<8xbf16>, tensor<8xbf16>
  return %dx, %dw, %db : tensor<?x4x?x8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}

// -----

// Channels last with H and W both at run time: the slab kernel knows only
// their product (a channel's elements), and the mean's element count
// H * W * C/G is that product times C/G, not a size of its own.
// CHECK-LABEL: func.func @group_norm_nhwc_two_dynamic
// CHECK:         slab_rows = true
// CHECK:         gpu.func @group_norm_nhwc_two_dynamic_0_main_scalar(
// LAUNCH-LABEL: func.func @group_norm_nhwc_two_dynamic
// LAUNCH:         gpu.launch_func {{.*}} @norm_kernels::@group_norm_nhwc_two_dynamic_0_main_scalar
func.func @group_norm_nhwc_two_dynamic(%dy: tensor<?x?x?x8xbf16>, %x: tensor<?x?x?x8xbf16>, %mean: tensor<?x4xf32>, %rstd: tensor<?x4xf32>, %w: tensor<8xbf16>, %b: tensor<8xbf16>) -> (tensor<?x?x?x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<8xbf16>) bias(%b : tensor<8xbf16>) {groups = 4 : i64, channels_last} : tensor<?x?x?x8xbf16>, tensor<?x4xf32> -> tensor<?x?x?x8xbf16>, tensor<8xbf16>, tensor<8xbf16>
  return %dx, %dw, %db : tensor<?x?x?x8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}

// -----

// A front end's spelling (test/gpu/gpu_multi_random_check.py's prog_2 of
// seed 1): the count H * C/G * W is built from tensor.dim of x as stored,
// [N, H, W, C], which the op reads through an expand_shape to the domain
// [N, H, W, G, C/G]: each stored dim is the product of its domain dims.
// CHECK-LABEL: func.func @prog_2
// CHECK:         slab_rows = true
// CHECK:         gpu.func @prog_2_0_main_scalar(
// LAUNCH-LABEL: func.func @prog_2
func.func @prog_2(%w: tensor<6xbf16>, %mean: tensor<?x2xf32>, %x: tensor<?x?x?x6xbf16>, %dy: tensor<?x?x?x6xbf16>, %rstd: tensor<?x2xf32>) -> (tensor<?x?x?x6xbf16>, tensor<6xbf16>) {
  %c1 = arith.constant 0 : index
  %dim2 = tensor.dim %x, %c1 : tensor<?x?x?x6xbf16>
  %c3 = arith.constant 1 : index
  %dim4 = tensor.dim %x, %c3 : tensor<?x?x?x6xbf16>
  %c5 = arith.constant 2 : index
  %dim6 = tensor.dim %x, %c5 : tensor<?x?x?x6xbf16>
  %zero7 = arith.constant 0.000000e+00 : f32
  %c9 = arith.constant 3 : index
  %m10 = arith.muli %c9, %dim4 : index
  %m11 = arith.muli %m10, %dim6 : index
  %ni12 = arith.index_cast %m11 : index to i64
  %nf8 = arith.uitofp %ni12 : i64 to f32
  %we13 = tensor.expand_shape %w [[0, 1]] output_shape [2, 3] : tensor<6xbf16> into tensor<2x3xbf16>
  %xe14 = tensor.expand_shape %x [[0], [1], [2], [3, 4]] output_shape [%dim2, %dim4, %dim6, 2, 3] : tensor<?x?x?x6xbf16> into tensor<?x?x?x2x3xbf16>
  %xe15 = tensor.expand_shape %dy [[0], [1], [2], [3, 4]] output_shape [%dim2, %dim4, %dim6, 2, 3] : tensor<?x?x?x6xbf16> into tensor<?x?x?x2x3xbf16>
  %e16 = tensor.empty() : tensor<2x3xf32>
  %z17 = linalg.fill ins(%zero7 : f32) outs(%e16 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %e18 = tensor.empty(%dim2, %dim4, %dim6) : tensor<?x?x?x2x3xf32>
  %g22 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%xe14 : tensor<?x?x?x2x3xbf16>) outs(%e18 : tensor<?x?x?x2x3xf32>) {
  ^bb0(%in19: bf16, %out20: f32):
    %v21 = arith.extf %in19 : bf16 to f32
    linalg.yield %v21 : f32
  } -> tensor<?x?x?x2x3xf32>
  %e23 = tensor.empty(%dim2, %dim4, %dim6) : tensor<?x?x?x2x3xf32>
  %g27 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%xe15 : tensor<?x?x?x2x3xbf16>) outs(%e23 : tensor<?x?x?x2x3xf32>) {
  ^bb0(%in24: bf16, %out25: f32):
    %v26 = arith.extf %in24 : bf16 to f32
    linalg.yield %v26 : f32
  } -> tensor<?x?x?x2x3xf32>
  %e28 = tensor.empty(%dim2, %dim4, %dim6) : tensor<?x?x?x2x3xf32>
  %g35 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%rstd, %mean, %g22 : tensor<?x2xf32>, tensor<?x2xf32>, tensor<?x?x?x2x3xf32>) outs(%e28 : tensor<?x?x?x2x3xf32>) {
  ^bb0(%in29: f32, %in30: f32, %in31: f32, %out32: f32):
    %v33 = arith.subf %in31, %in30 : f32
    %v34 = arith.mulf %v33, %in29 : f32
    linalg.yield %v34 : f32
  } -> tensor<?x?x?x2x3xf32>
  %e36 = tensor.empty() : tensor<2x3xf32>
  %g40 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%we13 : tensor<2x3xbf16>) outs(%e36 : tensor<2x3xf32>) {
  ^bb0(%in37: bf16, %out38: f32):
    %v39 = arith.extf %in37 : bf16 to f32
    linalg.yield %v39 : f32
  } -> tensor<2x3xf32>
  %e41 = tensor.empty(%dim2, %dim4, %dim6) : tensor<?x?x?x2x3xf32>
  %g46 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%g40, %g27 : tensor<2x3xf32>, tensor<?x?x?x2x3xf32>) outs(%e41 : tensor<?x?x?x2x3xf32>) {
  ^bb0(%in42: f32, %in43: f32, %out44: f32):
    %v45 = arith.mulf %in42, %in43 : f32
    linalg.yield %v45 : f32
  } -> tensor<?x?x?x2x3xf32>
  %e47 = tensor.empty(%dim2) : tensor<?x2xf32>
  %z48 = linalg.fill ins(%zero7 : f32) outs(%e47 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %e49 = tensor.empty(%dim2) : tensor<?x2xf32>
  %z50 = linalg.fill ins(%zero7 : f32) outs(%e49 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g58:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d3)>], iterator_types = ["parallel", "reduction", "reduction", "parallel", "reduction"]}
      ins(%g46, %g35 : tensor<?x?x?x2x3xf32>, tensor<?x?x?x2x3xf32>) outs(%z48, %z50 : tensor<?x2xf32>, tensor<?x2xf32>) {
  ^bb0(%in51: f32, %in52: f32, %out53: f32, %out54: f32):
    %v55 = arith.mulf %in52, %in51 : f32
    %v56 = arith.addf %out53, %v55 : f32
    %v57 = arith.addf %out54, %in51 : f32
    linalg.yield %v56, %v57 : f32, f32
  } -> (tensor<?x2xf32>, tensor<?x2xf32>)
  %e60 = tensor.empty(%dim2, %dim4, %dim6) : tensor<?x?x?x2x3xf32>
  %g73 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%g58#1, %g46, %g58#0, %rstd, %g35 : tensor<?x2xf32>, tensor<?x?x?x2x3xf32>, tensor<?x2xf32>, tensor<?x2xf32>, tensor<?x?x?x2x3xf32>) outs(%e60 : tensor<?x?x?x2x3xf32>) {
  ^bb0(%in61: f32, %in62: f32, %in63: f32, %in64: f32, %in65: f32, %out66: f32):
    %v67 = arith.divf %in63, %nf8 : f32
    %v68 = arith.mulf %in65, %v67 : f32
    %v69 = arith.divf %in61, %nf8 : f32
    %v70 = arith.addf %v69, %v68 : f32
    %v71 = arith.subf %in62, %v70 : f32
    %v72 = arith.mulf %in64, %v71 : f32
    linalg.yield %v72 : f32
  } -> tensor<?x?x?x2x3xf32>
  %e74 = tensor.empty(%dim2, %dim4, %dim6) : tensor<?x?x?x2x3xbf16>
  %g78 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%g73 : tensor<?x?x?x2x3xf32>) outs(%e74 : tensor<?x?x?x2x3xbf16>) {
  ^bb0(%in75: f32, %out76: bf16):
    %v77 = arith.truncf %in75 : f32 to bf16
    linalg.yield %v77 : bf16
  } -> tensor<?x?x?x2x3xbf16>
  %g82 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d3, d4)>], iterator_types = ["reduction", "reduction", "reduction", "parallel", "parallel"]}
      ins(%g27 : tensor<?x?x?x2x3xf32>) outs(%z17 : tensor<2x3xf32>) {
  ^bb0(%in79: f32, %out80: f32):
    %v81 = arith.addf %out80, %in79 : f32
    linalg.yield %v81 : f32
  } -> tensor<2x3xf32>
  %dxc83 = tensor.collapse_shape %g78 [[0], [1], [2], [3, 4]] : tensor<?x?x?x2x3xbf16> into tensor<?x?x?x6xbf16>
  %e84 = tensor.empty() : tensor<2x3xbf16>
  %g88 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g82 : tensor<2x3xf32>) outs(%e84 : tensor<2x3xbf16>) {
  ^bb0(%in85: f32, %out86: bf16):
    %v87 = arith.truncf %in85 : f32 to bf16
    linalg.yield %v87 : bf16
  } -> tensor<2x3xbf16>
  %dc89 = tensor.collapse_shape %g88 [[0, 1]] : tensor<2x3xbf16> into tensor<6xbf16>
  return %dxc83, %dc89 : tensor<?x?x?x6xbf16>, tensor<6xbf16>
}

// -----

// Ten channels a group (C = 320, G = 32, SD's UNet): the slab's CTA is its
// channels' warps, 320 threads, not a power of two. The printed plan parses
// again (its verifier takes a slab plan's whole warps).
// REMARK: remark: GPU kernels group_norm_320_0: GroupNorm slabs: a CTA of 320 threads per slab
// CHECK-LABEL: func.func @group_norm_320
// CHECK:         threads_per_row = 320, rows_per_cta = 1
// CHECK-SAME:      slab_rows = true
// REPARSE-LABEL: func.func @group_norm_320
// REPARSE:         threads_per_row = 320, rows_per_cta = 1
func.func @group_norm_320(%dy: tensor<2x320x8x8xbf16>, %x: tensor<2x320x8x8xbf16>, %mean: tensor<2x32xf32>, %rstd: tensor<2x32xf32>, %w: tensor<320xbf16>, %b: tensor<320xbf16>) -> (tensor<2x320x8x8xbf16>, tensor<320xbf16>, tensor<320xbf16>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<320xbf16>) bias(%b : tensor<320xbf16>) {groups = 32 : i64} : tensor<2x320x8x8xbf16>, tensor<2x32xf32> -> tensor<2x320x8x8xbf16>, tensor<320xbf16>, tensor<320xbf16>
  return %dx, %dw, %db : tensor<2x320x8x8xbf16>, tensor<320xbf16>, tensor<320xbf16>
}
