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

// -----

// A run-time N: the looped plan with its resident tiers round-trips.
// CHECK-LABEL: func.func @tiers
// CHECK: tiers = [#norm.resident_tier<cols = 3072, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 3, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0>, #norm.resident_tier<cols = 4096, {{.*}}>]>
func.func @tiers() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, tiers = [#norm.resident_tier<cols = 3072, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 3, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0>, #norm.resident_tier<cols = 4096, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 4, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0>]>} {
  return
}

// -----

// expected-error @below {{kernel_plan: tiers must be by increasing cols}}
func.func @tiers_out_of_order() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, tiers = [#norm.resident_tier<cols = 4096, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 4, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0>, #norm.resident_tier<cols = 3072, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 3, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0>]>} {
  return
}

// -----

// expected-error @below {{kernel_plan: a tier's vector (4) must be the plan's (8)}}
func.func @tier_vector() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, tiers = [#norm.resident_tier<cols = 2048, vector = 4, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 4, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0>]>} {
  return
}

// -----

// expected-error @+2 {{resident_tier: cols (4096) must be a multiple of vector and at most threads_per_row x chunks_per_thread x vector}}
// expected-error @+1 {{failed to parse Norm_KernelPlanAttr parameter 'tiers'}}
func.func @tier_too_small() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, tiers = [#norm.resident_tier<cols = 4096, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 3, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0>]>} {
  return
}

// -----

// expected-error @+2 {{resident_tier: chunks_per_thread must be >= 1 (a tier is register-resident), got 0}}
// expected-error @+1 {{failed to parse Norm_KernelPlanAttr parameter 'tiers'}}
func.func @tier_looped() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, tiers = [#norm.resident_tier<cols = 1024, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 0, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0>]>} {
  return
}

// -----

// expected-error @below {{kernel_plan: tiers must be #norm.resident_tier attributes, got 3 : i64}}
func.func @tier_not_a_tier() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, tiers = [3]>} {
  return
}

// -----

// A cluster plan round-trips (cluster_ctas is printed only when not 1).
// CHECK-LABEL: func.func @cluster
// CHECK: dynamic_shared_bytes = 0, cluster_ctas = 4>
func.func @cluster() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 4, threads_per_row = 256, rows_per_cta = 1, chunks_per_thread = 8, programs_per_sm = 0, block = 256, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 0, cluster_ctas = 4>} {
  return
}

// -----

// expected-error @below {{kernel_plan: cluster_ctas must be 1, 2, 4, 8 or 16, got 3}}
func.func @cluster_not_a_power_of_two() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 4, threads_per_row = 256, rows_per_cta = 1, chunks_per_thread = 8, programs_per_sm = 0, block = 256, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 0, cluster_ctas = 3>} {
  return
}

// -----

// A plan whose final kernel is a dependent launch round-trips
// (dependent_launch is printed only when true).
// CHECK-LABEL: func.func @dependent
// CHECK: dynamic_shared_bytes = 0, dependent_launch = true>
func.func @dependent() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, dependent_launch = true>} {
  return
}

// -----

// CHECK-LABEL: func.func @not_dependent
// CHECK-NOT: dependent_launch
// CHECK: dynamic_shared_bytes = 0>
func.func @not_dependent() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, dependent_launch = false>} {
  return
}

// -----

// expected-error @+2 {{expected integer value}}
// expected-error @+1 {{failed to parse Norm_KernelPlanAttr parameter 'dependent_launch'}}
func.func @dependent_not_bool() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, dependent_launch = yes>} {
  return
}

// -----

// A looped plan with a bulk ring round-trips (bulk_stages is printed only
// when not 0).
// CHECK-LABEL: func.func @bulk_ring
// CHECK: dynamic_shared_bytes = 196640, bulk_stages = 2>
func.func @bulk_ring() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = true, async_stages = 0, column_groups = 1, split_column_groups = 4, split_shared_bytes = 16384, final_threads = 512, dynamic_shared_bytes = 196640, bulk_stages = 2>} {
  return
}

// -----

// expected-error @below {{kernel_plan: bulk_stages must be 0 (none) or at least 2, got 1}}
func.func @bulk_one_stage() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, bulk_stages = 1>} {
  return
}

// -----

// expected-error @below {{kernel_plan: only a looped vector plan of one row per CTA and a static N has a bulk ring}}
func.func @bulk_resident() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 32, rows_per_cta = 8, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 131072, bulk_stages = 2>} {
  return
}

// -----

// expected-error @below {{kernel_plan: only a resident plan of one row per CTA and a static N shares rows in a cluster}}
func.func @cluster_looped() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, cluster_ctas = 2>} {
  return
}

// -----

