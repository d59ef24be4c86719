func.func @rms_dyn(%dy: tensor<?x?xf32>, %x: tensor<?x?xf32>, %rstd: tensor<?xf32>, %w: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<?xf32>)
      : tensor<?x?xf32>, tensor<?xf32> -> tensor<?x?xf32>, tensor<?xf32>
  return %dx, %dw : tensor<?x?xf32>, tensor<?xf32>
}
