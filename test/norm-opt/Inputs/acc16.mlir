// RMSNorm backward whose dW accumulates into a bf16 gradient buffer:
// dw_out = truncf(extf(dw_prev) + sum_rows(dy * xhat)), as a training step
// with 16-bit gradients writes it (the column reduction's init is an extf
// of a function argument).
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#c1 = affine_map<(d0) -> (d0)>
func.func @rms_acc16(%dy: tensor<?x256xbf16>, %x: tensor<?x256xbf16>,
                     %rstd: tensor<?xf32>, %w: tensor<256xbf16>,
                     %dw_prev: tensor<256xbf16>)
    -> (tensor<?x256xbf16>, tensor<256xbf16>) {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %x, %c0 : tensor<?x256xbf16>
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 256.0 : f32
  // xhat = x * rstd, wdy = w * dy (f32)
  %e0 = tensor.empty(%rows) : tensor<?x256xf32>
  %xhat, %wdy = linalg.generic {indexing_maps = [#id, #row, #id, #col, #id, #id],
      iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd, %dy, %w : tensor<?x256xbf16>, tensor<?xf32>, tensor<?x256xbf16>, tensor<256xbf16>)
      outs(%e0, %e0 : tensor<?x256xf32>, tensor<?x256xf32>) {
  ^bb0(%a: bf16, %r: f32, %d: bf16, %ww: bf16, %o0: f32, %o1: f32):
    %af = arith.extf %a : bf16 to f32
    %df = arith.extf %d : bf16 to f32
    %wf = arith.extf %ww : bf16 to f32
    %h = arith.mulf %af, %r : f32
    %g = arith.mulf %wf, %df : f32
    linalg.yield %h, %g : f32, f32
  } -> (tensor<?x256xf32>, tensor<?x256xf32>)
  // c1 = sum_n(xhat * wdy)
  %e1 = tensor.empty(%rows) : tensor<?xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #row],
      iterator_types = ["parallel", "reduction"]}
      ins(%xhat, %wdy : tensor<?x256xf32>, tensor<?x256xf32>) outs(%z1 : tensor<?xf32>) {
  ^bb0(%h: f32, %g: f32, %acc: f32):
    %p = arith.mulf %h, %g : f32
    %t = arith.addf %acc, %p : f32
    linalg.yield %t : f32
  } -> tensor<?xf32>
  // dx = rstd * (wdy - xhat * s / N), bf16
  %e2 = tensor.empty(%rows) : tensor<?x256xbf16>
  %dx = linalg.generic {indexing_maps = [#id, #id, #row, #row, #id],
      iterator_types = ["parallel", "parallel"]}
      ins(%xhat, %wdy, %s, %rstd : tensor<?x256xf32>, tensor<?x256xf32>, tensor<?xf32>, tensor<?xf32>)
      outs(%e2 : tensor<?x256xbf16>) {
  ^bb0(%h: f32, %g: f32, %ss: f32, %r: f32, %o: bf16):
    %m = arith.divf %ss, %n : f32
    %hm = arith.mulf %h, %m : f32
    %d = arith.subf %g, %hm : f32
    %v = arith.mulf %d, %r : f32
    %vt = arith.truncf %v : f32 to bf16
    linalg.yield %vt : bf16
  } -> tensor<?x256xbf16>
  // dw = truncf(extf(dw_prev) + sum_rows(dy * xhat))
  %e3 = tensor.empty() : tensor<256xf32>
  %prev = linalg.generic {indexing_maps = [#c1, #c1], iterator_types = ["parallel"]}
      ins(%dw_prev : tensor<256xbf16>) outs(%e3 : tensor<256xf32>) {
  ^bb0(%p: bf16, %o: f32):
    %pf = arith.extf %p : bf16 to f32
    linalg.yield %pf : f32
  } -> tensor<256xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #col],
      iterator_types = ["reduction", "parallel"]}
      ins(%dy, %xhat : tensor<?x256xbf16>, tensor<?x256xf32>) outs(%prev : tensor<256xf32>) {
  ^bb0(%d: bf16, %h: f32, %acc: f32):
    %df = arith.extf %d : bf16 to f32
    %p = arith.mulf %df, %h : f32
    %t = arith.addf %acc, %p : f32
    linalg.yield %t : f32
  } -> tensor<256xf32>
  %e4 = tensor.empty() : tensor<256xbf16>
  %dw = linalg.generic {indexing_maps = [#c1, #c1], iterator_types = ["parallel"]}
      ins(%sum : tensor<256xf32>) outs(%e4 : tensor<256xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %vt = arith.truncf %v : f32 to bf16
    linalg.yield %vt : bf16
  } -> tensor<256xbf16>
  return %dx, %dw : tensor<?x256xbf16>, tensor<256xbf16>
}
