// An RMSNorm backward as a training front end writes it (one generic per
// step): bf16 activations 16384x5120 (static), f32 rstd, bf16 weight, the
// loss scale applied to dy as a constant (2^-14), a bf16 residual gradient
// added into dx before the truncf, and dW accumulated into an existing f32
// buffer (the column reduction's init is an argument; f32, no truncf).
// It crashed on the H100 with a misaligned 16-byte shared-memory read
// (issue 11); test/Conversion/shared-alignment.test checks its layout.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @rms_riders_bf16(%x: tensor<16384x5120xbf16>,
    %dy: tensor<16384x5120xbf16>, %rstd: tensor<16384xf32>,
    %w: tensor<5120xbf16>, %dres: tensor<16384x5120xbf16>,
    %dw_in: tensor<5120xf32>)
    -> (tensor<16384x5120xbf16>, tensor<5120xf32>) {
  %zero = arith.constant 0.0 : f32
  %inv_n = arith.constant 1.953125e-04 : f32
  %e = tensor.empty() : tensor<16384x5120xf32>
  %sdy = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy : tensor<16384x5120xbf16>) outs(%e : tensor<16384x5120xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %a32 = arith.extf %a : bf16 to f32
    %scale = arith.constant 6.103515625e-05 : f32
    %v = arith.mulf %a32, %scale : f32
    linalg.yield %v : f32
  } -> tensor<16384x5120xf32>
  %xhat = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%rstd, %x : tensor<16384xf32>, tensor<16384x5120xbf16>) outs(%e : tensor<16384x5120xf32>) {
  ^bb0(%r: f32, %a: bf16, %o: f32):
    %a32 = arith.extf %a : bf16 to f32
    %v = arith.mulf %r, %a32 : f32
    linalg.yield %v : f32
  } -> tensor<16384x5120xf32>
  %er = tensor.empty() : tensor<16384xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<16384xf32>) -> tensor<16384xf32>
  %s = linalg.generic {indexing_maps = [#id, #col, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sdy, %w, %xhat : tensor<16384x5120xf32>, tensor<5120xbf16>, tensor<16384x5120xf32>) outs(%zr : tensor<16384xf32>) {
  ^bb0(%g: f32, %ww: bf16, %h: f32, %o: f32):
    %w32 = arith.extf %ww : bf16 to f32
    %wdy = arith.mulf %w32, %g : f32
    %p = arith.mulf %wdy, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<16384xf32>
  %dx = linalg.generic {indexing_maps = [#id, #col, #id, #row, #row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sdy, %w, %xhat, %s, %rstd, %dres : tensor<16384x5120xf32>, tensor<5120xbf16>, tensor<16384x5120xf32>, tensor<16384xf32>, tensor<16384xf32>, tensor<16384x5120xbf16>) outs(%e : tensor<16384x5120xf32>) {
  ^bb0(%g: f32, %ww: bf16, %h: f32, %a: f32, %r: f32, %res: bf16, %o: f32):
    %w32 = arith.extf %ww : bf16 to f32
    %wdy = arith.mulf %w32, %g : f32
    %c = arith.mulf %a, %inv_n : f32
    %t = arith.mulf %h, %c : f32
    %d = arith.subf %wdy, %t : f32
    %v = arith.mulf %d, %r : f32
    %res32 = arith.extf %res : bf16 to f32
    %out = arith.addf %v, %res32 : f32
    linalg.yield %out : f32
  } -> tensor<16384x5120xf32>
  %eb = tensor.empty() : tensor<16384x5120xbf16>
  %dxb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dx : tensor<16384x5120xf32>) outs(%eb : tensor<16384x5120xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %v = arith.truncf %a : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<16384x5120xbf16>
  %dw = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%sdy, %xhat : tensor<16384x5120xf32>, tensor<16384x5120xf32>) outs(%dw_in : tensor<5120xf32>) {
  ^bb0(%g: f32, %h: f32, %o: f32):
    %p = arith.mulf %g, %h : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<5120xf32>
  return %dxb, %dw : tensor<16384x5120xbf16>, tensor<5120xf32>
}
