// RUN: norm-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// The kernel plan --convert-norm-to-gpu writes round-trips.
// CHECK-LABEL: func.func @plan
// CHECK: norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 32, rows_per_cta = 8, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 131072>
func.func @plan() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 32, rows_per_cta = 8, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 131072>} {
  return
}

// -----

// expected-error @below {{kernel_plan: block (512) must be threads_per_row x rows_per_cta (<= 1024)}}
func.func @bad_block() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 32, rows_per_cta = 8, chunks_per_thread = 4, programs_per_sm = 0, block = 512, combine_in_cta = true, single_launch = true, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 131072>} {
  return
}

// -----

// expected-error @below {{kernel_plan: the looped variant has no cp.async ring and no CTA-combined partials}}
func.func @looped_ring() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 3, column_groups = 2, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0>} {
  return
}

// -----

// expected-error @below {{kernel_plan: vector must be a power of two <= 16, got 3}}
func.func @bad_vector() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 3, threads_per_row = 32, rows_per_cta = 8, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 131072>} {
  return
}
