// Two norm backwards of different [rows, N] in one function, every input
// an argument: the hidden RMSNorm ([tokens, 4096]) and a per-head QK
// LayerNorm ([tokens x heads, 128]), in bf16 with f32 weights. One launcher
// with a rows/cols pair per group (test/gpu/gpu_graph_check.py).
func.func @two_domains_bf16(
    %dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %rstd: tensor<?xf32>,
    %w: tensor<4096xf32>,
    %dq: tensor<?x128xbf16>, %q: tensor<?x128xbf16>, %q_mean: tensor<?xf32>,
    %q_rstd: tensor<?xf32>, %q_w: tensor<128xf32>, %q_b: tensor<128xf32>)
    -> (tensor<?x4096xbf16>, tensor<4096xf32>, tensor<?x128xbf16>,
        tensor<128xf32>, tensor<128xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<4096xf32>)
      : tensor<?x4096xbf16>, tensor<?xf32> -> tensor<?x4096xbf16>, tensor<4096xf32>
  %dqx, %dqw, %dqb = norm.layer_norm_grad %dq, %q, %q_mean, %q_rstd
      weight(%q_w : tensor<128xf32>) bias(%q_b : tensor<128xf32>)
      : tensor<?x128xbf16>, tensor<?xf32>
      -> tensor<?x128xbf16>, tensor<128xf32>, tensor<128xf32>
  return %dx, %dw, %dqx, %dqw, %dqb
      : tensor<?x4096xbf16>, tensor<4096xf32>, tensor<?x128xbf16>,
        tensor<128xf32>, tensor<128xf32>
}
