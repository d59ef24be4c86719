// A LLaMA-style block's backward around its hidden norm, in bf16, as one
// function: dy of the RMSNorm comes out of the down projection's matmul, a
// residual gradient joins dx, dx goes into a projection whose output is dy
// of a LayerNorm over another N. `norm-opt compile` outlines each group
// (@block_bf16_group0, @block_bf16_group1); test/gpu/gpu_graph_check.py runs
// the matmuls in torch and the groups from the library.
func.func @block_bf16(
    %g: tensor<?x8192xbf16>, %w_down: tensor<8192x2048xbf16>,
    %x: tensor<?x2048xbf16>, %rstd: tensor<?xf32>, %weight: tensor<2048xbf16>,
    %g_residual: tensor<?x2048xbf16>, %w_proj: tensor<2048x1024xbf16>,
    %q: tensor<?x1024xbf16>, %q_mean: tensor<?xf32>, %q_rstd: tensor<?xf32>,
    %q_weight: tensor<1024xbf16>, %q_bias: tensor<1024xbf16>)
    -> (tensor<?x1024xbf16>, tensor<2048xbf16>, tensor<1024xbf16>,
        tensor<1024xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : bf16
  %rows = tensor.dim %g, %c0 : tensor<?x8192xbf16>
  %e0 = tensor.empty(%rows) : tensor<?x2048xbf16>
  %z0 = linalg.fill ins(%zero : bf16) outs(%e0 : tensor<?x2048xbf16>) -> tensor<?x2048xbf16>
  %dy = linalg.matmul ins(%g, %w_down : tensor<?x8192xbf16>, tensor<8192x2048xbf16>)
                      outs(%z0 : tensor<?x2048xbf16>) -> tensor<?x2048xbf16>
  %dx, %dweight = norm.rms_norm_grad %dy, %x, %rstd weight(%weight : tensor<2048xbf16>)
      : tensor<?x2048xbf16>, tensor<?xf32> -> tensor<?x2048xbf16>, tensor<2048xbf16>
  %dsum = linalg.add ins(%dx, %g_residual : tensor<?x2048xbf16>, tensor<?x2048xbf16>)
                     outs(%e0 : tensor<?x2048xbf16>) -> tensor<?x2048xbf16>
  %e1 = tensor.empty(%rows) : tensor<?x1024xbf16>
  %z1 = linalg.fill ins(%zero : bf16) outs(%e1 : tensor<?x1024xbf16>) -> tensor<?x1024xbf16>
  %dq = linalg.matmul ins(%dsum, %w_proj : tensor<?x2048xbf16>, tensor<2048x1024xbf16>)
                      outs(%z1 : tensor<?x1024xbf16>) -> tensor<?x1024xbf16>
  %dqx, %dqw, %dqb = norm.layer_norm_grad %dq, %q, %q_mean, %q_rstd
      weight(%q_weight : tensor<1024xbf16>) bias(%q_bias : tensor<1024xbf16>)
      : tensor<?x1024xbf16>, tensor<?xf32>
      -> tensor<?x1024xbf16>, tensor<1024xbf16>, tensor<1024xbf16>
  return %dqx, %dweight, %dqw, %dqb
      : tensor<?x1024xbf16>, tensor<2048xbf16>, tensor<1024xbf16>,
        tensor<1024xbf16>
}
