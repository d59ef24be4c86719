// RUN: norm-opt %s -split-input-file --norm-fuse-mixed-reductions | FileCheck %s
// RUN: norm-opt %s -split-input-file --norm-fuse-mixed-reductions='remarks=true' -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// Every adaLN group is batched rows: the GPU pipeline's multi-axis=batched
// fuses them all alike.
// RUN: norm-opt %s -split-input-file --norm-fuse-mixed-reductions=multi-axis=batched | FileCheck %s
// RUN: not norm-opt %s -split-input-file --norm-fuse-mixed-reductions=multi-axis=maybe -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: error: invalid value 'maybe' of the option multi-axis: expected true, false, batched or gpu

// The adaLN-modulated LayerNorm backward (DiT, SD3, Flux; issue 42) as a
// front end spells it: x [B, S, N], a LayerNorm without affine modulated by
// (1 + scale[b, n]); d(scale) and d(shift) [B, N] sum over each sample's S
// tokens only. Here the shared-parameter chain of pytorch issue 193061:
// two modulated LayerNorms sharing scale / shift, the second's sums
// accumulating into the first's.
//
// A 2-D group over [rows, N] would sum the column reductions over every
// row, adding the samples together (Inductor's silent wrong gradient in
// 193061). Each modulated LayerNorm is one multi-axis group instead: rows
// sum over N (dim 2), columns keep (B, N), so (1 + scale) and d(scale),
// d(shift) are [B, N]. The second group's column sums start from the
// first's (the shared parameters). (test/Numerics/adaln.test runs this
// spelling against float64.)

