// Malformed on purpose (bad-files.test): the return lacks its type.
func.func @broken(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x
}
