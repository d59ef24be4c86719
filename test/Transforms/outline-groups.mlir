// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --norm-outline-groups -verify-diagnostics | FileCheck %s
// Idempotent: a second run leaves the outlined functions alone.
// RUN: norm-opt %s -split-input-file --norm-decompose --norm-fuse-mixed-reductions --norm-outline-groups -verify-diagnostics | norm-opt -split-input-file --norm-outline-groups | FileCheck %s --check-prefix=TWICE

// Each fused group becomes @<function>_group<i>: its arguments are exactly
// the group's inputs, its results exactly its results; the host calls it
// where the group was and keeps everything else.

// CHECK-LABEL: func.func @block(
// CHECK-SAME:      %[[G:[a-z0-9]+]]: tensor<?x32xf32>, %[[W2:[a-z0-9]+]]: tensor<32x64xf32>, %[[X:[a-z0-9]+]]: tensor<?x64xf32>, %[[RSTD:[a-z0-9]+]]: tensor<?xf32>, %[[W:[a-z0-9]+]]: tensor<64xf32>, %[[W1:[a-z0-9]+]]: tensor<64x16xf32>)
// CHECK:         %[[DY:.*]] = linalg.matmul ins(%[[G]], %[[W2]]
// CHECK:         %[[R:.*]]:2 = call @block_group0(%[[X]], %[[DY]], %[[RSTD]], %[[W]]) : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<64xf32>)
// CHECK:         linalg.matmul ins(%[[R]]#0, %[[W1]]
// CHECK-NOT:     norm.mixed_reduction
// CHECK:         return
// CHECK:       func.func @block_group0(%{{.*}}: tensor<?x64xf32>, %{{.*}}: tensor<?x64xf32>, %{{.*}}: tensor<?xf32>, %{{.*}}: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<64xf32>) attributes {norm.outlined_from = "block"}
// CHECK:         linalg.fill
// CHECK:         %[[F:.*]], %[[C:.*]] = norm.mixed_reduction
// CHECK:         return %[[F]], %[[C]]
// TWICE-LABEL: func.func @block(
// TWICE:         call @block_group0
// TWICE:       func.func @block_group0
// TWICE-NOT:     {{_group[0-9]+_group|norm.outlined_from = "[a-z]+_group}}
func.func @block(%g: tensor<?x32xf32>, %w2: tensor<32x64xf32>, %x: tensor<?x64xf32>,
    %rstd: tensor<?xf32>, %w: tensor<64xf32>, %w1: tensor<64x16xf32>) -> (tensor<?x16xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %g, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%m) : tensor<?x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x64xf32>) -> tensor<?x64xf32>
  %dy = linalg.matmul ins(%g, %w2 : tensor<?x32xf32>, tensor<32x64xf32>) outs(%z : tensor<?x64xf32>) -> tensor<?x64xf32>
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xf32>)
      : tensor<?x64xf32>, tensor<?xf32> -> tensor<?x64xf32>, tensor<64xf32>
  %e1 = tensor.empty(%m) : tensor<?x16xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x16xf32>) -> tensor<?x16xf32>
  %h = linalg.matmul ins(%dx, %w1 : tensor<?x64xf32>, tensor<64x16xf32>) outs(%z1 : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %h, %dw : tensor<?x16xf32>, tensor<64xf32>
}

// -----

// bf16 activations and weight: dW's narrowing epilogue (truncf to bf16)
// goes with the group, so the outlined function returns the bf16 dW; two
// groups of different N keep their order (@two_group0, then @two_group1).
// CHECK-LABEL: func.func @two(
// CHECK:         %[[A:.*]]:2 = call @two_group0({{.*}}) : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<64xbf16>)
// CHECK:         %[[B:.*]]:3 = call @two_group1({{.*}}) : (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>)
// CHECK:         return %[[A]]#0, %[[A]]#1, %[[B]]#0, %[[B]]#1, %[[B]]#2
// CHECK:       func.func @two_group0(
// CHECK:         %[[F:.*]], %[[C:.*]] = norm.mixed_reduction
// CHECK:         %[[T:.*]] = linalg.generic {{.*}} ins(%[[C]] : tensor<64xf32>) outs(%{{.*}} : tensor<64xbf16>)
// CHECK:           arith.truncf
// CHECK:         return %[[F]], %[[T]] : tensor<8x64xbf16>, tensor<64xbf16>
// CHECK:       func.func @two_group1(
func.func @two(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %w: tensor<64xbf16>,
    %dq: tensor<8x32xf32>, %q: tensor<8x32xf32>, %qmean: tensor<8xf32>, %qrstd: tensor<8xf32>)
    -> (tensor<8x64xbf16>, tensor<64xbf16>, tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xbf16>)
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>
  %cst = arith.constant dense<1.0> : tensor<32xf32>
  %dq2, %dqw, %dqb = norm.layer_norm_grad %dq, %q, %qmean, %qrstd
      weight(%cst : tensor<32xf32>) bias(%cst : tensor<32xf32>)
      : tensor<8x32xf32>, tensor<8xf32> -> tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>
  return %dx, %dw, %dq2, %dqw, %dqb : tensor<8x64xbf16>, tensor<64xbf16>, tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>
}

// -----

