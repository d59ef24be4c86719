// LayerNorm backward as a front end that knows the op emits it: bf16
// activations [batch, seq, hidden], f32 affine parameters, saved fp32
// statistics. Run: scripts/dev.sh example, or
//   build/bin/norm-opt examples/layer_norm_backward.mlir --norm-decompose
func.func @layer_norm_backward(
    %dy: tensor<4x512x1024xbf16>, %x: tensor<4x512x1024xbf16>,
    %mean: tensor<4x512xf32>, %rstd: tensor<4x512xf32>,
    %weight: tensor<1024xf32>, %bias: tensor<1024xf32>)
    -> (tensor<4x512x1024xbf16>, tensor<1024xf32>, tensor<1024xf32>) {
  %dx, %dweight, %dbias = norm.layer_norm_grad %dy, %x, %mean, %rstd
      weight(%weight : tensor<1024xf32>) bias(%bias : tensor<1024xf32>)
      : tensor<4x512x1024xbf16>, tensor<4x512xf32>
      -> tensor<4x512x1024xbf16>, tensor<1024xf32>, tensor<1024xf32>
  return %dx, %dweight, %dbias
      : tensor<4x512x1024xbf16>, tensor<1024xf32>, tensor<1024xf32>
}
