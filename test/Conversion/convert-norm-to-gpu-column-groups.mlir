// RUN: norm-opt %s --convert-norm-to-gpu="max-cluster-ctas=1 latency-ctas=0" | FileCheck %s
// RUN: norm-opt %s --convert-norm-to-gpu="max-cluster-ctas=1 remarks=true latency-ctas=0" -verify-diagnostics -o /dev/null
// RUN: norm-opt %s --convert-norm-to-gpu="remarks=true latency-ctas=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLREMARK
// RUN: norm-opt %s --convert-norm-to-gpu=latency-ctas=0 | FileCheck %s --check-prefix=CLUSTER8
// RUN: norm-opt %s --convert-norm-to-gpu="chip=sm_80 latency-ctas=0" | FileCheck %s --check-prefix=SM80

// With clusters (sm_90+, the default): these rows are too long for the
// looped kernel's bulk ring (two stages of a whole row do not fit beside
// the accumulators), so a cluster of 8 CTAs of 128 lanes shares each row,
// each CTA keeping 4096 columns in registers (two CTAs per SM), with a
// cp.async ring of 3 rows and the row sums a row ahead (LayerNorm's two
// sums; perf-notes, "Cluster rows"); sm_80: looped.
// CLREMARK: remark: GPU kernels layer_wide_0: resident, 128 lanes per row, 1 rows per CTA, vector 8, chunks per lane 4, clusters of 8 CTAs per row, cp.async ring of 3 rows, row sums a row ahead
// CLUSTER8: norm.gpu = #norm.kernel_plan<kernel = "layer_wide_0", vector = 8,
// CLUSTER8-SAME:  threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 4,
// CLUSTER8-SAME:  async_stages = 3, column_groups = 0,
// CLUSTER8-SAME:  cluster_ctas = 8,
// CLUSTER8-SAME:  cluster_sums_ahead = true
// CLUSTER8:     gpu.func @layer_wide_0_main(
// CLUSTER8-SAME:  nvvm.cluster_dim = array<i32: 8, 1, 1>
// SM80:         norm.gpu = #norm.kernel_plan<kernel = "layer_wide_0", vector = 8,
// SM80-SAME:      threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0,
// SM80-SAME:      column_groups = 2,

// LayerNorm backward, bf16, N = 32768, as --norm-fuse-mixed-reductions
// leaves it, without clusters (max-cluster-ctas=1; the looped variant is
// also what sm_80 and a run-time N get): too long for registers, and its two column
// sums (dW, dB: 2 x 32768 x 4 bytes = 256 KiB) do not fit one CTA's shared
// memory. Two CTAs share each row (column groups): both read the whole row
// for the row sums, each owns half of the columns for dx and the column
// sums, so each keeps 128 KiB of accumulators in shared memory instead of
// read-modify-writing a global partial row for every row.

// CHECK-LABEL: func.func @layer_wide
// The plan: looped (no chunks per lane), 2 CTAs per row with 128 KiB of
// accumulators each; the split kernels with 4 CTAs per row and 64 KiB.
// CHECK:         norm.gpu = #norm.kernel_plan<kernel = "layer_wide_0", vector = 8,
// CHECK-SAME:      threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0,
// CHECK-SAME:      single_launch = false, async_stages = 0, column_groups = 2,
// CHECK-SAME:      split_column_groups = 4, split_shared_bytes = 65536,
// CHECK-SAME:      dynamic_shared_bytes = 131072, dependent_launch = true,
// CHECK-SAME:      shared_accumulators = true>
// CHECK:       gpu.func @layer_wide_0_main(
// CHECK:         %[[BLOCK:.*]] = arith.index_castui %{{.*}} : index to i64
// CHECK:         %[[PROG:.*]] = arith.addi %{{.*}}, %{{.*}} : i64
// CHECK:         %[[CHUNKS:.*]] = arith.divui %c32768_i64, %c8_i64 : i64
// The row group of this CTA, the row groups, and the CTA's half of the
// 4096 chunks of a row.
// CHECK:         %[[ROWPROG:.*]] = arith.divui %[[PROG]], %c2_i64 : i64
// CHECK:         %[[ROWPROGS:.*]] = arith.divui %{{.*}}, %c2_i64 : i64
// CHECK:         %[[PART:.*]] = arith.ceildivui %[[CHUNKS]], %c2_i64 : i64
// CHECK:         arith.remui %[[PROG]], %c2_i64 : i64
// CHECK:         %[[ITERS:.*]] = arith.ceildivui %{{.*}}, %[[ROWPROGS]] : i64
// Zero the part's accumulators in shared memory.
// CHECK:         %[[PARTLOOP:.*]] = arith.ceildivui %[[PART]], %c512_i64{{.*}} : i64
// CHECK:         scf.for %{{.*}} = %c0_i64 to %[[PARTLOOP]]
// CHECK-COUNT-16:  memref.store %{{.*}}, %view
// The row loop over this CTA's rows; the row sums walk the whole row.
// CHECK:         scf.for %{{.*}} = %c0_i64 to %[[ITERS]]
// CHECK:           arith.muli %{{.*}}, %[[ROWPROGS]] : i64
// CHECK:           scf.for {{.*}} -> (f32, f32)
// dx and the column sums: the part only, into shared memory.
// CHECK:           scf.for %{{.*}} = %c0_i64 to %[[PARTLOOP]]
// CHECK:             llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK:             memref.load %view
// CHECK:             memref.store %{{.*}}, %view
// Then each lane copies its part's columns to row `row group` of the
// partial buffer.
// CHECK:         scf.for %{{.*}} = %c0_i64 to %[[PARTLOOP]]
// CHECK:           memref.load %view
// CHECK:           llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xf32>, !llvm.ptr<1>
// CHECK:         gpu.return
// The same with 4 CTAs per row, for few rows (the launcher picks it when
// rows x 4 <= SMs): 32 KiB of accumulators each.
// CHECK:       gpu.func @layer_wide_0_main_split(
// CHECK:         %[[SPROG:.*]] = arith.addi %{{.*}}, %{{.*}} : i64
// CHECK:         %[[SGRID:.*]] = arith.muli %{{.*}}, %c1_i64{{.*}} : i64
// CHECK:         arith.divui %[[SPROG]], %c4_i64 : i64
// CHECK:         arith.divui %[[SGRID]], %c4_i64 : i64
// CHECK-NOT:     llvm.atomicrmw
// CHECK:       gpu.func @layer_wide_0_main_split_scalar(
// The final kernel sums dW's and dB's partial rows in the same loops: a
// group's 16 loads (8 per column result) in flight before any addition,
// then each column's 8 additions in program order; the rest one program
// (both columns) per iteration.
// CHECK:       gpu.func @layer_wide_0_final(
// CHECK:         nvvm.griddepcontrol wait
// CHECK:         scf.for {{.*}} iter_args(%[[DW:.*]] = %{{.*}}, %[[DB:.*]] = %{{.*}}) -> (f32, f32)
// CHECK-COUNT-16:  llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK-NOT:       llvm.load
// CHECK:           arith.addf %[[DW]], %{{.*}} : f32
// CHECK-COUNT-7:   arith.addf
// CHECK-NEXT:      arith.addf %[[DB]], %{{.*}} : f32
// CHECK:         scf.for {{.*}} -> (f32, f32)
// CHECK-COUNT-2:   llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK-NOT:       llvm.load
// CHECK:           arith.addf
// CHECK-NEXT:      arith.addf

