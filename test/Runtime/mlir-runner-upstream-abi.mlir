// A GPU program lowered by upstream passes only (gpu-module-to-binary,
// gpu-to-llvm) runs under mlir-runner with the project's runtime as its
// CUDA wrapper library: libnorm_runtime.so exports the mgpu* entry points
// the lowering calls. No GPU here: the runtime runs on the fake driver of
// the unit tests, which counts what the program did and prints it at exit
// (FAKECUDA_REPORT). An instrumented runtime cannot be loaded by the
// uninstrumented mlir-runner.
// UNSUPPORTED: sanitizer
//
// RUN: norm-opt %s -pass-pipeline='builtin.module(gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm),gpu-module-to-binary{format=isa},expand-strided-metadata,finalize-memref-to-llvm,gpu-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,reconcile-unrealized-casts)' -o %t.mlir
// RUN: FileCheck %s --check-prefix=LLVM < %t.mlir
// RUN: env NORMRT_LIBCUDA=%fakecuda FAKECUDA_REPORT=1 mlir-runner %t.mlir -e main -entry-point-result=void --shared-libs=%norm_runtime 2>&1 | FileCheck %s

// The upstream lowering reached the LLVM dialect, launches intact.
// LLVM: gpu.binary @kernels
// LLVM: llvm.call @mgpuStreamCreate()
// LLVM: llvm.call @mgpuMemAlloc(
// LLVM: gpu.launch_func <%{{.*}} : !llvm.ptr> @kernels::@scale
// LLVM: gpu.launch_func <%{{.*}} : !llvm.ptr> @kernels::@scale clusters in
// LLVM: llvm.call @mgpuMemcpy(
// LLVM: llvm.call @mgpuMemFree(
// LLVM: llvm.call @mgpuStreamSynchronize(
// LLVM: llvm.call @mgpuStreamDestroy(

// Two launches (one of a cluster shape), one allocation freed, one copy,
// one stream made and destroyed, nothing left behind, no error printed.
// CHECK-NOT: normrt:
// CHECK: fakecuda: modules=1 lookups=1 launches=2 cluster_launches=1 allocs=1 frees=1 async_allocs=0 async_frees=0 memcpys=1 streams=1 live_streams=0 live_allocations=0 violations=0

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    gpu.func @scale(%p: memref<?xf32>, %n: index) kernel {
      %i = gpu.global_id x
      %in = arith.cmpi ult, %i, %n : index
      scf.if %in {
        %v = memref.load %p[%i] : memref<?xf32>
        %w = arith.addf %v, %v : f32
        memref.store %w, %p[%i] : memref<?xf32>
      }
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %smem = arith.constant 0 : i32
    %t0 = gpu.wait async
    %d, %t1 = gpu.alloc async [%t0] (%c128) : memref<?xf32>
    %t2 = gpu.launch_func async [%t1] @kernels::@scale blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) dynamic_shared_memory_size %smem args(%d : memref<?xf32>, %c128 : index)
    %t3 = gpu.launch_func async [%t2] @kernels::@scale clusters in (%c2, %c1, %c1) blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) args(%d : memref<?xf32>, %c128 : index)
    %h = memref.alloc(%c128) : memref<?xf32>
    %t4 = gpu.memcpy async [%t3] %h, %d : memref<?xf32>, memref<?xf32>
    %t5 = gpu.dealloc async [%t4] %d : memref<?xf32>
    gpu.wait [%t5]
    memref.dealloc %h : memref<?xf32>
    return
  }
}
