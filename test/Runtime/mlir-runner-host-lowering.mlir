// A function with a fused group lowered in place (--convert-norm-to-gpu-
// launch) and everything else by upstream passes runs under mlir-runner
// with the project's runtime: one launch sequence per call, on the fake
// driver of the unit tests (no GPU here; FAKECUDA_REPORT prints what the
// program did at exit). The same program with a run-time N of 0 fails its
// check before any launch: the runtime prints why and cf.assert stops it.
// UNSUPPORTED: sanitizer
//
// RUN: norm-opt %s --norm-lower-to-nvvm --convert-norm-to-gpu-launch | norm-opt -pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},convert-linalg-to-loops,convert-scf-to-cf,expand-strided-metadata,finalize-memref-to-llvm,gpu-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)' -o %t.mlir
// RUN: env NORMRT_LIBCUDA=%fakecuda FAKECUDA_REPORT=1 mlir-runner %t.mlir -e main -entry-point-result=void --shared-libs=%norm_runtime 2>&1 | FileCheck %s
// RUN: sed -e 's/%cols = arith.constant 256/%cols = arith.constant 0/' %s | norm-opt --norm-lower-to-nvvm --convert-norm-to-gpu-launch | norm-opt -pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},convert-linalg-to-loops,convert-scf-to-cf,expand-strided-metadata,finalize-memref-to-llvm,gpu-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)' -o %t.bad.mlir
// RUN: not --crash env NORMRT_LIBCUDA=%fakecuda mlir-runner %t.bad.mlir -e main -entry-point-result=void --shared-libs=%norm_runtime 2>&1 | FileCheck %s --check-prefix=BAD

// Two calls: per call the two results are allocated on the stream, and the
// grid fits the fake device, so the main kernel finishes dW itself in one
// cooperative launch; the module loads once and the kernel is looked up
// once; 7 allocations: 2 results x 2 calls, and the runtime's workspace and
// grid-barrier words, made once and kept. Nothing is printed.
// CHECK-NOT: normrt:
// CHECK: fakecuda: modules=1 lookups=1 launches=2 cluster_launches=0 allocs=7 {{.*}}violations=0

// BAD: normrt: @rms_dyn: rows must be >= 0 and cols >= 1
// BAD-NOT: fakecuda
module {
  func.func @rms_dyn(%dy: tensor<?x?xf32>, %x: tensor<?x?xf32>, %rstd: tensor<?xf32>, %w: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
    %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<?xf32>)
        : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>, tensor<?xf32>
    return %dx, %dw : tensor<?x?xf32>, tensor<?xf32>
  }
  func.func @main() {
    %rows = arith.constant 64 : index
    %cols = arith.constant 256 : index
    %one = arith.constant 1.0 : f32
    %e2 = tensor.empty(%rows, %cols) : tensor<?x?xf32>
    %full = linalg.fill ins(%one : f32) outs(%e2 : tensor<?x?xf32>) -> tensor<?x?xf32>
    %er = tensor.empty(%rows) : tensor<?xf32>
    %rstd = linalg.fill ins(%one : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
    %ew = tensor.empty(%cols) : tensor<?xf32>
    %w = linalg.fill ins(%one : f32) outs(%ew : tensor<?xf32>) -> tensor<?xf32>
    %a:2 = call @rms_dyn(%full, %full, %rstd, %w) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>)
    %b:2 = call @rms_dyn(%full, %full, %rstd, %w) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>)
    return
  }
}
