// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu=latency-ctas=0 | FileCheck %s
// RUN: %if mlir-opt-plugin %{ %mlir_opt_plugin %s -split-input-file --pass-pipeline='builtin.module(convert-norm-to-gpu{latency-ctas=0})' | FileCheck %s %}
// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu="threads-per-row=64 latency-ctas=0" | FileCheck %s --check-prefix=WIDE
// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu="max-resident-elements=4 latency-ctas=0" | FileCheck %s --check-prefix=LOOPED
// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu="max-resident-elements=4 bulk-stages=0 latency-ctas=0" | FileCheck %s --check-prefix=NOBULK
// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu="max-resident-elements=4 chip=sm_80 latency-ctas=0" | FileCheck %s --check-prefix=NOBULK
// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu="async-stages=0 latency-ctas=0" | FileCheck %s --check-prefix=PREFETCH
// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu="single-launch=false latency-ctas=0" | FileCheck %s --check-prefix=TWO
// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu="single-launch=false dependent-launch=false latency-ctas=0" | FileCheck %s --check-prefix=NODEP
// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu="single-launch=false chip=sm_80 latency-ctas=0" | FileCheck %s --check-prefix=NODEP
// The remarks (the resident tiers of @captured's run-time N have their own
// in convert-norm-to-gpu-tiers.mlir).
// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu="remarks=true tier-min-cols=0 latency-ctas=0" -verify-diagnostics -o /dev/null

// RMSNorm backward, bf16, N = 512, as --norm-fuse-mixed-reductions leaves it
// (the narrowing truncf of dW stays outside the fused op).

