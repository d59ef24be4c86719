//===- Passes.td - norm-opt conversion passes --------------*- tablegen -*-===//
//
// Part of norm-opt. Pass names are a stable interface: other compilers
// script against them. Rename only with a deprecation alias.
//
//===----------------------------------------------------------------------===//

#ifndef NORM_CONVERSION_PASSES_TD
#define NORM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertNormToGPU : Pass<"convert-norm-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Map each norm.mixed_reduction onto persistent GPU kernels "
                "(gpu.module of gpu.func, LLVM pointers, f32 math)";
  let description = [{
    For every `norm.mixed_reduction` in the module's functions this pass
    makes a kernel plan and writes the plan's kernels into the module's
    `gpu.module @norm_kernels` (names: `<func>_<i>` plus the suffixes of
    `include/norm/Conversion/NormToGPU/KernelNames.h`):

    - `_main`: the persistent row loop with 16-byte loads and stores.
      Programs are CTAs (or, for short rows, groups of lanes inside a
      CTA); each program walks rows `prog, prog + P, ...`; a row is spread
      over `threads-per-row` lanes and every lane owns the same columns for
      every row it touches. The "resident" variant keeps the lane's part of
      the row and its column accumulators in registers (the next row's
      inputs arrive by a register prefetch or a `cp.async` ring in shared
      memory); rows too long for registers take the "looped" variant,
      which re-reads the row for each reduction stage and keeps the
      accumulators in shared memory (or in its row of the partial buffer),
      with up to 8 CTAs per row (column groups). Row reductions are f32
      `gpu.shuffle xor` butterflies plus per-warp slots in shared memory,
      so every lane gets the same sum. Partials go to an fp32 buffer
      [C, P, N]; with `single-launch` the kernel then reduces it itself
      after a grid barrier (cooperative launch).
    - `_main_scalar`: the same loop with element-wide accesses, for base
      pointers or row strides that are not 16-byte multiples and for N
      that is not a multiple of the vector width.
    - With a cluster (`max-cluster-ctas` > 1, sm_90+, a static N that no
      single CTA holds in registers but 2, 4 or 8 CTAs do): `_main` and
      `_main_scalar` are resident kernels of one row per CTA whose CTAs
      form clusters (`.reqnctapercluster`); CTA r of a cluster owns the
      r-th contiguous part of every row it walks, and the row sums of
      the parts are added in rank order through distributed shared memory
      (each CTA's sums stored into every CTA's slots by `st.async`,
      completing on the receiver's mbarrier; PTX 8.1, so the cluster plans
      need `features` +ptx81 or newer), so every CTA of the cluster gets
      the same sum. A cluster is a program: its CTAs write one partial row.
    - `_main_split`, `_main_split_scalar` (looped plans whose accumulators
      fit in fewer than 4 column groups): the same with 4 CTAs per row,
      for few rows.
    - `_tier<C>_main`, `_tier<C>_main_scalar` (N dynamic, `tier-min-cols`
      > 0): the resident kernels of each resident tier, the plan for a
      static N = C, reading N at run time (any N <= C; chunks past the row
      masked); the launcher takes the smallest tier that holds N, the
      looped kernels above the last.
    - A channels-first op (`n_dim`: N is not the last dim, its rows are
      not contiguous; static N): `_main` and `_main_scalar` are the strided
      kernel instead. A lane takes `vector` consecutive rows (one in
      `_main_scalar`, for I not a multiple of it), a warp 32 lanes of
      them (a tile), and the `threads-per-row / 32` warps of a group split
      the tile's N columns, each walking its columns with coalesced loads
      along the contiguous dim; a CTA holds `rows-per-cta` groups. Row
      sums go through per-warp slots in shared memory; column sums through
      a butterfly over the warp's lanes into per-group accumulators in
      dynamic shared memory, added in group order into the CTA's partial
      row. Elements of a column are I apart (the dims after N), which the
      kernel takes in the row-stride parameters.
    - `_latency`, `_latency_scalar` (a static N on sm_90+ with
      `latency-ctas` > 1; `_latency` only where N is a multiple of the
      vector width): one thread-block cluster of `latency-ctas` CTAs for
      calls of at most the plan's `latency_rows` rows. CTA r owns the r-th
      part of every row; each row stage's per-CTA sums go to its shared
      memory and, after a cluster barrier, every CTA adds the parts of
      each row in rank order (reads of distributed shared memory); a last
      pass stores the full results and sums the column contributions,
      which the CTA adds in group order and finishes itself (initial
      value, epilogue). No grid barrier, no partial buffer, one launch.
    - `_final`: the fixed-order reduction of the partial buffer (the
      two-launch path; the same order as the single-launch tail), plus the
      initial value, plus a trailing elementwise epilogue of the column
      result (the narrowing `truncf` of dW/dB) when it has one; with
      tiers, also `_final_<T>` for each other block T among them.

    The plan is made from the target description of `chip` (registers and
    shared memory per thread, CTA and SM; cp.async, bulk-copy and cluster
    support; `GpuTarget.h`); the SM count is read at run time. The host
    function is left as it was; the op gets a `norm.gpu` kernel plan
    attribute (kernel prefix, vector width, lanes per row, rows per CTA,
    chunks per lane, shared-memory bytes, launch mode, column groups, ...)
    first, and the kernels are built from it; the host lowering
    (`convert-norm-to-gpu-launch`, `norm-opt compile`) reads it too. Kernel
    parameters are LLVM pointers (address space 1) and i64 sizes/strides:
    all index math is 64-bit. The dynamic shared memory is one extern
    array, and every shared array accessed with vectors is 16-byte
    aligned. See docs/gpu.md.
  }];
  // These options are the GPU options of the whole flow: the
  // --norm-lower-to-nvvm pipeline and `norm-opt compile` take the same list
  // (generated from here, see GpuOptions.h), and validateGpuOptions
  // (GpuOptions.h) checks every value once, before anything runs.
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "GPU architecture: exactly one NVPTX processor name of sm_80 or "
           "newer, case-sensitive (sm_80, sm_86, sm_87, sm_89, sm_90, "
           "sm_90a, sm_100, sm_100a, ..., sm_121f); the kernels are checked "
           "against its limits (threads and shared memory per block)">,
    Option<"features", "features", "std::string", /*default=*/"\"+ptx81\"",
           "PTX ISA features for the NVPTX back end (nvvm-attach-target): "
           "empty (the chip's minimum PTX version), or one +ptxNN at least "
           "the chip's minimum (sm_90a: +ptx80; sm_100a: +ptx86, so chip "
           "sm_100a needs features +ptx86 or empty); the cluster plans "
           "need +ptx81 or newer (st.async), else long rows are looped">,
    Option<"optLevel", "opt-level", "int", /*default=*/"3",
           "LLVM and ptxas optimisation level of the kernels (0-3)">,
    Option<"threadsPerRow", "threads-per-row", "int64_t", /*default=*/"0",
           "Lanes that share one row (power of two, <= 1024); 0 picks it "
           "from N and the element types">,
    Option<"rowsPerCTA", "rows-per-cta", "int64_t", /*default=*/"0",
           "Rows (programs) a CTA of the resident variant works on at once "
           "(power of two, <= 1024; threads-per-row x rows-per-cta <= 1024); "
           "0 picks: 256 threads for rows of <= 64 lanes, two rows of 128 "
           "lanes where their partials add in shared memory, else 1; looped "
           "and cluster plans take 1 whatever it says">,
    Option<"vectorBytes", "vector-bytes", "int64_t", /*default=*/"16",
           "Bytes per global access of the widest element type (16, 8, 4, "
           "or the element size for scalar accesses): 1, 2, 4, 8 or 16">,
    Option<"programsPerSM", "programs-per-sm", "int64_t", /*default=*/"0",
           "CTAs per multiprocessor; P = SMs x this at run time; 0 picks it "
           "from the estimated register use (the occupancy); at most the "
           "chip's resident CTAs per SM (32 on sm_80/sm_90, 16 on sm_86)">,
    Option<"maxResidentElements", "max-resident-elements", "int64_t",
           /*default=*/"0",
           "Most columns one lane may keep in registers before the looped "
           "variant is used; 0 picks it from the element types; at most "
           "256">,
    Option<"prefetch", "prefetch", "bool", /*default=*/"true",
           "Load the next row while reducing this one, when registers "
           "allow (register-resident variant)">,
    Option<"asyncStages", "async-stages", "int64_t", /*default=*/"3",
           "Rows of full inputs in flight per thread through cp.async into "
           "a shared-memory ring, where the plan uses one (register-resident "
           "vector kernel; reduced until the ring fits the shared-memory "
           "budget); 0 or 1: plain loads (and the register prefetch); at "
           "most 8">,
    Option<"bulkStages", "bulk-stages", "int64_t", /*default=*/"3",
           "Rows of full inputs staged whole in shared memory by "
           "cp.async.bulk, completing on an mbarrier (looped vector kernel, "
           "sm_90+, static N; reduced until the ring fits beside the "
           "accumulators, none below 2): both passes over a row read it "
           "from shared memory (docs/gpu.md, \"Bulk ring\"); 0 or 1: none "
           "(each pass reads the row from global memory); at most 8">,
    Option<"singleLaunch", "single-launch", "bool", /*default=*/"true",
           "Let the main kernel also do the final reduction after a grid "
           "barrier (one cooperative launch instead of two kernels; the "
           "launcher falls back to the final kernel where a cooperative "
           "launch is not possible); false: always two launches">,
    Option<"dependentLaunch", "dependent-launch", "bool", /*default=*/"true",
           "Two-launch path on sm_90+: launch the final kernel as a "
           "programmatic dependent of the main kernel (the main kernels "
           "execute griddepcontrol.launch_dependents after their partial "
           "rows, the final kernel griddepcontrol.wait before it reads the "
           "partial buffer; the launcher launches it with "
           "normrt_launch_dependent, which sets the programmatic stream "
           "serialization attribute), so its launch overlaps the main "
           "kernel's last CTAs instead of following the whole grid; false: "
           "a plain launch after the main kernel">,
    Option<"peelRows", "peel-rows", "bool", /*default=*/"true",
           "Resident vector kernel: take rows that do not start on a "
           "16-byte boundary (a static N that is not a multiple of the "
           "vector width, a run-time N's tiers) by peeling a scalar head and "
           "tail per row around 16-byte chunks (the kernel _main_peel), "
           "instead of the all-scalar kernel; the launcher takes it for "
           "16-byte aligned pointers whose strides agree modulo the vector "
           "width; false: such rows take the scalar kernel">,
    Option<"tierMinCols", "tier-min-cols", "int64_t", /*default=*/"256",
           "Run-time N: the smallest capacity of the resident tiers (kernels "
           "planned as for a static N of 1, 1.5, 2, 3, 4, ... times this, up "
           "to the longest row the resident variant holds; the launcher takes "
           "the smallest that holds N, else the looped kernels; "
           "docs/gpu.md); a power of two in [16, 65536], or 0 for no tiers "
           "(the looped kernels take every N)">,
    Option<"maxClusterCTAs", "max-cluster-ctas", "int64_t", /*default=*/"8",
           "A static N too long for one CTA's registers: the most CTAs of a "
           "thread-block cluster that share a row, each keeping its part in "
           "registers and exchanging the row sums through distributed shared "
           "memory (sm_90+ and +ptx81; the plan takes the fewest that hold "
           "the row; 16-bit vector rows only where the looped kernel's bulk "
           "ring does not hold them or they take 48 KiB or more, in parts "
           "of at most 128 lanes); 1, 2, 4 or 8, and 1 for none (the looped "
           "variant). Also caps the CTAs per cluster of GroupNorm's split "
           "slab kernels (2 NCHW, 8 channels last: few slabs share each "
           "slab among a cluster's CTAs; 1: none)">,
    Option<"slabSplitMinBytes", "slab-split-min-bytes", "int64_t",
           /*default=*/"32768",
           "GroupNorm's split slab kernels run only where each CTA of a "
           "split unit still walks at least this many bytes of every full "
           "input (a run-time rule: fewer, a CTA per unit); 0: wherever the "
           "units are at most half the SMs">,
    Option<"slabRunBytes", "slab-run-bytes", "int64_t", /*default=*/"128",
           "Channels-last GroupNorm: a CTA takes the fewest adjacent groups "
           "(dividing G) whose runs of one spatial position together make "
           "at least this many contiguous bytes, while a position's runs "
           "fit the CTA's 1024 threads (plan slab_groups); at least 1">,
    Option<"latencyCTAs", "latency-ctas", "int64_t", /*default=*/"16",
           "A static N on sm_90+ (+ptx81): the CTAs of the latency kernel's "
           "one thread-block cluster (the `_latency` kernels), which the "
           "launcher takes for calls of at most latency-max-rows rows: each CTA "
           "owns a part of every row, the row sums are added in rank order "
           "through distributed shared memory, and the column results are "
           "finished in the kernel (no grid barrier, no workspace, one "
           "launch); 0 or 1: none; 2, 4, 8 or 16 (16 needs the non-portable "
           "cluster size, which the runtime allows; fewer where the row has "
           "fewer chunks)">,
    Option<"latencyMaxRows", "latency-max-rows", "int64_t",
           /*default=*/"32",
           "The latency kernel takes calls of 1 to this many rows, and of "
           "at most 2048 / (its CTA's chunks of a row) rows (plan "
           "`latency_rows`; measured on the H200: its 16 SMs issue every "
           "instruction of the call, so it wins on few rows of a short "
           "part per CTA and loses on more); 0: never">,
    Option<"emitRemarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark per op with the chosen kernel shape">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def ConvertNormToGPULaunch
    : Pass<"convert-norm-to-gpu-launch", "::mlir::ModuleOp"> {
  let summary = "Lower each fused group's host side in place to upstream "
                "GPU host ops (gpu.launch_func on gpu.binary @norm_kernels) "
                "and calls of the runtime's normrt_ir_* entry points";
  let description = [{
    Runs after `--convert-norm-to-gpu` (the kernels and the op's
    `#norm.kernel_plan`) and usually after `gpu-module-to-binary`. Each
    `norm.mixed_reduction` in a function becomes, where it stands:

    - its buffers: `bufferization.to_buffer` of every input (identity
      layout, so rows are contiguous and a row stride is N), `gpu.alloc`
      of every result (`host_shared` with `host-shared=true`, so host code
      can read them), the fp32 partial rows from the runtime's workspace;
    - the launch, from the plan (`HostLaunch.h`, docs/pipeline.md stage 5):
      checks of rows and N, the SM count, the vector / peeled / scalar /
      split kernel and the resident tier chosen from N, the alignment and
      the strides, the grid from occupancy, then `gpu.launch_func` of the
      main kernel and, unless the main kernel finished the column results
      in one cooperative launch, of the final kernel;
    - its results as tensors (`bufferization.to_tensor restrict`), column
      epilogues (dW's `truncf`) included: the final kernel applies them.

    What `gpu.launch_func` cannot express goes through calls into the
    runtime (`NormRuntime.h`): `normrt_ir_begin` / `normrt_ir_end` around a
    group (the first failure is kept, nothing runs after it, and the end
    frees capture scratch), `normrt_ir_stream` (the caller's stream, from
    `normrt_use_stream`; launches go on it through `gpu.wait async`),
    `normrt_ir_sm_count`, `normrt_ir_next_launch` (the next launch is
    cooperative, a programmatic dependent, or an occupancy / fits query
    answered by `normrt_ir_query_result`), `normrt_ir_workspace`,
    `normrt_ir_grid_barrier`, `normrt_ir_fail`, `normrt_ir_check_aligned`.
    A failed launch sequence prints its message and stops the program
    (`cf.assert`). Everything else in the function is left as it is.

    Lower the rest with upstream passes (`gpu-to-llvm`, `finalize-memref-
    to-llvm`, `convert-func-to-llvm`, ...) and run it with
    `mlir-runner --shared-libs=libnorm_runtime.so`.
  }];
  let options = [
    Option<"hostShared", "host-shared", "bool", /*default=*/"false",
           "Allocate results with gpu.alloc host_shared (managed memory the "
           "host can read)">,
    Option<"synchronize", "synchronize", "bool", /*default=*/"false",
           "Wait for the stream after each group (host code reads the "
           "results next)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

#endif // NORM_CONVERSION_PASSES_TD