// CHECK-LABEL: func.func @adaln_chain
// CHECK-SAME:    (%[[SCALE:[^:]*]]: tensor<2x8xf32>,
// CHECK:         %[[A:.*]], %[[AC:.*]]:2 = norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<2x3x8xf32>, tensor<2x3x8xf32>) row(%{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32>) col(%[[SCALE]] : tensor<2x8xf32>) col_init(%[[Z:.*]], %[[Z]] : tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK:         } {col_dims = array<i64: 0, 2>, row_sum_dims = array<i64: 2>} -> full(tensor<2x3x8xf32>) col(tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK:         %[[B:.*]], %[[BC:.*]]:2 = norm.mixed_reduction full({{.*}}) row({{.*}}) col(%[[SCALE]] : tensor<2x8xf32>) col_init(%[[AC]]#0, %[[AC]]#1 : tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK:         } {col_dims = array<i64: 0, 2>, row_sum_dims = array<i64: 2>}
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[A]], %[[B]], %[[BC]]#0, %[[BC]]#1
// REMARK-COUNT-2: remark: fused a mixed-order reduction group of 7 ops: 2 row reduction(s) in 1 stage(s), 2 column reduction(s), 3 elementwise op(s)
func.func @adaln_chain(%scale: tensor<2x8xf32>, %dy1: tensor<2x3x8xf32>, %x1: tensor<2x3x8xf32>, %mean1: tensor<2x3xf32>, %rstd1: tensor<2x3xf32>, %dy2: tensor<2x3x8xf32>, %x2: tensor<2x3x8xf32>, %mean2: tensor<2x3xf32>, %rstd2: tensor<2x3xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %nf = arith.constant 8.0 : f32
  %zr0 = tensor.empty() : tensor<2x3xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%zr0 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %zc0 = tensor.empty() : tensor<2x8xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%zc0 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %ee = tensor.empty() : tensor<2x3x8xf32>
  %xhat1 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x1, %mean1, %rstd1 : tensor<2x3x8xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%ee : tensor<2x3x8xf32>) {
    ^bb0(%a: f32, %m: f32, %r: f32, %o: f32):
      %d = arith.subf %a, %m : f32
      %h = arith.mulf %d, %r : f32
      linalg.yield %h : f32
  } -> tensor<2x3x8xf32>
  %g1 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy1, %scale : tensor<2x3x8xf32>, tensor<2x8xf32>) outs(%ee : tensor<2x3x8xf32>) {
    ^bb0(%d: f32, %s: f32, %o: f32):
      %one = arith.constant 1.0 : f32
      %w = arith.addf %s, %one : f32
      %p = arith.mulf %d, %w : f32
      linalg.yield %p : f32
  } -> tensor<2x3x8xf32>
  %s1_1 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g1, %xhat1 : tensor<2x3x8xf32>, tensor<2x3x8xf32>) outs(%zr : tensor<2x3xf32>) {
    ^bb0(%a: f32, %h: f32, %o: f32):
      %p = arith.mulf %a, %h : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  } -> tensor<2x3xf32>
  %s2_1 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g1 : tensor<2x3x8xf32>) outs(%zr : tensor<2x3xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.addf %o, %a : f32
      linalg.yield %v : f32
  } -> tensor<2x3xf32>
  %dx1 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g1, %xhat1, %s1_1, %s2_1, %rstd1 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%ee : tensor<2x3x8xf32>) {
    ^bb0(%a: f32, %h: f32, %p: f32, %q: f32, %r: f32, %o: f32):
      %pm = arith.divf %p, %nf : f32
      %qm = arith.divf %q, %nf : f32
      %hp = arith.mulf %h, %pm : f32
      %t1 = arith.subf %a, %qm : f32
      %t2 = arith.subf %t1, %hp : f32
      %v = arith.mulf %t2, %r : f32
      linalg.yield %v : f32
  } -> tensor<2x3x8xf32>
  %dscale1 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dy1, %xhat1 : tensor<2x3x8xf32>, tensor<2x3x8xf32>) outs(%zc : tensor<2x8xf32>) {
    ^bb0(%d: f32, %h: f32, %o: f32):
      %p = arith.mulf %d, %h : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  } -> tensor<2x8xf32>
  %dshift1 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dy1 : tensor<2x3x8xf32>) outs(%zc : tensor<2x8xf32>) {
    ^bb0(%d: f32, %o: f32):
      %v = arith.addf %o, %d : f32
      linalg.yield %v : f32
  } -> tensor<2x8xf32>
  %xhat2 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x2, %mean2, %rstd2 : tensor<2x3x8xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%ee : tensor<2x3x8xf32>) {
    ^bb0(%a: f32, %m: f32, %r: f32, %o: f32):
      %d = arith.subf %a, %m : f32
      %h = arith.mulf %d, %r : f32
      linalg.yield %h : f32
  } -> tensor<2x3x8xf32>
  %g2 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy2, %scale : tensor<2x3x8xf32>, tensor<2x8xf32>) outs(%ee : tensor<2x3x8xf32>) {
    ^bb0(%d: f32, %s: f32, %o: f32):
      %one = arith.constant 1.0 : f32
      %w = arith.addf %s, %one : f32
      %p = arith.mulf %d, %w : f32
      linalg.yield %p : f32
  } -> tensor<2x3x8xf32>
  %s1_2 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g2, %xhat2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>) outs(%zr : tensor<2x3xf32>) {
    ^bb0(%a: f32, %h: f32, %o: f32):
      %p = arith.mulf %a, %h : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  } -> tensor<2x3xf32>
  %s2_2 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g2 : tensor<2x3x8xf32>) outs(%zr : tensor<2x3xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.addf %o, %a : f32
      linalg.yield %v : f32
  } -> tensor<2x3xf32>
  %dx2 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g2, %xhat2, %s1_2, %s2_2, %rstd2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%ee : tensor<2x3x8xf32>) {
    ^bb0(%a: f32, %h: f32, %p: f32, %q: f32, %r: f32, %o: f32):
      %pm = arith.divf %p, %nf : f32
      %qm = arith.divf %q, %nf : f32
      %hp = arith.mulf %h, %pm : f32
      %t1 = arith.subf %a, %qm : f32
      %t2 = arith.subf %t1, %hp : f32
      %v = arith.mulf %t2, %r : f32
      linalg.yield %v : f32
  } -> tensor<2x3x8xf32>
  %dscale2 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dy2, %xhat2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>) outs(%dscale1 : tensor<2x8xf32>) {
    ^bb0(%d: f32, %h: f32, %o: f32):
      %p = arith.mulf %d, %h : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  } -> tensor<2x8xf32>
  %dshift2 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dy2 : tensor<2x3x8xf32>) outs(%dshift1 : tensor<2x8xf32>) {
    ^bb0(%d: f32, %o: f32):
      %v = arith.addf %o, %d : f32
      linalg.yield %v : f32
  } -> tensor<2x8xf32>
  return %dx1, %dx2, %dscale2, %dshift2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// The same backward in named ops (linalg.reduce over dims [2] for the row
// sums and [1] for d(scale) / d(shift), linalg.broadcast, linalg.map and
// the elementwise named ops): one multi-axis group.