// CHECK-LABEL: func.func @rms
// CHECK:         norm.mixed_reduction
// The plan (#norm.kernel_plan, read by the launcher writer): 16 lanes per
// row, 16 rows per CTA of 256 threads, 8-wide vectors, 4 chunks per lane;
// the CTA combines its rows' partials (dynamic shared memory: 32 KiB of
// accumulators, then a 3-row cp.async ring); one launch.
// CHECK:         norm.gpu = #norm.kernel_plan<kernel = "rms_0", vector = 8,
// CHECK-SAME:      threads_per_row = 16, rows_per_cta = 16, chunks_per_thread = 4,
// CHECK-SAME:      block = 256, combine_in_cta = true, single_launch = true,
// CHECK-SAME:      async_stages = 3, column_groups = 0,
// CHECK-SAME:      final_threads = 256, dynamic_shared_bytes = 131072, dependent_launch = true,
// CHECK-SAME:      async_ring_offset = 32768>
// CHECK:       gpu.module @norm_kernels
// The dynamic shared memory (accumulators, then the cp.async ring): an
// external declaration, 16-byte aligned (`.extern .shared .align 16 .b8
// norm_dynamic_smem[]` in the PTX). A zero-sized internal global would be a
// 1-byte static variable in the PTX, which ptxas may place before the
// static arrays (issue 11).
// CHECK:         llvm.mlir.global external @norm_dynamic_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK-NOT:     llvm.mlir.global
// Main kernel: pointers in the global address space, i64 sizes and strides,
// then the single-launch tail (barrier word, dW, finalize flag) and the
// final reduction's slices in workgroup memory.
// CHECK:         gpu.func @rms_0_main(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %[[BAR:.*]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %[[FIN:.*]]: i64) workgroup(%{{.*}} : memref<256xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK-SAME:      known_block_size = array<i32: 256, 1, 1>
// CHECK:           gpu.dynamic_shared_memory
// CHECK:           memref.view
// The weight: loaded once per lane, 16 bytes at a time.
// CHECK:           llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// The ring starts after the CTA's accumulators (32768 bytes); the first
// two rows go in flight (8 copies of 16 bytes each: 4 chunks x x, dy).
// CHECK:           llvm.mlir.addressof @norm_dynamic_smem : !llvm.ptr<3>
// CHECK-COUNT-8:   nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg : !llvm.ptr<3>, !llvm.ptr<1>
// CHECK:           nvvm.cp.async.commit.group
// CHECK-COUNT-8:   nvvm.cp.async.shared.global
// CHECK:           nvvm.cp.async.commit.group
// The persistent row loop carries the fp32 column accumulators and the
// row's rstd (loaded one row ahead); each iteration starts the copies of
// the row two ahead, waits for its own row's group, and reads it back from
// shared memory.
// CHECK:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)  : i64
// CHECK-COUNT-8:     nvvm.cp.async.shared.global
// CHECK:             nvvm.cp.async.commit.group
// CHECK-NEXT:        nvvm.cp.async.wait.group 2
// CHECK:             llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK:             llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<8xbf16>
// Row sum: butterfly over the row's 16 lanes.
// CHECK:             gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NOT:         gpu.barrier
// dx: masked 16-byte stores.
// CHECK:             scf.if
// CHECK:               llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK:             scf.yield
// CHECK:           nvvm.cp.async.wait.group 0
// After the loop: the 16 programs of the CTA add their accumulators in
// dynamic shared memory, in order; one partial row per CTA.
// CHECK:           memref.store
// CHECK:           gpu.barrier
// CHECK:           scf.for
// CHECK-COUNT-16:    memref.load
// CHECK:             llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
// Single launch: when `finalize` is set, a grid barrier (cooperative
// groups' arrival counter), then the final reduction in this kernel.
// CHECK:           %[[ON:.*]] = arith.cmpi ne, %[[FIN]]
// CHECK:           scf.if %[[ON]]
// CHECK:             gpu.barrier
// CHECK:             scf.if
// CHECK:               nvvm.memory.barrier <gpu>
// CHECK:               llvm.atomicrmw add %[[BAR]], %{{.*}} monotonic : !llvm.ptr<1>, i32
// CHECK:               scf.while
// CHECK:                 llvm.load volatile %[[BAR]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:               nvvm.memory.barrier <gpu>
// CHECK:             gpu.barrier
// Slices from the number of partial rows (at most 16 per slice, at most
// 256 / 32 slices), then 256 / slices columns per tile.
// CHECK:             arith.ceildivui %{{.*}}, %c16_i64
// CHECK-COUNT-3:     arith.select
// CHECK:             scf.for
// CHECK:               scf.for {{.*}} -> (f32)
// CHECK:               gpu.barrier
// CHECK:               scf.if
// CHECK:                 scf.for {{.*}} -> (f32)
// CHECK:                   memref.load
// CHECK:                 arith.truncf %{{.*}} : f32 to bf16
// CHECK:                 llvm.store %{{.*}}, %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK:           gpu.return
// The scalar kernel: element-wide accesses, no ring.
// CHECK:         gpu.func @rms_0_main_scalar
// CHECK-NOT:       nvvm.cp.async
// CHECK:           llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<1> -> bf16
// Final kernel (the two-launch path): the same reduction with the main
// kernel's 256 threads, so both paths sum in one order; then the truncf
// epilogue of dW.
// CHECK:         gpu.func @rms_0_final(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64) workgroup(%{{.*}} : memref<256xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK-SAME:      known_block_size = array<i32: 256, 1, 1>
// CHECK-COUNT-3:   arith.select
// CHECK:           scf.for
// CHECK:             scf.for {{.*}} -> (f32)
// CHECK:             gpu.barrier
// CHECK:             scf.if
// CHECK:               scf.for {{.*}} -> (f32)
// CHECK:                 memref.load
// CHECK:               arith.truncf %{{.*}} : f32 to bf16
// CHECK:               llvm.store %{{.*}}, %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr<1>

// Without the ring (async-stages=0): the register prefetch of the next
// row rides in the loop's carried values (8 accesses of 16 bytes).
// PREFETCH-LABEL: func.func @rms
// PREFETCH:         async_stages = 0
// PREFETCH-SAME:    dynamic_shared_bytes = 32768, dependent_launch = true, prefetch = true>
// PREFETCH:         gpu.func @rms_0_main
// PREFETCH-NOT:       nvvm.cp.async
// PREFETCH:           llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// PREFETCH:           llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// PREFETCH:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, f32)  : i64
// PREFETCH:             llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>