#map = affine_map<(d0) -> (d0)>
module {
  func.func @layer_wide(%arg0: tensor<?x32768xbf16>, %arg1: tensor<?x32768xbf16>, %arg2: tensor<?xf32>, %arg3: tensor<?xf32>, %arg4: tensor<32768xbf16>, %arg5: tensor<32768xbf16>) -> (tensor<?x32768xbf16>, tensor<32768xbf16>, tensor<32768xbf16>) {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 3.276800e+04 : f32
    %0 = tensor.empty() : tensor<32768xf32>
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<32768xf32>) -> tensor<32768xf32>
    %2 = tensor.empty() : tensor<32768xbf16>
    // expected-remark @below {{GPU kernels layer_wide_0: looped, 512 lanes per row, 1 rows per CTA, vector 8, chunks per lane 0, 2 CTAs per row (column groups), shared-memory accumulators}}
    %full_results, %col_results:2 = norm.mixed_reduction full(%arg1, %arg0 : tensor<?x32768xbf16>, tensor<?x32768xbf16>) row(%arg2, %arg3 : tensor<?xf32>, tensor<?xf32>) col(%arg4 : tensor<32768xbf16>) col_init(%1, %1 : tensor<32768xf32>, tensor<32768xf32>) row_stages {
    ^bb0(%arg6: bf16, %arg7: bf16, %arg8: f32, %arg9: f32, %arg10: bf16):
      %5 = arith.extf %arg6 : bf16 to f32
      %6 = arith.subf %5, %arg8 : f32
      %7 = arith.mulf %6, %arg9 : f32
      %8 = arith.extf %arg7 : bf16 to f32
      %9 = arith.extf %arg10 : bf16 to f32
      %10 = arith.mulf %8, %9 : f32
      %11 = arith.mulf %7, %10 : f32
      norm.yield %11, %10 : f32, f32
    } elementwise {
    ^bb0(%arg6: bf16, %arg7: bf16, %arg8: f32, %arg9: f32, %arg10: bf16, %arg11: f32, %arg12: f32):
      %5 = arith.extf %arg6 : bf16 to f32
      %6 = arith.subf %5, %arg8 : f32
      %7 = arith.mulf %6, %arg9 : f32
      %8 = arith.extf %arg7 : bf16 to f32
      %9 = arith.extf %arg10 : bf16 to f32
      %10 = arith.mulf %8, %9 : f32
      %11 = arith.divf %arg11, %cst_0 : f32
      %12 = arith.mulf %7, %11 : f32
      %13 = arith.divf %arg12, %cst_0 : f32
      %14 = arith.addf %12, %13 : f32
      %15 = arith.subf %10, %14 : f32
      %16 = arith.mulf %15, %arg9 : f32
      %17 = arith.truncf %16 : f32 to bf16
      norm.yield %17 : bf16
    } columns {
    ^bb0(%arg6: bf16, %arg7: bf16, %arg8: f32, %arg9: f32, %arg10: bf16, %arg11: f32, %arg12: f32):
      %5 = arith.extf %arg7 : bf16 to f32
      %6 = arith.extf %arg6 : bf16 to f32
      %7 = arith.subf %6, %arg8 : f32
      %8 = arith.mulf %7, %arg9 : f32
      %9 = arith.mulf %5, %8 : f32
      norm.yield %9, %5 : f32, f32
    } -> full(tensor<?x32768xbf16>) col(tensor<32768xf32>, tensor<32768xf32>)
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%col_results#0 : tensor<32768xf32>) outs(%2 : tensor<32768xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %5 = arith.truncf %in : f32 to bf16
      linalg.yield %5 : bf16
    } -> tensor<32768xbf16>
    %4 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%col_results#1 : tensor<32768xf32>) outs(%2 : tensor<32768xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %5 = arith.truncf %in : f32 to bf16
      linalg.yield %5 : bf16
    } -> tensor<32768xbf16>
    return %full_results, %3, %4 : tensor<?x32768xbf16>, tensor<32768xbf16>, tensor<32768xbf16>
  }
}

