func.func @rms_wide(%dy: tensor<?x32768xf32>, %x: tensor<?x32768xf32>,
    %rstd: tensor<?xf32>, %w: tensor<32768xf32>)
    -> (tensor<?x32768xf32>, tensor<32768xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<32768xf32>)
      : tensor<?x32768xf32>, tensor<?xf32> -> tensor<?x32768xf32>, tensor<32768xf32>
  return %dx, %dw : tensor<?x32768xf32>, tensor<32768xf32>
}