// Two launches (single-launch=false): the tail parameters stay in the
// signature (one launcher ABI), but nothing reads them: no grid barrier,
// no tail slices in workgroup memory.
// The final kernel is a programmatic dependent launch of the main kernel
// (sm_90+): every main kernel lets it be scheduled once its partial rows
// are written (last), and it waits for the main kernel to finish before
// its first access.
// TWO-LABEL: func.func @rms
// TWO:         single_launch = false
// TWO-SAME:    dependent_launch = true, async_ring_offset = 32768>
// TWO:         gpu.func @rms_0_main(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64) kernel
// TWO-NOT:       nvvm.griddepcontrol
// TWO-NOT:       llvm.atomicrmw
// TWO:           scf.for
// TWO:           llvm.store %{{.*}} : f32, !llvm.ptr<1>
// TWO-NOT:       nvvm.griddepcontrol
// TWO:           nvvm.griddepcontrol launch_dependents
// TWO-NEXT:      gpu.return
// TWO:         gpu.func @rms_0_main_scalar(
// TWO-NOT:       nvvm.griddepcontrol
// TWO:           nvvm.griddepcontrol launch_dependents
// TWO-NEXT:      gpu.return
// TWO:         gpu.func @rms_0_final
// TWO-NOT:       llvm.load
// TWO:           nvvm.griddepcontrol wait
// TWO-NOT:       nvvm.griddepcontrol
// TWO:           llvm.load

// Without it (dependent-launch=false, or sm_80 where griddepcontrol does
// not exist): no field, no griddepcontrol.
// NODEP-LABEL: func.func @rms
// NODEP-NOT:     dependent_launch
// NODEP-NOT:     nvvm.griddepcontrol

// WIDE-LABEL: func.func @rms
// WIDE:         threads_per_row = 64
// Across warps: lane 0 of each warp writes, everyone reads both in order;
// 4 rows (programs) per CTA, each with its own 2 slots, synchronised by a
// named barrier of the program's 64 threads (id = program + 1), not the
// CTA's, so the programs' rows need not line up.
// WIDE:         gpu.func @rms_0_main({{.*}}) workgroup(%{{.*}} : memref<8xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// WIDE:           gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// WIDE:           memref.store
// WIDE-NOT:       gpu.barrier
// WIDE:           nvvm.barrier id = %{{.*}} number_of_threads = %c64_i32
// WIDE:           memref.load
// WIDE:           memref.load
// WIDE-NOT:       gpu.barrier
// WIDE:           nvvm.barrier id = %{{.*}} number_of_threads = %c64_i32

// LOOPED-LABEL: func.func @rms
// LOOPED:         chunks_per_thread = 0
// LOOPED-SAME:    dynamic_shared_bytes = 8240
// The looped variant keeps its column accumulators in shared memory (N x 4
// = 2048 bytes): zeroed first, then the passes over the row, and the last
// pass adds into the lane's own columns; finally each lane copies its
// columns to the program's partial row. On sm_90a the rows of x and dy are
// staged in a bulk ring behind the accumulators (3 stages of 2 x 1024
// bytes, then an mbarrier of 16 bytes per stage): thread 0 initialises the
// barriers and issues the first two rows; each row iteration frees the
// previous row's stage (barrier), refills it with the row two ahead, waits
// for its own stage and reads its chunks from shared memory.
// LOOPED:         gpu.func @rms_0_main
// LOOPED:           gpu.dynamic_shared_memory
// LOOPED:           scf.for
// LOOPED:             memref.store %{{.*}}, %view
// LOOPED-COUNT-3:   nvvm.mbarrier.init
// LOOPED:           nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// LOOPED:           gpu.barrier
// LOOPED:           nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c2048_i32
// LOOPED-COUNT-2:   nvvm.cp.async.bulk.shared.cluster.global %{{.*}}, %c1024_i32
// LOOPED:           scf.for
// LOOPED:             gpu.barrier
// LOOPED:             nvvm.fence.proxy
// LOOPED:             nvvm.mbarrier.arrive.expect_tx
// LOOPED-COUNT-2:     nvvm.cp.async.bulk.shared.cluster.global
// LOOPED:             nvvm.mbarrier.try_wait.parity
// LOOPED:             scf.for {{.*}} -> (f32)
// LOOPED:               llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<8xbf16>
// LOOPED:             scf.for
// LOOPED:               llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<8xbf16>
// LOOPED:               memref.load %view
// LOOPED:               arith.addf
// LOOPED:               memref.store %{{.*}}, %view
// LOOPED:           scf.for
// LOOPED:             memref.load %view
// LOOPED:             llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xf32>, !llvm.ptr<1>
// The scalar fallback (rows not 16-byte aligned) reads global memory.
// LOOPED:         gpu.func @rms_0_main_scalar
// LOOPED-NOT:       nvvm.cp.async.bulk
// LOOPED:         gpu.func @rms_0_final

