// RUN: norm-opt %s --convert-norm-to-gpu="tier-min-cols=2048" | FileCheck %s
// RUN: norm-opt %s --convert-norm-to-gpu="tier-min-cols=2048 peel-rows=false" | FileCheck %s --check-prefix=NOPEEL
// RUN: norm-opt %s --convert-norm-to-gpu="tier-min-cols=0" | FileCheck %s --check-prefix=NOTIERS
// RUN: norm-opt %s --convert-norm-to-gpu="tier-min-cols=2048 remarks=true" -verify-diagnostics -o /dev/null
// RUN: not norm-opt %s --convert-norm-to-gpu="tier-min-cols=100" 2>&1 | FileCheck %s --check-prefix=BADMIN

// RMSNorm backward, bf16, N known only at run time, as
// --norm-fuse-mixed-reductions leaves it. The plan's own kernels are the
// looped ones (any N); for N up to the longest row the resident variant
// holds (8192 here) the plan also has resident tiers: the plans for a
// static N of 2048, 3072, 4096, 6144 and 8192 (from tier-min-cols = 2048,
// in steps of x1.5 and x4/3), each with its own vector and scalar kernel
// that take any N <= the tier's at run time.

// CHECK-LABEL: func.func @rms_bf16_dyn
// CHECK:         norm.gpu = #norm.kernel_plan<kernel = "rms_bf16_dyn_0", vector = 8,
// CHECK-SAME:      threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0,
// CHECK-SAME:      final_threads = 512, dynamic_shared_bytes = 0, dependent_launch = true, tiers = [
// CHECK-SAME:      #norm.resident_tier<cols = 2048, vector = 8, threads_per_row = 64, rows_per_cta = 4, chunks_per_thread = 4, block = 256, combine_in_cta = true, single_launch = true, async_stages = 3, final_threads = 256, dynamic_shared_bytes = 131072, peel = true, async_ring_offset = 32768, ring_row_inputs = true>,
// CHECK-SAME:      #norm.resident_tier<cols = 3072, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 3, block = 128,
// CHECK-SAME:      #norm.resident_tier<cols = 4096, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 4,
// CHECK-SAME:      #norm.resident_tier<cols = 6144, vector = 8, threads_per_row = 256, rows_per_cta = 1, chunks_per_thread = 3, block = 256, combine_in_cta = false, single_launch = true, async_stages = 3, final_threads = 256, dynamic_shared_bytes = 73728, peel = true, ring_row_inputs = true>,
// CHECK-SAME:      #norm.resident_tier<cols = 8192, vector = 8, threads_per_row = 256, rows_per_cta = 1, chunks_per_thread = 4,
// CHECK-SAME:      ]>

