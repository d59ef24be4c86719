// A training-step backward as a front end writes it: loss scale as a 0-d
// tensor, residual gradient, dW accumulated into the previous gradient,
// dB, dynamic rows and N (from test/Transforms/fuse-mixed-reductions.mlir).
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#scalar = affine_map<(d0, d1) -> ()>
func.func @training_riders_dynamic(%x: tensor<?x?xf32>, %dy: tensor<?x?xf32>, %rstd: tensor<?xf32>,
    %w: tensor<?xf32>, %scale: tensor<f32>, %dres: tensor<?x?xf32>, %prev_dw: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
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
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #row, #row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sdy, %w, %xhat, %s, %rstd, %dres : tensor<?x?xf32>, tensor<?xf32>, tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%g: f32, %ww: f32, %h: f32, %a: f32, %r: f32, %res: f32, %o: f32):
    %wdy = arith.mulf %ww, %g : f32
    %c = arith.divf %a, %n : f32
    %t = arith.mulf %h, %c : f32
    %d = arith.subf %wdy, %t : f32
    %v = arith.mulf %d, %r : f32
    %out = arith.addf %v, %res : f32
    linalg.yield %out : f32
  } -> tensor<?x?xf32>
  %ec = tensor.empty(%nd) : tensor<?xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<?xf32>) -> tensor<?xf32>
  %dwb:2 = linalg.generic {indexing_maps = [#id, #id, #col, #col], iterator_types = ["reduction", "parallel"]}
      ins(%sdy, %xhat : tensor<?x?xf32>, tensor<?x?xf32>) outs(%prev_dw, %zc : tensor<?xf32>, tensor<?xf32>) {
  ^bb0(%g: f32, %h: f32, %o1: f32, %o2: f32):
    %p = arith.mulf %g, %h : f32
    %v1 = arith.addf %o1, %p : f32
    %v2 = arith.addf %o2, %g : f32
    linalg.yield %v1, %v2 : f32, f32
  } -> (tensor<?xf32>, tensor<?xf32>)
  return %dx, %dwb#0, %dwb#1 : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}
