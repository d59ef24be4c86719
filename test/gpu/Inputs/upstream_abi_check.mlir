// A GPU program lowered by upstream passes only, for the H100: it runs on
// the project's runtime as its CUDA wrapper library (the mgpu* entry points
// of libnorm_runtime.so). 4096 floats x[i] = i go to the device, a kernel
// doubles them, a cluster launch of the same kernel (2 CTAs per cluster)
// doubles them again, and they come back: the program prints the number of
// elements that are not 4 i (0), then their sum (2 * 4096 * 4095 = 33546240),
// and returns the first as its exit status.
// test/gpu/build_upstream_abi_check.sh lowers, compiles and links it.
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
  func.func @main() -> i32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c32 = arith.constant 32 : index
    %c128 = arith.constant 128 : index
    %n = arith.constant 4096 : index
    %four = arith.constant 4.0 : f32
    %zero = arith.constant 0.0 : f32
    %h = memref.alloc(%n) : memref<?xf32>
    scf.for %i = %c0 to %n step %c1 {
      %ii = arith.index_cast %i : index to i64
      %f = arith.sitofp %ii : i64 to f32
      memref.store %f, %h[%i] : memref<?xf32>
    }
    %t0 = gpu.wait async
    %d, %t1 = gpu.alloc async [%t0] (%n) : memref<?xf32>
    %t2 = gpu.memcpy async [%t1] %d, %h : memref<?xf32>, memref<?xf32>
    %t3 = gpu.launch_func async [%t2] @kernels::@scale blocks in (%c32, %c1, %c1) threads in (%c128, %c1, %c1) args(%d : memref<?xf32>, %n : index)
    %t4 = gpu.launch_func async [%t3] @kernels::@scale clusters in (%c2, %c1, %c1) blocks in (%c32, %c1, %c1) threads in (%c128, %c1, %c1) args(%d : memref<?xf32>, %n : index)
    %t5 = gpu.memcpy async [%t4] %h, %d : memref<?xf32>, memref<?xf32>
    %t6 = gpu.dealloc async [%t5] %d : memref<?xf32>
    gpu.wait [%t6]
    %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%bad = %c0, %sum = %zero) -> (index, f32) {
      %v = memref.load %h[%i] : memref<?xf32>
      %ii = arith.index_cast %i : index to i64
      %f = arith.sitofp %ii : i64 to f32
      %want = arith.mulf %f, %four : f32
      %ok = arith.cmpf oeq, %v, %want : f32
      %b1 = arith.addi %bad, %c1 : index
      %nb = arith.select %ok, %bad, %b1 : index
      %ns = arith.addf %sum, %v : f32
      scf.yield %nb, %ns : index, f32
    }
    vector.print %r#0 : index
    vector.print %r#1 : f32
    memref.dealloc %h : memref<?xf32>
    %status = arith.index_cast %r#0 : index to i32
    return %status : i32
  }
}
