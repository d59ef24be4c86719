// Statically empty domains on the CPU path (issue 14): rows = 0
// (tensor<0x64xbf16>: before, --norm-lower-to-cpu rejected it after
// canonicalize), a rank-3 0x?x16 (before: an invalid memref.collapse_shape
// after bufferization), and N = 0. The whole pipeline lowers them; dW is
// its initial value (zeros), dx is empty.
//
// RUN: norm-opt %s -split-input-file --norm-lower-to-cpu | FileCheck %s

// CHECK-LABEL: llvm.func @rows_zero(
// CHECK:       llvm.func @_mlir_ciface_rows_zero(
func.func @rows_zero(%dy: tensor<0x64xbf16>, %x: tensor<0x64xbf16>,
                     %rstd: tensor<0xf32>, %w: tensor<64xbf16>)
    -> (tensor<0x64xbf16>, tensor<64xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xbf16>)
      : tensor<0x64xbf16>, tensor<0xf32> -> tensor<0x64xbf16>, tensor<64xbf16>
  return %dx, %dw : tensor<0x64xbf16>, tensor<64xbf16>
}

// -----

// CHECK-LABEL: llvm.func @rank3_rows_zero(
// CHECK:       llvm.func @_mlir_ciface_rank3_rows_zero(
func.func @rank3_rows_zero(%dy: tensor<0x?x16xf32>, %x: tensor<0x?x16xf32>,
                           %rstd: tensor<0x?xf32>, %w: tensor<16xf32>)
    -> (tensor<0x?x16xf32>, tensor<16xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<16xf32>)
      : tensor<0x?x16xf32>, tensor<0x?xf32> -> tensor<0x?x16xf32>, tensor<16xf32>
  return %dx, %dw : tensor<0x?x16xf32>, tensor<16xf32>
}

// -----

// CHECK-LABEL: llvm.func @columns_zero(
// CHECK:       llvm.func @_mlir_ciface_columns_zero(
func.func @columns_zero(%dy: tensor<?x0xf32>, %x: tensor<?x0xf32>,
                        %rstd: tensor<?xf32>, %w: tensor<0xf32>)
    -> (tensor<?x0xf32>, tensor<0xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<0xf32>)
      : tensor<?x0xf32>, tensor<?xf32> -> tensor<?x0xf32>, tensor<0xf32>
  return %dx, %dw : tensor<?x0xf32>, tensor<0xf32>
}
