// A fused group plus work outside it: a library cannot launch that.
func.func @rms_plus_extra(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %rstd: tensor<4xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<8xf32>)
      : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>, tensor<8xf32>
  %r = arith.constant dense<1.0> : tensor<4xf32>
  %sum = arith.addf %rstd, %r : tensor<4xf32>
  return %dx, %dw, %sum : tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>
}
