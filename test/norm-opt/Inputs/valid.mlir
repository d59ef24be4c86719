// A valid input for the driver tests: whatever fails on it fails because of
// the command line, not the IR.
func.func @valid(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>,
                 %rstd: tensor<4xf32>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<8xf32>)
      : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>, tensor<8xf32>
  return %dx, %dw : tensor<4x8xf32>, tensor<8xf32>
}