// Without the bulk ring (bulk-stages=0, or sm_80): each pass re-reads the
// row from global memory.
// NOBULK-LABEL: func.func @rms
// NOBULK:         chunks_per_thread = 0
// NOBULK-SAME:    dynamic_shared_bytes = 2048
// NOBULK:         gpu.func @rms_0_main
// NOBULK-NOT:       nvvm.cp.async.bulk
// NOBULK:           scf.for {{.*}} -> (f32)
// NOBULK:             llvm.load %{{.*}} : !llvm.ptr<1> -> vector<8xbf16>
// NOBULK:         gpu.func @rms_0_main_scalar

#map = affine_map<(d0) -> (d0)>
func.func @rms(%x: tensor<?x512xbf16>, %dy: tensor<?x512xbf16>, %rstd: tensor<?xf32>, %w: tensor<512xbf16>) -> (tensor<?x512xbf16>, tensor<512xbf16>) {
  %cst = arith.constant 0.000000e+00 : f32
  %n = arith.constant 5.120000e+02 : f32
  %0 = tensor.empty() : tensor<512xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<512xf32>) -> tensor<512xf32>
  // expected-remark @below {{GPU kernels rms_0: resident, 16 lanes per row, 16 rows per CTA, vector 8, chunks per lane 4, CTA-combined partials, cp.async ring of 3 rows, single launch}}
  %dx, %dw = norm.mixed_reduction full(%x, %dy : tensor<?x512xbf16>, tensor<?x512xbf16>) row(%rstd : tensor<?xf32>) col(%w : tensor<512xbf16>) col_init(%1 : tensor<512xf32>) row_stages {
  ^bb0(%xe: bf16, %dye: bf16, %r: f32, %we: bf16):
    %a = arith.extf %xe : bf16 to f32
    %xhat = arith.mulf %a, %r : f32
    %b = arith.extf %dye : bf16 to f32
    %c = arith.extf %we : bf16 to f32
    %wdy = arith.mulf %b, %c : f32
    %p = arith.mulf %xhat, %wdy : f32
    norm.yield %p : f32
  } elementwise {
  ^bb0(%xe: bf16, %dye: bf16, %r: f32, %we: bf16, %s: f32):
    %a = arith.extf %xe : bf16 to f32
    %xhat = arith.mulf %a, %r : f32
    %b = arith.extf %dye : bf16 to f32
    %c = arith.extf %we : bf16 to f32
    %wdy = arith.mulf %b, %c : f32
    %m = arith.divf %s, %n : f32
    %t = arith.mulf %xhat, %m : f32
    %u = arith.subf %wdy, %t : f32
    %v = arith.mulf %u, %r : f32
    %o = arith.truncf %v : f32 to bf16
    norm.yield %o : bf16
  } columns {
  ^bb0(%xe: bf16, %dye: bf16, %r: f32, %we: bf16, %s: f32):
    %a = arith.extf %xe : bf16 to f32
    %xhat = arith.mulf %a, %r : f32
    %b = arith.extf %dye : bf16 to f32
    %p = arith.mulf %b, %xhat : f32
    norm.yield %p : f32
  } -> full(tensor<?x512xbf16>) col(tensor<512xf32>)
  %2 = tensor.empty() : tensor<512xbf16>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%dw : tensor<512xf32>) outs(%2 : tensor<512xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<512xbf16>
  return %dx, %3 : tensor<?x512xbf16>, tensor<512xbf16>
}

