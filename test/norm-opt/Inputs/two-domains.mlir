// Two norm backwards of different [rows, N] in one function, every input
// an argument: the whole-function form, one launcher with a rows/cols pair
// per group.
func.func @two_norms(
    %dy: tensor<?x256xf32>, %x: tensor<?x256xf32>, %rstd: tensor<?xf32>,
    %w: tensor<256xf32>,
    %dq: tensor<?x128xbf16>, %q: tensor<?x128xbf16>, %q_mean: tensor<?xf32>,
    %q_rstd: tensor<?xf32>, %q_w: tensor<128xf32>)
    -> (tensor<?x256xf32>, tensor<256xf32>, tensor<?x128xbf16>,
        tensor<128xf32>, tensor<128xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<256xf32>)
      : tensor<?x256xf32>, tensor<?xf32> -> tensor<?x256xf32>, tensor<256xf32>
  %dqx, %dqw, %dqb = norm.layer_norm_grad %dq, %q, %q_mean, %q_rstd
      weight(%q_w : tensor<128xf32>) bias(%q_w : tensor<128xf32>)
      : tensor<?x128xbf16>, tensor<?xf32>
      -> tensor<?x128xbf16>, tensor<128xf32>, tensor<128xf32>
  return %dx, %dw, %dqx, %dqw, %dqb
      : tensor<?x256xf32>, tensor<256xf32>, tensor<?x128xbf16>,
        tensor<128xf32>, tensor<128xf32>
}
