// ConvNeXt's LayerNorm2d backward, x [B, 96, S] f32 (channels-first:
// N is dim 1), as linalg; compile.test builds a library of it.
#x = affine_map<(b, c, s) -> (b, c, s)>
#st = affine_map<(b, c, s) -> (b, s)>
#w = affine_map<(b, c, s) -> (c)>
func.func @layer_cf(%x: tensor<?x96x?xf32>, %dy: tensor<?x96x?xf32>,
    %mean: tensor<?x?xf32>, %rstd: tensor<?x?xf32>, %w: tensor<96xf32>)
    -> (tensor<?x96x?xf32>, tensor<96xf32>, tensor<96xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 96.0 : f32
  %b = tensor.dim %x, %c0 : tensor<?x96x?xf32>
  %s = tensor.dim %x, %c2 : tensor<?x96x?xf32>
  %e = tensor.empty(%b, %s) : tensor<?x96x?xf32>
  %xhat = linalg.generic {indexing_maps = [#x, #st, #st, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %mean, %rstd : tensor<?x96x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x96x?xf32>) {
  ^bb0(%a: f32, %m: f32, %r: f32, %o: f32):
    %c = arith.subf %a, %m : f32
    %v = arith.mulf %c, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x96x?xf32>
  %wdy = linalg.generic {indexing_maps = [#x, #w, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy, %w : tensor<?x96x?xf32>, tensor<96xf32>) outs(%e : tensor<?x96x?xf32>) {
  ^bb0(%g: f32, %ww: f32, %o: f32):
    %v = arith.mulf %g, %ww : f32
    linalg.yield %v : f32
  } -> tensor<?x96x?xf32>
  %es = tensor.empty(%b, %s) : tensor<?x?xf32>
  %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<?x?xf32>) -> tensor<?x?xf32>
  %sums:2 = linalg.generic {indexing_maps = [#x, #x, #st, #st], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%wdy, %xhat : tensor<?x96x?xf32>, tensor<?x96x?xf32>) outs(%zs, %zs : tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%g: f32, %h: f32, %o1: f32, %o2: f32):
    %p = arith.mulf %h, %g : f32
    %v1 = arith.addf %o1, %p : f32
    %v2 = arith.addf %o2, %g : f32
    linalg.yield %v1, %v2 : f32, f32
  } -> (tensor<?x?xf32>, tensor<?x?xf32>)
  %dx = linalg.generic {indexing_maps = [#x, #x, #st, #st, #st, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%wdy, %xhat, %sums#0, %sums#1, %rstd : tensor<?x96x?xf32>, tensor<?x96x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x96x?xf32>) {
  ^bb0(%g: f32, %h: f32, %a: f32, %bb: f32, %r: f32, %o: f32):
    %c1v = arith.divf %a, %n : f32
    %c2v = arith.divf %bb, %n : f32
    %t = arith.mulf %c1v, %h : f32
    %u = arith.addf %c2v, %t : f32
    %d = arith.subf %g, %u : f32
    %v = arith.mulf %d, %r : f32
    linalg.yield %v : f32
  } -> tensor<?x96x?xf32>
  %ec = tensor.empty() : tensor<96xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<96xf32>) -> tensor<96xf32>
  %cols:2 = linalg.generic {indexing_maps = [#x, #x, #w, #w], iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%dy, %xhat : tensor<?x96x?xf32>, tensor<?x96x?xf32>) outs(%zc, %zc : tensor<96xf32>, tensor<96xf32>) {
  ^bb0(%g: f32, %h: f32, %o1: f32, %o2: f32):
    %p = arith.mulf %g, %h : f32
    %v1 = arith.addf %o1, %p : f32
    %v2 = arith.addf %o2, %g : f32
    linalg.yield %v1, %v2 : f32, f32
  } -> (tensor<96xf32>, tensor<96xf32>)
  return %dx, %cols#0, %cols#1 : tensor<?x96x?xf32>, tensor<96xf32>, tensor<96xf32>
}