// A resident vector plan that peels rows round-trips (peel is printed only
// when true), and so does a tier that peels.
// CHECK-LABEL: func.func @peel
// CHECK: dynamic_shared_bytes = 47984, peel = true>
func.func @peel() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 128, rows_per_cta = 2, chunks_per_thread = 3, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 0, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 47984, peel = true>} {
  return
}

// -----

// CHECK-LABEL: func.func @peel_tier
// CHECK: final_threads = 128, dynamic_shared_bytes = 0, peel = true>]>
func.func @peel_tier() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, tiers = [#norm.resident_tier<cols = 3072, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 3, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0, peel = true>]>} {
  return
}

// -----

// expected-error @below {{kernel_plan: peel needs a resident vector plan of one CTA per row and at least `vector` threads per row}}
func.func @peel_looped() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, peel = true>} {
  return
}

// -----

// expected-error @below {{kernel_plan: peel needs a resident vector plan of one CTA per row and at least `vector` threads per row}}
func.func @peel_scalar() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 1, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 3, programs_per_sm = 0, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 128, dynamic_shared_bytes = 0, peel = true>} {
  return
}

// -----

// expected-error @+2 {{resident_tier: peel needs a vector kernel of at least `vector` threads per row}}
// expected-error @+1 {{failed to parse Norm_KernelPlanAttr parameter 'tiers'}}
func.func @peel_tier_narrow() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, tiers = [#norm.resident_tier<cols = 32, vector = 8, threads_per_row = 4, rows_per_cta = 32, chunks_per_thread = 1, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0, peel = true>]>} {
  return
}

// -----

// Every choice the kernel builders read is in the plan: the register
// prefetch, a looped plan's shared accumulators and two CTAs per SM, the
// rings' offsets, and a channels-first plan's strided kernel (whose looped
// form combines its groups' partials in the CTA).
// CHECK-LABEL: func.func @builder_fields
// CHECK: dependent_launch = true, prefetch = true, scalar_prefetch = true, async_ring_offset = 32768>
// CHECK: shared_accumulators = true, two_ctas_per_sm = true, bulk_ring_offset = 65536>
// CHECK: combine_in_cta = true, {{.*}} strided_rows = true>
func.func @builder_fields() attributes {
  a = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 16, rows_per_cta = 16, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 131072, dependent_launch = true, prefetch = true, scalar_prefetch = true, async_ring_offset = 32768>,
  b = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 2, split_column_groups = 4, split_shared_bytes = 65536, final_threads = 512, dynamic_shared_bytes = 196640, bulk_stages = 2, shared_accumulators = true, two_ctas_per_sm = true, bulk_ring_offset = 65536>,
  c = #norm.kernel_plan<kernel = "f_0", vector = 4, threads_per_row = 256, rows_per_cta = 2, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = true, single_launch = true, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 1536, strided_rows = true>} {
  return
}

// -----

// expected-error @below {{kernel_plan: ring offsets must be 16-byte multiples}}
func.func @bad_ring_offset() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 16, rows_per_cta = 16, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 131072, async_ring_offset = 8>} {
  return
}

// -----

// Row inputs in the cp.async ring round-trip (printed only when true).
// CHECK-LABEL: func.func @ring_row_inputs
// CHECK: async_ring_offset = 65536, ring_row_inputs = true>
func.func @ring_row_inputs() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 64, rows_per_cta = 4, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 163840, async_ring_offset = 65536, ring_row_inputs = true>} {
  return
}

// -----

// expected-error @below {{kernel_plan: ring_row_inputs needs a cp.async ring (async_stages >= 2)}}
func.func @ring_row_inputs_no_ring() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 64, rows_per_cta = 4, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 0, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 32768, ring_row_inputs = true>} {
  return
}

// -----

// expected-error @+2 {{resident_tier: ring_row_inputs needs a cp.async ring (async_stages >= 2)}}
// expected-error @+1 {{failed to parse Norm_KernelPlanAttr parameter 'tiers'}}
func.func @tier_ring_row_inputs_no_ring() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, tiers = [#norm.resident_tier<cols = 4096, vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 4, block = 128, combine_in_cta = false, single_launch = true, async_stages = 0, final_threads = 128, dynamic_shared_bytes = 0, ring_row_inputs = true>]>} {
  return
}

// -----

// The row sums a row ahead round-trip on a cluster plan with a ring of 3.
// CHECK-LABEL: func.func @cluster_sums_ahead
// CHECK: async_stages = 3,{{.*}}cluster_ctas = 8,{{.*}}cluster_sums_ahead = true>
func.func @cluster_sums_ahead() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 4, programs_per_sm = 0, block = 128, combine_in_cta = false, single_launch = false, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 128, dynamic_shared_bytes = 49152, cluster_ctas = 8, ring_row_inputs = true, cluster_sums_ahead = true>} {
  return
}

