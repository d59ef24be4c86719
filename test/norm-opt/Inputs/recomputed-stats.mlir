// A LayerNorm backward that recomputes its statistics from x: rstd is
// math.rsqrt, which the GPU lowering turns into a libdevice call
// (compile-libdevice.test). From test/Transforms/fuse-mixed-reductions.mlir.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// Statistics recomputed from x inside the backward: mean, then the variance
// over x - mean, then rstd per row, then the dx reductions: three chained
// row stages over one domain.
func.func @recomputed_statistics(%x: tensor<32x768xf32>, %dy: tensor<32x768xf32>, %w: tensor<768xf32>)
    -> (tensor<32x768xf32>, tensor<768xf32>, tensor<768xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 768.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e = tensor.empty() : tensor<32x768xf32>
  %er = tensor.empty() : tensor<32xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<32xf32>) -> tensor<32xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<32x768xf32>) outs(%zr : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  %mean = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%sum : tensor<32xf32>) outs(%er : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.divf %a, %n : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  %xc = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : tensor<32x768xf32>, tensor<32xf32>) outs(%e : tensor<32x768xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %v = arith.subf %a, %m : f32
    linalg.yield %v : f32
  } -> tensor<32x768xf32>
  %ssq = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%xc : tensor<32x768xf32>) outs(%zr : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %sq = arith.mulf %a, %a : f32
    %v = arith.addf %o, %sq : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  %rstd = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%ssq : tensor<32xf32>) outs(%er : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %var = arith.divf %a, %n : f32
    %ve = arith.addf %var, %eps : f32
    %v = math.rsqrt %ve : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  %xhat = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xc, %rstd : tensor<32x768xf32>, tensor<32xf32>) outs(%e : tensor<32x768xf32>) {
  ^bb0(%a: f32, %r: f32, %o: f32):
    %v = arith.mulf %a, %r : f32
    linalg.yield %v : f32
  } -> tensor<32x768xf32>
  %wdy = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w : tensor<32x768xf32>, tensor<768xf32>) outs(%e : tensor<32x768xf32>) {
  ^bb0(%g: f32, %ww: f32, %o: f32):
    %v = arith.mulf %g, %ww : f32
    linalg.yield %v : f32
  } -> tensor<32x768xf32>
  %s:2 = linalg.generic {indexing_maps = [#id, #id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%xhat, %wdy : tensor<32x768xf32>, tensor<32x768xf32>) outs(%zr, %zr : tensor<32xf32>, tensor<32xf32>) {
  ^bb0(%h: f32, %g: f32, %o1: f32, %o2: f32):
    %p = arith.mulf %h, %g : f32
    %v1 = arith.addf %o1, %p : f32
    %v2 = arith.addf %o2, %g : f32
    linalg.yield %v1, %v2 : f32, f32
  } -> (tensor<32xf32>, tensor<32xf32>)
  %dx = linalg.generic {indexing_maps = [#id, #id, #row, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xhat, %wdy, %s#0, %s#1, %rstd : tensor<32x768xf32>, tensor<32x768xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) outs(%e : tensor<32x768xf32>) {
  ^bb0(%h: f32, %g: f32, %a: f32, %b: f32, %r: f32, %o: f32):
    %c1 = arith.divf %a, %n : f32
    %c2 = arith.divf %b, %n : f32
    %t = arith.mulf %h, %c1 : f32
    %u = arith.addf %t, %c2 : f32
    %d = arith.subf %g, %u : f32
    %v = arith.mulf %d, %r : f32
    linalg.yield %v : f32
  } -> tensor<32x768xf32>
  %ec = tensor.empty() : tensor<768xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<768xf32>) -> tensor<768xf32>
  %dw = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %xhat : tensor<32x768xf32>, tensor<32x768xf32>) outs(%zc : tensor<768xf32>) {
  ^bb0(%g: f32, %h: f32, %o: f32):
    %p = arith.mulf %g, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<768xf32>
  %db = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<32x768xf32>) outs(%zc : tensor<768xf32>) {
  ^bb0(%g: f32, %o: f32):
    %v = arith.addf %o, %g : f32
    linalg.yield %v : f32
  } -> tensor<768xf32>
  return %dx, %dw, %db : tensor<32x768xf32>, tensor<768xf32>, tensor<768xf32>
}
