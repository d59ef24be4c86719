func.func @layer_wide(%dy: tensor<?x32768xbf16>, %x: tensor<?x32768xbf16>, %mean: tensor<?xf32>,
    %rstd: tensor<?xf32>, %w: tensor<32768xbf16>, %b: tensor<32768xbf16>)
    -> (tensor<?x32768xbf16>, tensor<32768xbf16>, tensor<32768xbf16>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd
      weight(%w : tensor<32768xbf16>) bias(%b : tensor<32768xbf16>)
      : tensor<?x32768xbf16>, tensor<?xf32> -> tensor<?x32768xbf16>, tensor<32768xbf16>, tensor<32768xbf16>
  return %dx, %dw, %db : tensor<?x32768xbf16>, tensor<32768xbf16>, tensor<32768xbf16>
}
