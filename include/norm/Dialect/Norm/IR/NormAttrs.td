//===- NormAttrs.td - Attributes of the norm dialect -------*- tablegen -*-===//
//
// Part of norm-opt.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_DIALECT_NORM_IR_NORMATTRS_TD
#define NORM_DIALECT_NORM_IR_NORMATTRS_TD

include "norm/Dialect/Norm/IR/NormDialect.td"
include "mlir/IR/AttrTypeBase.td"

//===----------------------------------------------------------------------===//
// The kernel plan's fields
//===----------------------------------------------------------------------===//
//
// The parameters of #norm.kernel_plan and #norm.resident_tier below are the
// one definition of the kernel plan's fields. cmake/gen_plan_fields.py
// writes KernelPlanFields.h.inc from them: the struct KernelPlanFields (one
// member per field parameter, named in camelCase: `rows_per_cta` is
// `rowsPerCta`; a BoolAttr or bool parameter is a bool member) and the
// conversions between it and both attributes (lib/Conversion/NormToGPU/
// PlanAttr.cpp). A new field is one parameter here plus its use.

// A field the planner decides; `init`: the member's value before it does.
class PlanField<string type, string init, string desc>
    : AttrParameter<type, desc> {
  string planInit = init;
}

// A field printed only when it is not `default` (also the member's initial
// value).
class DefaultPlanField<string type, string default, string desc>
    : DefaultValuedParameter<type, default, desc> {
  string planInit = default;
}

// Printed for the reader, not a member: the value of the KernelPlan method
// `method`, checked against it when the attribute is read.
class DerivedPlanField<string method, string desc>
    : AttrParameter<"int64_t", desc> {
  string planMethod = method;
}