// CHECK-LABEL: func.func @adaln_named
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<2x4x16xf32>, tensor<2x4x16xf32>) row(%{{.*}} : tensor<2x4xf32>) col(%{{.*}} : tensor<2x16xf32>)
// CHECK:         } {col_dims = array<i64: 0, 2>, row_sum_dims = array<i64: 2>} -> full(tensor<2x4x16xf32>) col(tensor<2x16xf32>, tensor<2x16xf32>)
// CHECK-NOT:     linalg.
// CHECK:         return
// REMARK:        remark: fused a mixed-order reduction group of 16 ops: 2 row reduction(s) in 1 stage(s), 2 column reduction(s), 12 elementwise op(s)
// REMARK-NOT:    remark: not fused
func.func @adaln_named(%xhat: tensor<2x4x16xf32>, %dy: tensor<2x4x16xf32>, %rstd: tensor<2x4xf32>, %scale: tensor<2x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %invn = arith.constant 0.0625 : f32
  %e3 = tensor.empty() : tensor<2x4x16xf32>
  %e2 = tensor.empty() : tensor<2x16xf32>
  %er = tensor.empty() : tensor<2x4xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<2x4xf32>) -> tensor<2x4xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x16xf32>) -> tensor<2x16xf32>
  %w = linalg.map ins(%scale : tensor<2x16xf32>) outs(%e2 : tensor<2x16xf32>)
    (%s: f32, %o: f32) { %v = arith.addf %s, %one : f32
      linalg.yield %v : f32 }
  %wb = linalg.broadcast ins(%w : tensor<2x16xf32>) outs(%e3 : tensor<2x4x16xf32>) dimensions = [1]
  %g = linalg.mul ins(%dy, %wb : tensor<2x4x16xf32>, tensor<2x4x16xf32>) outs(%e3 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %p = linalg.mul ins(%g, %xhat : tensor<2x4x16xf32>, tensor<2x4x16xf32>) outs(%e3 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s1 = linalg.reduce ins(%p : tensor<2x4x16xf32>) outs(%zr : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %acc: f32) { %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32 }
  %s2 = linalg.reduce ins(%g : tensor<2x4x16xf32>) outs(%zr : tensor<2x4xf32>) dimensions = [2]
    (%in: f32, %acc: f32) { %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32 }
  %s1b = linalg.broadcast ins(%s1 : tensor<2x4xf32>) outs(%e3 : tensor<2x4x16xf32>) dimensions = [2]
  %s2b = linalg.broadcast ins(%s2 : tensor<2x4xf32>) outs(%e3 : tensor<2x4x16xf32>) dimensions = [2]
  %rb = linalg.broadcast ins(%rstd : tensor<2x4xf32>) outs(%e3 : tensor<2x4x16xf32>) dimensions = [2]
  %t = linalg.mul ins(%xhat, %s1b : tensor<2x4x16xf32>, tensor<2x4x16xf32>) outs(%e3 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %u = linalg.add ins(%t, %s2b : tensor<2x4x16xf32>, tensor<2x4x16xf32>) outs(%e3 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %um = linalg.map ins(%u : tensor<2x4x16xf32>) outs(%e3 : tensor<2x4x16xf32>)
    (%a: f32, %o: f32) { %m = arith.mulf %a, %invn : f32
      linalg.yield %m : f32 }
  %d = linalg.sub ins(%g, %um : tensor<2x4x16xf32>, tensor<2x4x16xf32>) outs(%e3 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %dx = linalg.mul ins(%d, %rb : tensor<2x4x16xf32>, tensor<2x4x16xf32>) outs(%e3 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %q = linalg.mul ins(%dy, %xhat : tensor<2x4x16xf32>, tensor<2x4x16xf32>) outs(%e3 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %dscale = linalg.reduce ins(%q : tensor<2x4x16xf32>) outs(%zc : tensor<2x16xf32>) dimensions = [1]
    (%in: f32, %acc: f32) { %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32 }
  %dshift = linalg.reduce ins(%dy : tensor<2x4x16xf32>) outs(%zc : tensor<2x16xf32>) dimensions = [1]
    (%in: f32, %acc: f32) { %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32 }
  return %dx, %dscale, %dshift : tensor<2x4x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>
}

// -----

// Inside a whole graph: dy from a batch_matmul, dx into another, and a
// 2-D RMSNorm group of another N in the same function. The matmuls stay
// as they are (opaque neighbours); each norm is its own group.

// CHECK-LABEL: func.func @adaln_in_graph
// CHECK:         %[[DY:.*]] = linalg.batch_matmul
// CHECK:         %[[DX:.*]], %[[DC:.*]]:2 = norm.mixed_reduction full(%[[DY]], %{{.*}} : tensor<2x3x8xf32>, tensor<2x3x8xf32>)
// CHECK:         } {col_dims = array<i64: 0, 2>, row_sum_dims = array<i64: 2>}
// CHECK:         %[[OUT:.*]] = linalg.batch_matmul ins(%[[DX]], %{{.*}} : tensor<2x3x8xf32>, tensor<2x8x5xf32>)
// CHECK:         %[[DX2:.*]], %[[DW2:.*]] = norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<6x16xf32>, tensor<6x16xf32>)
// CHECK-NOT:     row_sum_dims
// CHECK:         return %[[OUT]], %[[DC]]#0, %[[DC]]#1, %[[DX2]], %[[DW2]]
// REMARK-COUNT-2: remark: not fused: a contraction
// REMARK:        remark: fused a mixed-order reduction group of 7 ops
// REMARK:        remark: fused a mixed-order reduction group of 5 ops
func.func @adaln_in_graph(%a: tensor<2x3x4xf32>, %bm: tensor<2x4x8xf32>, %x: tensor<2x3x8xf32>, %mean: tensor<2x3xf32>, %rstd: tensor<2x3xf32>, %scale: tensor<2x8xf32>, %wout: tensor<2x8x5xf32>, %x2: tensor<6x16xf32>, %dy2: tensor<6x16xf32>, %rstd2: tensor<6xf32>, %w2: tensor<16xf32>) -> (tensor<2x3x5xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<6x16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %nf = arith.constant 8.0 : f32
  %n2 = arith.constant 16.0 : f32
  %em = tensor.empty() : tensor<2x3x8xf32>
  %zm = linalg.fill ins(%zero : f32) outs(%em : tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %dy = linalg.batch_matmul ins(%a, %bm : tensor<2x3x4xf32>, tensor<2x4x8xf32>) outs(%zm : tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %zr0 = tensor.empty() : tensor<2x3xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%zr0 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %zc0 = tensor.empty() : tensor<2x8xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%zc0 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %ee = tensor.empty() : tensor<2x3x8xf32>
  %xhat = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %mean, %rstd : tensor<2x3x8xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%ee : tensor<2x3x8xf32>) {
    ^bb0(%v: f32, %m: f32, %r: f32, %o: f32):
      %d = arith.subf %v, %m : f32
      %h = arith.mulf %d, %r : f32
      linalg.yield %h : f32
  } -> tensor<2x3x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy, %scale : tensor<2x3x8xf32>, tensor<2x8xf32>) outs(%ee : tensor<2x3x8xf32>) {
    ^bb0(%d: f32, %s: f32, %o: f32):
      %one = arith.constant 1.0 : f32
      %w = arith.addf %s, %one : f32
      %p = arith.mulf %d, %w : f32
      linalg.yield %p : f32
  } -> tensor<2x3x8xf32>
  %s1 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g, %xhat : tensor<2x3x8xf32>, tensor<2x3x8xf32>) outs(%zr : tensor<2x3xf32>) {
    ^bb0(%p0: f32, %h: f32, %o: f32):
      %p = arith.mulf %p0, %h : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  } -> tensor<2x3xf32>
  %s2 = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g : tensor<2x3x8xf32>) outs(%zr : tensor<2x3xf32>) {
    ^bb0(%p0: f32, %o: f32):
      %v = arith.addf %o, %p0 : f32
      linalg.yield %v : f32
  } -> tensor<2x3xf32>
  %dx = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s)>, affine_map<(b, s, n) -> (b, s, n)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g, %xhat, %s1, %s2, %rstd : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%ee : tensor<2x3x8xf32>) {
    ^bb0(%p0: f32, %h: f32, %p: f32, %q: f32, %r: f32, %o: f32):
      %pm = arith.divf %p, %nf : f32
      %qm = arith.divf %q, %nf : f32
      %hp = arith.mulf %h, %pm : f32
      %t1 = arith.subf %p0, %qm : f32
      %t2 = arith.subf %t1, %hp : f32
      %v = arith.mulf %t2, %r : f32
      linalg.yield %v : f32
  } -> tensor<2x3x8xf32>
  %dscale = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dy, %xhat : tensor<2x3x8xf32>, tensor<2x3x8xf32>) outs(%zc : tensor<2x8xf32>) {
    ^bb0(%d: f32, %h: f32, %o: f32):
      %p = arith.mulf %d, %h : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  } -> tensor<2x8xf32>
  %dshift = linalg.generic {indexing_maps = [affine_map<(b, s, n) -> (b, s, n)>, affine_map<(b, s, n) -> (b, n)>], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dy : tensor<2x3x8xf32>) outs(%zc : tensor<2x8xf32>) {
    ^bb0(%d: f32, %o: f32):
      %v = arith.addf %o, %d : f32
      linalg.yield %v : f32
  } -> tensor<2x8xf32>
  %eo = tensor.empty() : tensor<2x3x5xf32>
  %zo = linalg.fill ins(%zero : f32) outs(%eo : tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %out = linalg.batch_matmul ins(%dx, %wout : tensor<2x3x8xf32>, tensor<2x8x5xf32>) outs(%zo : tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %e2 = tensor.empty() : tensor<6x16xf32>
  %er2 = tensor.empty() : tensor<6xf32>
  %zr2 = linalg.fill ins(%zero : f32) outs(%er2 : tensor<6xf32>) -> tensor<6xf32>
  %ec2 = tensor.empty() : tensor<16xf32>
  %zc2 = linalg.fill ins(%zero : f32) outs(%ec2 : tensor<16xf32>) -> tensor<16xf32>
  %xh2 = linalg.generic {indexing_maps = [affine_map<(r, n) -> (r, n)>, affine_map<(r, n) -> (r)>, affine_map<(r, n) -> (r, n)>], iterator_types = ["parallel", "parallel"]}
      ins(%x2, %rstd2 : tensor<6x16xf32>, tensor<6xf32>) outs(%e2 : tensor<6x16xf32>) {
    ^bb0(%v: f32, %r: f32, %o: f32):
      %h = arith.mulf %v, %r : f32
      linalg.yield %h : f32
  } -> tensor<6x16xf32>
  %wdy = linalg.generic {indexing_maps = [affine_map<(r, n) -> (r, n)>, affine_map<(r, n) -> (n)>, affine_map<(r, n) -> (r, n)>], iterator_types = ["parallel", "parallel"]}
      ins(%dy2, %w2 : tensor<6x16xf32>, tensor<16xf32>) outs(%e2 : tensor<6x16xf32>) {
    ^bb0(%d: f32, %w: f32, %o: f32):
      %p = arith.mulf %d, %w : f32
      linalg.yield %p : f32
  } -> tensor<6x16xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(r, n) -> (r, n)>, affine_map<(r, n) -> (r, n)>, affine_map<(r, n) -> (r)>], iterator_types = ["parallel", "reduction"]}
      ins(%xh2, %wdy : tensor<6x16xf32>, tensor<6x16xf32>) outs(%zr2 : tensor<6xf32>) {
    ^bb0(%h: f32, %w: f32, %o: f32):
      %p = arith.mulf %h, %w : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  } -> tensor<6xf32>
  %dx2 = linalg.generic {indexing_maps = [affine_map<(r, n) -> (r, n)>, affine_map<(r, n) -> (r, n)>, affine_map<(r, n) -> (r)>, affine_map<(r, n) -> (r)>, affine_map<(r, n) -> (r, n)>], iterator_types = ["parallel", "parallel"]}
      ins(%xh2, %wdy, %rs, %rstd2 : tensor<6x16xf32>, tensor<6x16xf32>, tensor<6xf32>, tensor<6xf32>) outs(%e2 : tensor<6x16xf32>) {
    ^bb0(%h: f32, %w: f32, %s: f32, %r: f32, %o: f32):
      %m = arith.divf %s, %n2 : f32
      %hm = arith.mulf %h, %m : f32
      %t = arith.subf %w, %hm : f32
      %v = arith.mulf %t, %r : f32
      linalg.yield %v : f32
  } -> tensor<6x16xf32>
  %dw2 = linalg.generic {indexing_maps = [affine_map<(r, n) -> (r, n)>, affine_map<(r, n) -> (r, n)>, affine_map<(r, n) -> (n)>], iterator_types = ["reduction", "parallel"]}
      ins(%dy2, %xh2 : tensor<6x16xf32>, tensor<6x16xf32>) outs(%zc2 : tensor<16xf32>) {
    ^bb0(%d: f32, %h: f32, %o: f32):
      %p = arith.mulf %d, %h : f32
      %v = arith.addf %o, %p : f32
      linalg.yield %v : f32
  } -> tensor<16xf32>
  return %out, %dscale, %dshift, %dx2, %dw2 : tensor<2x3x5xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<6x16xf32>, tensor<16xf32>
}