// Training riders: a 0-d loss scale (an argument of the outlined function,
// read inside), dW accumulated into the previous gradient (an argument),
// and a run-time N the payload divides by (its dim is taken inside).
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#scalar = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @riders(
// CHECK:         call @riders_group0(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<f32>) -> (tensor<?x?xf32>, tensor<?xf32>)
// CHECK:       func.func @riders_group0(%{{[a-z0-9]+}}: tensor<?x?xf32>, %[[X:[a-z0-9]+]]: tensor<?x?xf32>, %{{[a-z0-9]+}}: tensor<?xf32>, %{{[a-z0-9]+}}: tensor<?xf32>, %[[PREV:[a-z0-9]+]]: tensor<?xf32>, %[[S:[a-z0-9]+]]: tensor<f32>)
// CHECK-DAG:     tensor.extract %[[S]][] : tensor<f32>
// CHECK-DAG:     tensor.dim %[[X]], %{{.*}} : tensor<?x?xf32>
// CHECK:         norm.mixed_reduction {{.*}} col_init(%[[PREV]] : tensor<?xf32>)
func.func @riders(%x: tensor<?x?xf32>, %dy: tensor<?x?xf32>, %rstd: tensor<?xf32>,
    %w: tensor<?xf32>, %scale: tensor<f32>, %prev_dw: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x?xf32>
  %nd = tensor.dim %x, %c1 : tensor<?x?xf32>
  %ni = arith.index_cast %nd : index to i64
  %n = arith.uitofp %ni : i64 to f32
  %e = tensor.empty(%m, %nd) : tensor<?x?xf32>
  %sdy = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %scale : tensor<?x?xf32>, tensor<f32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %v = arith.mulf %a, %s : f32
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  %xhat = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%rstd, %x : tensor<?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%r: f32, %a: f32, %o: f32):
    %v = arith.mulf %r, %a : f32
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  %er = tensor.empty(%m) : tensor<?xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  %s = linalg.generic {indexing_maps = [#id, #col, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sdy, %w, %xhat : tensor<?x?xf32>, tensor<?xf32>, tensor<?x?xf32>) outs(%zr : tensor<?xf32>) {
  ^bb0(%g: f32, %ww: f32, %h: f32, %o: f32):
    %wdy = arith.mulf %ww, %g : f32
    %p = arith.mulf %wdy, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<?xf32>
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sdy, %w, %xhat, %s, %rstd : tensor<?x?xf32>, tensor<?xf32>, tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%g: f32, %ww: f32, %h: f32, %a: f32, %r: f32, %o: f32):
    %wdy = arith.mulf %ww, %g : f32
    %c = arith.divf %a, %n : f32
    %t = arith.mulf %h, %c : f32
    %d = arith.subf %wdy, %t : f32
    %v = arith.mulf %d, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  %dw = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%sdy, %xhat : tensor<?x?xf32>, tensor<?x?xf32>) outs(%prev_dw : tensor<?xf32>) {
  ^bb0(%g: f32, %h: f32, %o: f32):
    %p = arith.mulf %g, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<?xf32>
  return %dx, %dw : tensor<?x?xf32>, tensor<?xf32>
}

// -----

// Inside a training loop's body; a name that is taken is made unique.
// CHECK-LABEL: func.func @loop(
// CHECK:         scf.for
// CHECK:           linalg.matmul
// CHECK:           call @loop_group0_0(
// CHECK:           call @loop_group0(
// CHECK:       func.func @loop_group0_0(
// CHECK:       func.func private @loop_group0(
func.func @loop(%g0: tensor<8x16xf32>, %wm: tensor<16x16xf32>, %x: tensor<8x16xf32>,
    %rstd: tensor<8xf32>, %w: tensor<16xf32>, %n: index) -> tensor<8x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%g = %g0) -> (tensor<8x16xf32>) {
    %dy = linalg.matmul ins(%g, %wm : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
    %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<16xf32>)
        : tensor<8x16xf32>, tensor<8xf32> -> tensor<8x16xf32>, tensor<16xf32>
    %dx2 = func.call @loop_group0(%dx, %dw) : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    scf.yield %dx2 : tensor<8x16xf32>
  }
  return %r : tensor<8x16xf32>
}
func.func private @loop_group0(tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>

// -----

// A payload that reads an f32 argument of the host: nothing a launcher
// could pass, so the group is not outlined and the pass fails.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @captured_f32(%x: tensor<8x16xf32>, %dy: tensor<8x16xf32>, %k: f32) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %er = tensor.empty() : tensor<8xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  // expected-error @+1 {{cannot outline the fused group: a payload reads a value that is neither a constant, a 0-d tensor's element nor a dim of an input}}
  %s = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %dy : tensor<8x16xf32>, tensor<8x16xf32>) outs(%zr : tensor<8xf32>) {
  ^bb0(%a: f32, %g: f32, %o: f32):
    %p = arith.mulf %a, %g : f32
    %q = arith.mulf %p, %k : f32
    %v = arith.addf %o, %q : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %dx = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %s : tensor<8x16xf32>, tensor<8xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%g: f32, %a: f32, %o: f32):
    %v = arith.subf %g, %a : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  %ec = tensor.empty() : tensor<16xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
  %dw = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<8x16xf32>) outs(%zc : tensor<16xf32>) {
  ^bb0(%g: f32, %o: f32):
    %v = arith.addf %o, %g : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %dx, %dw : tensor<8x16xf32>, tensor<16xf32>
}

// -----

// A chain (pytorch 193061: two adaLN groups sharing scale / shift): the
// second group's column sums start from the first's results, which the
// first call now returns; the second call reads them (not the erased
// group's values: the crash this guards against).
// CHECK-LABEL: func.func @adaln_chain(
// CHECK:         %[[G0:.*]]:3 = call @adaln_chain_group0(%arg1, %arg2, %arg3, %arg4, %arg0)
// CHECK:         %[[G1:.*]]:3 = call @adaln_chain_group1(%arg5, %arg6, %arg7, %arg8, %arg0, %[[G0]]#1, %[[G0]]#2)
// CHECK:         return %[[G0]]#0, %[[G1]]#0, %[[G1]]#1, %[[G1]]#2
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