def Norm_ResidentTierAttr : AttrDef<Norm_Dialect, "ResidentTier"> {
  let mnemonic = "resident_tier";
  let summary = "One resident tier of a kernel plan for a run-time N";
  let description = [{
    An element of a `#norm.kernel_plan`'s `tiers`: the resident plan made
    as for a static N = `cols`, whose two main kernels
    (`<kernel>_tier<cols>_main`, `..._main_peel` with `peel`, and
    `..._main_scalar`, see
    `include/norm/Conversion/NormToGPU/KernelNames.h`) take any run-time N
    <= `cols`. The fields mean what the kernel plan's fields of the same
    name mean (`chunks_per_thread` >= 1: tiers are register-resident);
    `final_threads` also picks the final kernel of the two-launch path
    (`<kernel>_final` when it equals the plan's, else
    `<kernel>_final_<final_threads>`). `peel` (printed only when true): the
    tier also has a `_main_peel` kernel for rows that do not start on a
    16-byte boundary (see the kernel plan's `peel`). See docs/gpu.md.

    ```mlir
    #norm.resident_tier<cols = 3072, vector = 8, threads_per_row = 128, ...>
    ```
  }];
  let parameters = (ins
    PlanField<"int64_t", "0", "a resident tier: the largest N it takes (0: not a tier)">:$cols,
    PlanField<"int64_t", "1", "columns per access in the main kernel">:$vector,
    PlanField<"int64_t", "32", "lanes of a program, which share one row">:$threads_per_row,
    PlanField<"int64_t", "1", "programs (rows at once) per CTA">:$rows_per_cta,
    PlanField<"int64_t", "0", "chunks of `vector` columns a lane keeps in registers; 0: looped">:$chunks_per_thread,
    DerivedPlanField<"block", "threads per CTA: threads_per_row x rows_per_cta">:$block,
    PlanField<"::mlir::BoolAttr", "false", "the CTA's programs add their partials in shared memory">:$combine_in_cta,
    PlanField<"::mlir::BoolAttr", "false", "the main kernel also does the final reduction">:$single_launch,
    PlanField<"int64_t", "0", "rows in the cp.async ring (0: plain loads)">:$async_stages,
    DerivedPlanField<"finalThreads", "threads of the final reduction">:$final_threads,
    PlanField<"int64_t", "0", "bytes of dynamic shared memory per CTA">:$dynamic_shared_bytes,
    DefaultPlanField<"bool", "false", "the vector kernel peels rows">:$peel,
    DefaultPlanField<"bool", "false", "register prefetch of the next row">:$prefetch,
    DefaultPlanField<"bool", "false", "the scalar kernel's prefetch">:$scalar_prefetch,
    DefaultPlanField<"int64_t", "0", "first byte of the cp.async ring">:$async_ring_offset,
    DefaultPlanField<"bool", "false", "row inputs ride the cp.async ring">:$ring_row_inputs
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Norm_KernelPlanAttr : AttrDef<Norm_Dialect, "KernelPlan"> {
  let mnemonic = "kernel_plan";
  let summary = "How one norm.mixed_reduction maps onto its GPU kernels";
  let description = [{
    Written by `--convert-norm-to-gpu` on each `norm.mixed_reduction` (as
    the `norm.gpu` attribute) before it builds the kernels, which it builds
    from this attribute; the host lowering (`--convert-norm-to-gpu-launch`,
    `norm-opt compile`) reads it too. It is the one description of the
    op's kernels. `kernel` is the kernels' name prefix (the suffixes are in
    `include/norm/Conversion/NormToGPU/KernelNames.h`). A program is a
    group of `threads_per_row` lanes (a power of two; a slab plan's whole
    warps), a CTA holds `rows_per_cta` of them (`block` threads, at most
    1024); `chunks_per_thread` is 0 for the looped variant, which, like a
    cluster plan, takes one row per CTA. The verifier checks these for a
    plan the planner made too, where the builders read it.
    Shared-memory sizes are bytes of dynamic shared memory; see
    docs/gpu.md for every field.

    `cluster_ctas` (a resident plan on sm_90+, printed only when not 1):
    the CTAs of one thread-block cluster share each row, each keeping a
    contiguous part of it in registers; they exchange the row sums through
    distributed shared memory (`st.async` into every CTA's slots, an
    mbarrier per slot set). The kernels carry the cluster shape
    (`.reqnctapercluster`); the grid is a multiple of it.

    `bulk_stages` (a looped plan on sm_90+ with a static N, printed only
    when not 0): the rows of the full inputs its vector kernel stages whole
    in dynamic shared memory with `cp.async.bulk` (after the accumulators;
    `dynamic_shared_bytes` counts them and one mbarrier per stage).

    `dependent_launch` (sm_90+ with column results, printed only when
    true): where the launcher takes two launches, the final kernel is a
    programmatic dependent launch of the main kernel. Every main kernel
    (tiers included) executes `griddepcontrol.launch_dependents` after its
    partial rows and every final kernel `griddepcontrol.wait` before it
    reads the
    partial buffer; the launcher sets the programmatic stream
    serialization attribute on the final kernel's launch.

    `peel` (a resident vector plan of one CTA per row, printed only when
    true): the plan also has the `_main_peel` kernel, a vector kernel for
    rows that do not start on a 16-byte boundary. Every row a program
    takes starts at the same phase (the launcher makes the rows' stride
    times the programs a multiple of `vector`); the program's lanes take
    one column each of the row's head (before its first 16-byte boundary)
    and tail (after its last whole chunk), and the whole chunks in between.
    The launcher takes it where the pointers are 16-byte aligned and the
    rows' strides agree modulo `vector` but N or a stride is not a multiple
    of `vector`. A static N that is not a multiple of `vector` has no
    `_main` kernel (only `_main_peel` and `_main_scalar`).

    The kernel builders read the plan from this attribute (the pass
    attaches it before it writes the kernels), so it holds every choice
    they make: also `prefetch` / `scalar_prefetch` (the register prefetch
    of the next row in the vector / scalar kernel), `shared_accumulators`
    (a looped plan's column accumulators in shared memory),
    `two_ctas_per_sm` (the looped vector kernel asks ptxas for two CTAs per
    SM), `async_ring_offset` / `bulk_ring_offset` (the first byte of the
    cp.async / bulk ring in the dynamic shared memory), `ring_row_inputs`
    (the row inputs, 4 bytes each, ride the cp.async ring: lane 0 of each
    warp copies its row's into the warp's slots of static shared memory
    with the row's full inputs, and the warp reads them back after its
    wait, instead of a load carried a row ahead in a register),
    `cluster_sums_ahead` (a cluster plan with a cp.async ring of at least
    3 rows and one row stage: the vector kernel pushes row it + 1's sums
    to the cluster before it waits for row it's, reading each row from the
    ring twice, for the sums and for the elementwise part; four slot sets
    per row stage) and `strided_rows`
    (a channels-first op's strided kernel: `threads_per_row / 32` warps
    split N, `chunks_per_thread` columns per warp held in registers, 0 for
    none; `rows_per_cta` groups whose partials the CTA combines) and
    `slab_rows` (a GroupNorm-like multi-axis op's slab kernel: a CTA of
    `threads_per_row` threads per slab, its column sums reduced per channel
    in the CTA, one partial row per sample; with `split_column_groups` Q,
    the `_main_split` kernels for few slabs: a thread-block cluster of Q
    CTAs per slab, each over 1 / Q of its spatial extent, exchanging the
    row sums through distributed shared memory, a partial row per sample
    and CTA) and `slab_groups` (channels last, printed only when not 1:
    each CTA takes that many adjacent groups of a sample, so that a
    position's runs of C/G channels make one contiguous run of at least
    128 bytes; a thread's channels are all in one group) and
    `split_min_bytes` (the launcher takes the split kernels only where each
    of a unit's Q CTAs walks at least that many bytes of every full input,
    besides at most half as many units as SMs); each printed only when not
    false / 0.

    `latency_ctas` / `latency_rows` (a row-major plan of a static N on
    sm_90+, printed only when not 0): the plan also has the `_latency`
    kernels (`_latency` where N is a multiple of `vector`, and
    `_latency_scalar`), which the launcher takes for calls of 1 to
    `latency_rows` rows: one thread-block cluster of `latency_ctas` CTAs,
    CTA r owning the r-th part of every row. Each row stage is a pass over
    the rows (unrolled, so that many rows' loads are in flight) whose
    per-CTA row sums go to the CTA's shared memory; after a cluster
    barrier each CTA adds every row's sums of the C CTAs in rank order
    (reads of distributed shared memory), and a last pass writes the full
    results and sums the column contributions, which the CTA adds in
    group order and finishes (initial value, epilogue) itself: one launch,
    no grid barrier, no workspace. Its lanes, groups, chunks and unroll
    follow from these two fields, N and `vector` (`latencyKernelPlan`).

    `tiers` (only for a run-time N, absent otherwise): the resident tiers,
    `#norm.resident_tier` attributes by increasing `cols`, all of the
    plan's `vector`. The launcher takes the first tier whose `cols` holds
    the run-time N, and the plan's own (looped) kernels above the last.

    ```mlir
    norm.gpu = #norm.kernel_plan<kernel = "f_0", vector = 8, ...,
        tiers = [#norm.resident_tier<cols = 128, ...>, ...]>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"kernel name prefix">:$kernel,
    PlanField<"int64_t", "1", "columns per access in the main kernel">:$vector,
    PlanField<"int64_t", "32", "lanes of a program, which share one row">:$threads_per_row,
    PlanField<"int64_t", "1", "programs (rows at once) per CTA">:$rows_per_cta,
    PlanField<"int64_t", "0", "chunks of `vector` columns a lane keeps in registers; 0: looped">:$chunks_per_thread,
    PlanField<"int64_t", "0", "CTAs per SM; 0: the occupancy limit">:$programs_per_sm,
    DerivedPlanField<"block", "threads per CTA: threads_per_row x rows_per_cta">:$block,
    PlanField<"::mlir::BoolAttr", "false", "the CTA's programs add their partials in shared memory">:$combine_in_cta,
    PlanField<"::mlir::BoolAttr", "false", "the main kernel also does the final reduction">:$single_launch,
    PlanField<"int64_t", "0", "rows in the cp.async ring (0: plain loads)">:$async_stages,
    PlanField<"int64_t", "0", "looped: CTAs per row (at least 1); 0 for a resident plan">:$column_groups,
    PlanField<"int64_t", "0", "looped: CTAs per row of the _main_split kernels (0: none)">:$split_column_groups,
    PlanField<"int64_t", "0", "the _main_split kernels' dynamic shared memory">:$split_shared_bytes,
    DerivedPlanField<"finalThreads", "threads of the final reduction">:$final_threads,
    PlanField<"int64_t", "0", "bytes of dynamic shared memory per CTA">:$dynamic_shared_bytes,
    DefaultPlanField<"int64_t", "1", "CTAs of a thread-block cluster per row">:$cluster_ctas,
    DefaultPlanField<"int64_t", "0", "rows of the looped kernel's bulk ring">:$bulk_stages,
    DefaultPlanField<"bool", "false", "final kernel launched as a programmatic dependent">:$dependent_launch,
    DefaultPlanField<"bool", "false", "the vector kernel peels rows">:$peel,
    DefaultPlanField<"bool", "false", "register prefetch of the next row">:$prefetch,
    DefaultPlanField<"bool", "false", "the scalar kernel's prefetch">:$scalar_prefetch,
    DefaultPlanField<"bool", "false", "looped: accumulators in shared memory">:$shared_accumulators,
    DefaultPlanField<"bool", "false", "looped: two CTAs per SM">:$two_ctas_per_sm,
    DefaultPlanField<"int64_t", "0", "first byte of the cp.async ring">:$async_ring_offset,
    DefaultPlanField<"bool", "false", "row inputs ride the cp.async ring">:$ring_row_inputs,
    DefaultPlanField<"int64_t", "0", "first byte of the bulk ring">:$bulk_ring_offset,
    DefaultPlanField<"bool", "false", "cluster: the row sums a row ahead">:$cluster_sums_ahead,
    DefaultPlanField<"bool", "false", "channels-first: the strided kernel">:$strided_rows,
    DefaultPlanField<"bool", "false", "GroupNorm: the slab kernel, a CTA per slab">:$slab_rows,
    DefaultPlanField<"int64_t", "1", "GroupNorm channels last: groups (slabs) per CTA">:$slab_groups,
    DefaultPlanField<"int64_t", "0", "GroupNorm split kernels: the least bytes of each full input a split CTA walks">:$split_min_bytes,
    DefaultPlanField<"int64_t", "0", "the latency kernel: CTAs of its one cluster (0: none)">:$latency_ctas,
    DefaultPlanField<"int64_t", "0", "the latency kernel: the most rows it takes">:$latency_rows,
    OptionalParameter<"::mlir::ArrayAttr",
                      "resident tiers of a run-time N">:$tiers
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // NORM_DIALECT_NORM_IR_NORMATTRS_TD