// -----

// Captured values a kernel recomputes or reads: a dynamic N (tensor.dim of
// the domain, cast to f32) and a loss scale in a 0-d tensor, which becomes
// the last pointer parameter of the main kernel.

// CHECK-LABEL: func.func @captured
// CHECK:       gpu.func @captured_0_main_scalar(
// CHECK-SAME:    %[[COLS:[a-z0-9]+]]: i64, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64, %[[SCALE:[a-z0-9]+]]: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: !llvm.ptr<1>, %{{[a-z0-9]+}}: i64) workgroup
// CHECK:         %[[N:.*]] = arith.index_castui %[[COLS]] : i64 to index
// CHECK:         arith.index_cast %[[N]] : index to i64
// CHECK:         arith.uitofp
// CHECK:         llvm.load %[[SCALE]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
func.func @captured(%x: tensor<?x?xf32>, %scale: tensor<f32>, %init: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %c1 = arith.constant 1 : index
  %nd = tensor.dim %x, %c1 : tensor<?x?xf32>
  %ni = arith.index_cast %nd : index to i64
  %n = arith.uitofp %ni : i64 to f32
  %s = tensor.extract %scale[] : tensor<f32>
  // expected-remark @below {{GPU kernels captured_0: looped, 512 lanes per row}}
  %dx, %dw = norm.mixed_reduction full(%x : tensor<?x?xf32>) col_init(%init : tensor<?xf32>) row_stages {
  ^bb0(%xe: f32):
    %v = arith.mulf %xe, %s : f32
    norm.yield %v : f32
  } elementwise {
  ^bb0(%xe: f32, %sum: f32):
    %m = arith.divf %sum, %n : f32
    %y = arith.subf %xe, %m : f32
    norm.yield %y : f32
  } columns {
  ^bb0(%xe: f32, %sum: f32):
    norm.yield %xe : f32
  } -> full(tensor<?x?xf32>) col(tensor<?xf32>)
  return %dx, %dw : tensor<?x?xf32>, tensor<?xf32>
}

// -----