// -----

// expected-error @below {{kernel_plan: cluster_sums_ahead needs a cluster (cluster_ctas > 1) and a cp.async ring of at least 3 rows}}
func.func @cluster_sums_ahead_two_stages() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 128, rows_per_cta = 1, chunks_per_thread = 4, programs_per_sm = 0, block = 128, combine_in_cta = false, single_launch = false, async_stages = 2, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 128, dynamic_shared_bytes = 32768, cluster_ctas = 8, cluster_sums_ahead = true>} {
  return
}

// -----

// expected-error @below {{kernel_plan: cluster_sums_ahead needs a cluster (cluster_ctas > 1) and a cp.async ring of at least 3 rows}}
func.func @cluster_sums_ahead_no_cluster() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 64, rows_per_cta = 4, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 3, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 163840, cluster_sums_ahead = true>} {
  return
}

// -----

// A slab plan taking several groups per CTA (channels last) round-trips;
// slab_groups is at least 1, and more only with slab_rows.
// CHECK-LABEL: func.func @slab_groups
// CHECK: split_column_groups = 8, {{.*}} slab_rows = true, slab_groups = 4>
func.func @slab_groups() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 2, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 8, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, slab_rows = true, slab_groups = 4>} {
  return
}

// -----

// expected-error @below {{kernel_plan: slab_groups must be at least 1, and 1 unless slab_rows}}
func.func @slab_groups_zero() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 2, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, slab_rows = true, slab_groups = 0>} {
  return
}

// -----

// expected-error @below {{kernel_plan: slab_groups must be at least 1, and 1 unless slab_rows}}
func.func @slab_groups_without_slabs() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 2, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 512, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, slab_groups = 2>} {
  return
}

// -----

// The split kernels' least bytes a CTA (GroupNorm slabs; printed when not
// 0), and 320-thread slab CTAs (whole warps, not a power of two).
// CHECK-LABEL: func.func @split_min_bytes
// CHECK: threads_per_row = 320, {{.*}} slab_rows = true, split_min_bytes = 32768>
func.func @split_min_bytes() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 2, threads_per_row = 320, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 320, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 2, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, slab_rows = true, split_min_bytes = 32768>} {
  return
}

// -----

// expected-error @below {{kernel_plan: split_min_bytes must be at least 0, and 0 unless slab_rows}}
func.func @split_min_bytes_not_slabs() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 32, rows_per_cta = 8, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = true, single_launch = true, async_stages = 0, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 0, split_min_bytes = 4096>} {
  return
}

// -----

// expected-error @below {{kernel_plan: a slab plan's threads_per_row must be whole warps, at most 1024, got 300}}
func.func @slab_threads_not_warps() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 2, threads_per_row = 300, rows_per_cta = 1, chunks_per_thread = 0, programs_per_sm = 0, block = 300, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 1, split_column_groups = 0, split_shared_bytes = 0, final_threads = 512, dynamic_shared_bytes = 0, slab_rows = true>} {
  return
}

// -----

// expected-error @below {{kernel_plan: the looped variant takes one row per CTA (its shared accumulators are the CTA's), got rows_per_cta 2}}
func.func @looped_two_rows() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 512, rows_per_cta = 2, chunks_per_thread = 0, programs_per_sm = 0, block = 1024, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 2, split_column_groups = 0, split_shared_bytes = 0, final_threads = 1024, dynamic_shared_bytes = 0>} {
  return
}

// -----

// A plan with the latency kernels round-trips (printed only when not 0).
// CHECK-LABEL: func.func @latency
// CHECK: dynamic_shared_bytes = 0, latency_ctas = 16, latency_rows = 682>
func.func @latency() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 32, rows_per_cta = 8, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 0, latency_ctas = 16, latency_rows = 682>} {
  return
}

// -----

// expected-error @below {{kernel_plan: latency_ctas must be 0 or a power of two up to 16, and latency_rows at least 1 exactly where latency_ctas is at least 2}}
func.func @latency_no_rows() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 32, rows_per_cta = 8, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 0, latency_ctas = 16>} {
  return
}

// -----

// expected-error @below {{kernel_plan: latency_ctas must be 0 or a power of two up to 16}}
func.func @latency_odd() attributes {norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, threads_per_row = 32, rows_per_cta = 8, chunks_per_thread = 4, programs_per_sm = 0, block = 256, combine_in_cta = false, single_launch = false, async_stages = 0, column_groups = 0, split_column_groups = 0, split_shared_bytes = 0, final_threads = 256, dynamic_shared_bytes = 0, latency_ctas = 12, latency_rows = 4>} {
  return
}
