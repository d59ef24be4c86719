// RUN: norm-opt %s -split-input-file -norm-fuse-mixed-reductions="row-only=true" -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s
// RUN: norm-opt %s -split-input-file -norm-fuse-mixed-reductions="remarks=true" -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=DEFAULT
// RUN: norm-opt %s -split-input-file -norm-fuse-mixed-reductions="row-only=true" -o %t.mlir
// RUN: norm-opt compile %t.mlir --emit=ptx -o %t.ptx
// RUN: grep -c '^.visible .entry' %t.ptx | FileCheck %s --check-prefix=KERNELS

// A LayerNorm backward without affine parameters (OLMo's): two row
// reductions, dx, no column reduction. With row-only=true it is one group
// (one pass over the rows, no partials); by default it is left alone with
// a remark. The fused op's location lists its members' (a FusedLoc): a host
// compiler reads from it which of its ops the group took.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @layer_norm_no_affine
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<?x64xf32>) row(%{{.*}}, %{{.*}} : tensor<?xf32>, tensor<?xf32>)
// CHECK-NOT:       col(
// CHECK:         -> full(tensor<?x64xf32>) loc(fused["sum_dy", "xhat", "dy_xhat", "sum_dy_xhat", "dx"])
// CHECK-NOT:     linalg.generic
// DEFAULT: remark: {{.*}}not fused: no additive column reduction (over the rows) shares its inputs (row-only groups: row-only=true)
// The main, scalar, latency and latency scalar kernels and the final one.
// KERNELS: 5
func.func @layer_norm_no_affine(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>,
    %mean: tensor<?xf32>, %rstd: tensor<?xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x64xf32>
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty(%rows) : tensor<?xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  %sdy = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%dy : tensor<?x64xf32>) outs(%zr : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<?xf32> loc("sum_dy")
  %ef = tensor.empty(%rows) : tensor<?x64xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean, %rstd : tensor<?x64xf32>, tensor<?xf32>, tensor<?xf32>) outs(%ef : tensor<?x64xf32>) {
  ^bb0(%a: f32, %m: f32, %r: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %v = arith.mulf %d, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x64xf32> loc("xhat")
  %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %xhat : tensor<?x64xf32>, tensor<?x64xf32>) outs(%ef : tensor<?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<?x64xf32> loc("dy_xhat")
  %sp = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<?x64xf32>) outs(%zr : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<?xf32> loc("sum_dy_xhat")
  %dx = linalg.generic {indexing_maps = [#id, #id, #row, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %xhat, %sdy, %sp, %rstd : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) outs(%ef : tensor<?x64xf32>) {
  ^bb0(%g: f32, %h: f32, %s1: f32, %s2: f32, %r: f32, %o: f32):
    %n = arith.constant 64.0 : f32
    %a1 = arith.divf %s1, %n : f32
    %a2 = arith.divf %s2, %n : f32
    %t1 = arith.subf %g, %a1 : f32
    %t2 = arith.mulf %h, %a2 : f32
    %t3 = arith.subf %t1, %t2 : f32
    %v = arith.mulf %t3, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x64xf32> loc("dx")
  return %dx : tensor<?x64xf32>
}
