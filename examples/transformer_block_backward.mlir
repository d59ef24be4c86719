// The backward of a pre-norm transformer block's MLP half, written as one
// function the way a front end hands it to a compiler: dy of the hidden
// RMSNorm comes out of a matmul (the down projection's input gradient), a
// residual gradient is added to dx, dx goes into the next matmul, and a
// second norm (a LayerNorm over a 128-wide head dim, as in QK-norm) of
// another domain shares the function. Run:
//   build/bin/norm-opt examples/transformer_block_backward.mlir \
//       --norm-decompose --norm-fuse-mixed-reductions=remarks=true
//   build/bin/norm-opt examples/transformer_block_backward.mlir \
//       --norm-decompose --norm-fuse-mixed-reductions --norm-outline-groups
func.func @block_backward(
    %g: tensor<?x512xf32>, %w_down: tensor<512x256xf32>,
    %x: tensor<?x256xf32>, %rstd: tensor<?xf32>, %weight: tensor<256xf32>,
    %g_residual: tensor<?x256xf32>, %w_up: tensor<256x128xf32>,
    %q: tensor<?x128xf32>, %q_mean: tensor<?xf32>, %q_rstd: tensor<?xf32>,
    %q_weight: tensor<128xf32>)
    -> (tensor<?x128xf32>, tensor<256xf32>, tensor<128xf32>, tensor<128xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %rows = tensor.dim %g, %c0 : tensor<?x512xf32>
  // dy of the hidden norm: the gradient out of the down projection.
  %e0 = tensor.empty(%rows) : tensor<?x256xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<?x256xf32>) -> tensor<?x256xf32>
  %dy = linalg.matmul ins(%g, %w_down : tensor<?x512xf32>, tensor<512x256xf32>)
                      outs(%z0 : tensor<?x256xf32>) -> tensor<?x256xf32>
  %dx, %dweight = norm.rms_norm_grad %dy, %x, %rstd weight(%weight : tensor<256xf32>)
      : tensor<?x256xf32>, tensor<?xf32> -> tensor<?x256xf32>, tensor<256xf32>
  // The residual branch's gradient joins dx.
  %dsum = linalg.add ins(%dx, %g_residual : tensor<?x256xf32>, tensor<?x256xf32>)
                     outs(%e0 : tensor<?x256xf32>) -> tensor<?x256xf32>
  // dx goes into the up projection's backward: dy of the second norm.
  %e1 = tensor.empty(%rows) : tensor<?x128xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x128xf32>) -> tensor<?x128xf32>
  %dq = linalg.matmul ins(%dsum, %w_up : tensor<?x256xf32>, tensor<256x128xf32>)
                      outs(%z1 : tensor<?x128xf32>) -> tensor<?x128xf32>
  %dqx, %dqw, %dqb = norm.layer_norm_grad %dq, %q, %q_mean, %q_rstd
      weight(%q_weight : tensor<128xf32>) bias(%q_weight : tensor<128xf32>)
      : tensor<?x128xf32>, tensor<?xf32>
      -> tensor<?x128xf32>, tensor<128xf32>, tensor<128xf32>
  return %dqx, %dweight, %dqw, %dqb
      : tensor<?x128xf32>, tensor<256xf32>, tensor<128xf32>, tensor<128xf32>
}
