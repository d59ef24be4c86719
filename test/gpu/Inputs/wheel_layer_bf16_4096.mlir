func.func @layer_norm_backward(%dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>,
    %mean: tensor<?xf32>, %rstd: tensor<?xf32>, %w: tensor<4096xbf16>, %b: tensor<4096xbf16>)
    -> (tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd
      weight(%w : tensor<4096xbf16>) bias(%b : tensor<4096xbf16>)
      : tensor<?x4096xbf16>, tensor<?xf32> -> tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>
  return %dx, %dw, %db : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>
}
