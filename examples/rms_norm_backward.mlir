// RMSNorm backward (Llama style): bf16 activations with a dynamic number of
// rows, bf16 weight. Run: scripts/dev.sh example, or
//   build/bin/norm-opt examples/rms_norm_backward.mlir --norm-decompose
func.func @rms_norm_backward(
    %dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %rstd: tensor<?xf32>,
    %weight: tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<4096xbf16>) {
  %dx, %dweight = norm.rms_norm_grad %dy, %x, %rstd
      weight(%weight : tensor<4096xbf16>)
      : tensor<?x4096xbf16>, tensor<?xf32>
      -> tensor<?x4096xbf16>, tensor<4096xbf16>
  return %dx, %dweight : tensor<?x4096xbf16>, tensor<4096xbf16>
}