// The looped kernels, then each tier's pair.
// CHECK:       gpu.func @rms_bf16_dyn_0_main(
// CHECK:       gpu.func @rms_bf16_dyn_0_main_scalar(
// A tier's kernel reads N at run time (`cols`, the 8th parameter): chunks
// = cols / 8. Chunk k of a lane is column (k x 64 + lane) x 8, not clamped
// into the row: a chunk past the row loads nothing (zeros instead).
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier2048_main(%{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: i64, %[[COLS:[a-z0-9]+]]: i64,
// NOPEEL-SAME:    known_block_size = array<i32: 256, 1, 1>
// NOPEEL:         %[[LANE:.*]] = arith.remui %{{.*}}, %c64_i64 : i64
// NOPEEL:         %[[CHUNKS:.*]] = arith.divui %[[COLS]], %c8_i64 : i64
// NOPEEL:         %[[C:.*]] = arith.addi %{{.*}}, %[[LANE]] : i64
// NOPEEL-NEXT:    %[[VALID:.*]] = arith.cmpi ult, %[[C]], %[[CHUNKS]] : i64
// NOPEEL-NOT:     arith.minui
// NOPEEL:         %[[COL:.*]] = arith.muli %[[C]], %c8_i64{{.*}} : i64
// NOPEEL-NEXT:    scf.if %[[VALID]] -> (vector<8xbf16>) {
// NOPEEL-NEXT:      llvm.getelementptr %{{.*}}[%[[COL]]]
// NOPEEL-NEXT:      llvm.load {{.*}} -> vector<8xbf16>
// NOPEEL:         } else {
// NOPEEL-NEXT:      arith.constant dense<0.000000e+00> : vector<8xbf16>
// The CTA-combined partials: the shared accumulators are strided by the
// run-time N (sized for 2048 columns).
// NOPEEL:         gpu.barrier
// NOPEEL:         arith.muli %c1_i64{{.*}}, %[[COLS]] : i64
// NOPEEL:         arith.divui %{{.*}}, %[[COLS]] : i64
// NOPEEL:         arith.remui %{{.*}}, %[[COLS]] : i64
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier2048_main_scalar(
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier3072_main(
// NOPEEL-SAME:    known_block_size = array<i32: 128, 1, 1>
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier3072_main_scalar(
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier4096_main(
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier4096_main_scalar(
// The cp.async ring of a tier copies only the chunks inside the row; its
// rows of 256 lanes carry the row input (rstd) in the ring too: lane 0 of
// each warp copies its 4 bytes (ring_row_inputs).
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier6144_main(
// NOPEEL:         scf.if %{{[a-z0-9_]+}} {
// NOPEEL-NEXT:      llvm.getelementptr
// NOPEEL:           nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 4, cache =  ca
// NOPEEL:         scf.if %{{[a-z0-9_]+}} {
// NOPEEL-NEXT:      nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg
// In the row loop the rstd is no loop-carried value (24 accumulators, no
// 25th): the warp syncs before lane 0 refills the stage its lanes read last
// row, and after the wait for this row's group, then reads it back.
// NOPEEL:         scf.for {{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)  : i64 {
// NOPEEL:           nvvm.bar.warp.sync
// NOPEEL:           nvvm.cp.async.wait.group 2
// NOPEEL:           nvvm.bar.warp.sync
// NOPEEL:           llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier6144_main_scalar(
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier8192_main(
// NOPEEL:       gpu.func @rms_bf16_dyn_0_tier8192_main_scalar(
// One final kernel per block among the plans (the two-launch path sums in
// the order of the single-launch tail of the same block).
// NOPEEL:       gpu.func @rms_bf16_dyn_0_final(
// NOPEEL-SAME:    known_block_size = array<i32: 512, 1, 1>
// NOPEEL:       gpu.func @rms_bf16_dyn_0_final_256(
// NOPEEL-SAME:    known_block_size = array<i32: 256, 1, 1>
// NOPEEL:       gpu.func @rms_bf16_dyn_0_final_128(
// NOPEEL-SAME:    known_block_size = array<i32: 128, 1, 1>
// NOPEEL-NOT:   gpu.func

// Without tiers: the looped kernels and one final kernel.
// NOTIERS-LABEL: func.func @rms_bf16_dyn
// NOTIERS:         norm.gpu = #norm.kernel_plan<kernel = "rms_bf16_dyn_0",
// NOTIERS-SAME:      dynamic_shared_bytes = 0, dependent_launch = true>
// NOTIERS:       gpu.func @rms_bf16_dyn_0_main(
// NOTIERS:       gpu.func @rms_bf16_dyn_0_main_scalar(
// NOTIERS:       gpu.func @rms_bf16_dyn_0_final(
// NOTIERS-NOT:   gpu.func

// BADMIN: error: invalid GPU option 'tier-min-cols=100': expected 0 (no resident tiers for a run-time N) or a power of two in [16, 65536]

#map = affine_map<(d0) -> (d0)>
// Peeled rows (the default; the tier's `_main_peel` kernel, beside the
// `_main` one of aligned rows above): a program's rows share one phase, its last
// row's (%[[LAST]]: masked rows load it too). Its lanes take the head's
// columns [0, head) with head = (8 - last x stride % 8) % 8, then whole
// chunks of 8 from column head on, chunks = (cols - head) / 8, then the
// tail's columns (one per lane).
// CHECK:       gpu.func @rms_bf16_dyn_0_tier2048_main(
// CHECK:       gpu.func @rms_bf16_dyn_0_tier2048_main_peel(%{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %[[ROWS:[a-z0-9]+]]: i64, %[[COLS:[a-z0-9]+]]: i64, %[[STRIDE:[a-z0-9]+]]: i64,
// CHECK:         %[[LANE:.*]] = arith.remui %{{.*}}, %c64_i64 : i64
// CHECK:         %[[HAS:.*]] = arith.cmpi ult, %[[PROG:.*]], %[[ROWS]] : i64
// CHECK:         %[[LAST:.*]] = arith.select %[[HAS]], %{{.*}}, %c0_i64 : i64
// CHECK:         %[[AT:.*]] = arith.muli %[[LAST]], %[[STRIDE]] : i64
// CHECK:         %[[PHASE:.*]] = arith.remui %[[AT]], %c8_i64{{.*}} : i64
// CHECK:         %[[UP:.*]] = arith.subi %c8_i64{{.*}}, %[[PHASE]] : i64
// CHECK:         %[[MOD:.*]] = arith.remui %[[UP]], %c8_i64{{.*}} : i64
// CHECK:         %[[HEAD:.*]] = arith.minui %[[MOD]], %[[COLS]] : i64
// CHECK:         %[[BODY:.*]] = arith.subi %[[COLS]], %[[HEAD]] : i64
// CHECK:         %[[CHUNKS:.*]] = arith.divui %[[BODY]], %c8_i64{{.*}} : i64
// CHECK:         %[[C:.*]] = arith.addi %{{.*}}, %[[LANE]] : i64
// CHECK:         %[[VALID:.*]] = arith.cmpi ult, %[[C]], %[[CHUNKS]] : i64
// CHECK:         %[[OFF:.*]] = arith.muli %[[C]], %c8_i64{{.*}} : i64
// CHECK:         %[[COL:.*]] = arith.addi %[[HEAD]], %[[OFF]] : i64
// The weight at the row's phase: one element at a time.
// CHECK:         scf.if %[[VALID]] -> (bf16) {
// CHECK-NEXT:      llvm.getelementptr %{{.*}}[%[[COL]]]
// CHECK-NEXT:      llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<1> -> bf16
// The head's column of the lane, then the tail's.
// CHECK:         %[[INHEAD:.*]] = arith.cmpi ult, %[[LANE]], %[[HEAD]] : i64
// CHECK:         %[[TAIL:.*]] = arith.addi %{{.*}}, %[[LANE]] : i64
// CHECK:         %[[INTAIL:.*]] = arith.cmpi ult, %[[TAIL]], %[[COLS]] : i64
// The whole chunks: 16-byte copies from row x stride + head + 8 x c into
// the tier's cp.async ring (rows of 64 lanes, four to a CTA).
// CHECK:         nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg
// The partial rows (N floats each): one element at a time.
// CHECK:         llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
// CHECK-NOT:     llvm.store %{{.*}} : vector<8xf32>
// CHECK:       gpu.func @rms_bf16_dyn_0_tier2048_main_scalar(
func.func @rms_bf16_dyn(%arg0: tensor<?x?xbf16>, %arg1: tensor<?x?xbf16>, %arg2: tensor<?xf32>, %arg3: tensor<?xbf16>) -> (tensor<?x?xbf16>, tensor<?xbf16>) {
  %cst = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %dim = tensor.dim %arg1, %c1 : tensor<?x?xbf16>
  %0 = arith.index_cast %dim : index to i64
  %1 = arith.uitofp %0 : i64 to f32
  %2 = tensor.empty(%dim) : tensor<?xf32>
  %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<?xf32>) -> tensor<?xf32>
  // expected-remark @+6 {{GPU kernels rms_bf16_dyn_0: looped, 512 lanes per row, 1 rows per CTA, vector 8, chunks per lane 0, dependent final launch, ~64 registers, CTAs per SM: occupancy; a run-time N up to 8192 takes the smallest of 5 resident tiers that holds it}}
  // expected-remark @+5 {{GPU kernels rms_bf16_dyn_0_tier2048: resident tier, N <= 2048 at run time, 64 lanes per row, 4 rows per CTA, vector 8, chunks per lane 4, peeled rows (scalar head and tail), CTA-combined partials, cp.async ring of 3 rows, single launch}}
  // expected-remark @+4 {{GPU kernels rms_bf16_dyn_0_tier3072: resident tier, N <= 3072 at run time, 128 lanes per row, 1 rows per CTA, vector 8, chunks per lane 3, prefetch, peeled rows (scalar head and tail), single launch}}
  // expected-remark @+3 {{GPU kernels rms_bf16_dyn_0_tier4096: resident tier, N <= 4096 at run time, 128 lanes per row}}
  // expected-remark @+2 {{GPU kernels rms_bf16_dyn_0_tier6144: resident tier, N <= 6144 at run time, 256 lanes per row, 1 rows per CTA, vector 8, chunks per lane 3, peeled rows (scalar head and tail), cp.async ring of 3 rows, single launch}}
  // expected-remark @+1 {{GPU kernels rms_bf16_dyn_0_tier8192: resident tier, N <= 8192 at run time, 256 lanes per row}}
  %full_results, %col_results = norm.mixed_reduction full(%arg1, %arg0 : tensor<?x?xbf16>, tensor<?x?xbf16>) row(%arg2 : tensor<?xf32>) col(%arg3 : tensor<?xbf16>) col_init(%3 : tensor<?xf32>) row_stages {
  ^bb0(%arg4: bf16, %arg5: bf16, %arg6: f32, %arg7: bf16):
    %6 = arith.extf %arg4 : bf16 to f32
    %7 = arith.mulf %6, %arg6 : f32
    %8 = arith.extf %arg5 : bf16 to f32
    %9 = arith.extf %arg7 : bf16 to f32
    %10 = arith.mulf %8, %9 : f32
    %11 = arith.mulf %7, %10 : f32
    norm.yield %11 : f32
  } elementwise {
  ^bb0(%arg4: bf16, %arg5: bf16, %arg6: f32, %arg7: bf16, %arg8: f32):
    %6 = arith.extf %arg4 : bf16 to f32
    %7 = arith.mulf %6, %arg6 : f32
    %8 = arith.extf %arg5 : bf16 to f32
    %9 = arith.extf %arg7 : bf16 to f32
    %10 = arith.mulf %8, %9 : f32
    %11 = arith.divf %arg8, %1 : f32
    %12 = arith.mulf %7, %11 : f32
    %13 = arith.subf %10, %12 : f32
    %14 = arith.mulf %13, %arg6 : f32
    %15 = arith.truncf %14 : f32 to bf16
    norm.yield %15 : bf16
  } columns {
  ^bb0(%arg4: bf16, %arg5: bf16, %arg6: f32, %arg7: bf16, %arg8: f32):
    %6 = arith.extf %arg5 : bf16 to f32
    %7 = arith.extf %arg4 : bf16 to f32
    %8 = arith.mulf %7, %arg6 : f32
    %9 = arith.mulf %6, %8 : f32
    norm.yield %9 : f32
  } -> full(tensor<?x?xbf16>) col(tensor<?xf32>)
  %4 = tensor.empty(%dim) : tensor<?xbf16>
  %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%col_results : tensor<?xf32>) outs(%4 : tensor<?xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %6 = arith.truncf %in : f32 to bf16
    linalg.yield %6 : bf16
  } -> tensor<?xbf16>
  return %full_results, %5 : tensor<?x?xbf16>, tensor<?xbf16>
}