// A short row (N = 64, 8 chunks of 8): at least 8 lanes per row (one
// chunk each), so 32 rows per CTA, and no cp.async ring below 16 lanes
// (the register prefetch instead): both measured faster for N <= 128
// (docs/perf-notes.md, "Lanes per row" and "cp.async ring").
// CHECK-LABEL: func.func @short_row
// CHECK:         threads_per_row = 8, rows_per_cta = 32, chunks_per_thread = 1,
// CHECK-SAME:    async_stages = 0,
// CHECK:         gpu.func @short_row_0_main
// CHECK-NOT:       nvvm.cp.async
// CHECK:         gpu.func @short_row_0_main_scalar
#map = affine_map<(d0) -> (d0)>
func.func @short_row(%x: tensor<?x64xbf16>, %dy: tensor<?x64xbf16>, %rstd: tensor<?xf32>, %w: tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<64xbf16>) {
  %cst = arith.constant 0.000000e+00 : f32
  %n = arith.constant 6.400000e+01 : f32
  %0 = tensor.empty() : tensor<64xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<64xf32>) -> tensor<64xf32>
  // expected-remark @below {{GPU kernels short_row_0: resident, 8 lanes per row, 32 rows per CTA, vector 8, chunks per lane 1, prefetch, CTA-combined partials, single launch}}
  %dx, %dw = norm.mixed_reduction full(%x, %dy : tensor<?x64xbf16>, tensor<?x64xbf16>) row(%rstd : tensor<?xf32>) col(%w : tensor<64xbf16>) col_init(%1 : tensor<64xf32>) row_stages {
  ^bb0(%xe: bf16, %dye: bf16, %r: f32, %we: bf16):
    %a = arith.extf %xe : bf16 to f32
    %xhat = arith.mulf %a, %r : f32
    %b = arith.extf %dye : bf16 to f32
    %c = arith.extf %we : bf16 to f32
    %wdy = arith.mulf %b, %c : f32
    %p = arith.mulf %xhat, %wdy : f32
    norm.yield %p : f32
  } elementwise {
  ^bb0(%xe: bf16, %dye: bf16, %r: f32, %we: bf16, %s: f32):
    %a = arith.extf %xe : bf16 to f32
    %xhat = arith.mulf %a, %r : f32
    %b = arith.extf %dye : bf16 to f32
    %c = arith.extf %we : bf16 to f32
    %wdy = arith.mulf %b, %c : f32
    %m = arith.divf %s, %n : f32
    %t = arith.mulf %xhat, %m : f32
    %u = arith.subf %wdy, %t : f32
    %v = arith.mulf %u, %r : f32
    %o = arith.truncf %v : f32 to bf16
    norm.yield %o : bf16
  } columns {
  ^bb0(%xe: bf16, %dye: bf16, %r: f32, %we: bf16, %s: f32):
    %a = arith.extf %xe : bf16 to f32
    %xhat = arith.mulf %a, %r : f32
    %b = arith.extf %dye : bf16 to f32
    %p = arith.mulf %b, %xhat : f32
    norm.yield %p : f32
  } -> full(tensor<?x64xbf16>) col(tensor<64xf32>)
  %2 = tensor.empty() : tensor<64xbf16>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%dw : tensor<64xf32>) outs(%2 : tensor<64xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<64xbf16>
  return %dx, %3 : tensor<?x64xbf16>, tensor<64xbf16>
}

// -----

// A static N that is not a multiple of the vector width (RMSNorm bf16,
// 2999 columns): no `_main` kernel, the peeled vector kernel and the
// scalar one; the plan has `peel`.
// CHECK-LABEL: func.func @rms_bf16_2999
// CHECK: #norm.kernel_plan<kernel = "rms_bf16_2999_0", vector = 8,
// CHECK-SAME: peel = true, prefetch = true, scalar_prefetch = true>
// CHECK-NOT: gpu.func @rms_bf16_2999_0_main(
// CHECK: gpu.func @rms_bf16_2999_0_main_peel(
// CHECK-NOT: gpu.func @rms_bf16_2999_0_main(
// CHECK: gpu.func @rms_bf16_2999_0_main_scalar(
#map = affine_map<(d0) -> (d0)>
func.func @rms_bf16_2999(%arg0: tensor<64x2999xbf16>, %arg1: tensor<64x2999xbf16>, %arg2: tensor<64xf32>, %arg3: tensor<2999xbf16>) -> (tensor<64x2999xbf16>, tensor<2999xbf16>) {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 2.999000e+03 : f32
  %0 = tensor.empty() : tensor<2999xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<2999xf32>) -> tensor<2999xf32>
  // expected-remark @below {{GPU kernels rms_bf16_2999_0: resident, 128 lanes per row, 2 rows per CTA, vector 8, chunks per lane 3, prefetch, peeled rows (scalar head and tail), CTA-combined partials, single launch}}
  %full_results, %col_results = norm.mixed_reduction full(%arg1, %arg0 : tensor<64x2999xbf16>, tensor<64x2999xbf16>) row(%arg2 : tensor<64xf32>) col(%arg3 : tensor<2999xbf16>) col_init(%1 : tensor<2999xf32>) row_stages {
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
  } -> full(tensor<64x2999xbf16>) col(tensor<2999xf32>)
  %2 = tensor.empty() : tensor<2999xbf16>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%col_results : tensor<2999xf32>) outs(%2 : tensor<2999xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %4 = arith.truncf %in : f32 to bf16
    linalg.yield %4 : bf16
  } -> tensor<2999xbf16>
  return %full_results, %3 : tensor<64x2999xbf16>, tensor<2999xbf16>
}
