// Statically empty domains on the CPU path (issue 14): rows = 0
// (tensor<0x64xbf16>: before, --norm-lower-to-cpu rejected it after
// canonicalize), a rank-3 0x?x16 (before: an invalid memref.collapse_shape
// after bufferization), and N = 0. The whole pipeline lowers them; dW is
// its initial value (zeros), dx is empty: @main below runs them and the
// VALUES lines check what they return.
//
// RUN: norm-opt %s --norm-lower-to-cpu -o %t
// RUN: FileCheck %s < %t
// RUN: mlir-runner %t -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_utils | FileCheck %s --check-prefix=VALUES

// CHECK-LABEL: llvm.func @rows_zero(
// CHECK:       llvm.func @_mlir_ciface_rows_zero(
func.func @rows_zero(%dy: tensor<0x64xbf16>, %x: tensor<0x64xbf16>,
                     %rstd: tensor<0xf32>, %w: tensor<64xbf16>)
    -> (tensor<0x64xbf16>, tensor<64xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xbf16>)
      : tensor<0x64xbf16>, tensor<0xf32> -> tensor<0x64xbf16>, tensor<64xbf16>
  return %dx, %dw : tensor<0x64xbf16>, tensor<64xbf16>
}

// CHECK-LABEL: llvm.func @rank3_rows_zero(
// CHECK:       llvm.func @_mlir_ciface_rank3_rows_zero(
func.func @rank3_rows_zero(%dy: tensor<0x?x16xf32>, %x: tensor<0x?x16xf32>,
                           %rstd: tensor<0x?xf32>, %w: tensor<16xf32>)
    -> (tensor<0x?x16xf32>, tensor<16xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<16xf32>)
      : tensor<0x?x16xf32>, tensor<0x?xf32> -> tensor<0x?x16xf32>, tensor<16xf32>
  return %dx, %dw : tensor<0x?x16xf32>, tensor<16xf32>
}

// CHECK-LABEL: llvm.func @columns_zero(
// CHECK:       llvm.func @_mlir_ciface_columns_zero(
func.func @columns_zero(%dy: tensor<?x0xf32>, %x: tensor<?x0xf32>,
                        %rstd: tensor<?xf32>, %w: tensor<0xf32>)
    -> (tensor<?x0xf32>, tensor<0xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<0xf32>)
      : tensor<?x0xf32>, tensor<?xf32> -> tensor<?x0xf32>, tensor<0xf32>
  return %dx, %dw : tensor<?x0xf32>, tensor<0xf32>
}

// @main runs the three: each dW is printed, and the sizes of dx (not dx:
// printMemrefF32 reads an element of an empty buffer). dW over no rows is
// its initial value, zeros, not uninitialised memory; dx keeps its empty
// shape; columns_zero's dx is [3, 0] and its dW [0].
func.func private @printMemrefF32(memref<*xf32>) attributes { llvm.emit_c_interface }

func.func private @print(%t: tensor<?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?xf32> to memref<?xf32>
  %u = memref.cast %m : memref<?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

// Prints sizes as f32 values: [d0, d1, d2].
func.func private @print_sizes(%d0: index, %d1: index, %d2: index) {
  %i0 = arith.index_cast %d0 : index to i64
  %i1 = arith.index_cast %d1 : index to i64
  %i2 = arith.index_cast %d2 : index to i64
  %f0 = arith.sitofp %i0 : i64 to f32
  %f1 = arith.sitofp %i1 : i64 to f32
  %f2 = arith.sitofp %i2 : i64 to f32
  %t = tensor.from_elements %f0, %f1, %f2 : tensor<3xf32>
  %d = tensor.cast %t : tensor<3xf32> to tensor<?xf32>
  call @print(%d) : (tensor<?xf32>) -> ()
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %two_bf16 = arith.constant 2.0 : bf16

  // rows_zero: dW (bf16, widened to f32 to print) 64 zeros; dx 0 x 64.
  %e0 = tensor.empty() : tensor<0x64xbf16>
  %r0 = tensor.empty() : tensor<0xf32>
  %w0e = tensor.empty() : tensor<64xbf16>
  %w0 = linalg.fill ins(%two_bf16 : bf16) outs(%w0e : tensor<64xbf16>) -> tensor<64xbf16>
  %dx0, %dw0 = call @rows_zero(%e0, %e0, %r0, %w0)
      : (tensor<0x64xbf16>, tensor<0x64xbf16>, tensor<0xf32>, tensor<64xbf16>) -> (tensor<0x64xbf16>, tensor<64xbf16>)
  %f0e = tensor.empty() : tensor<64xf32>
  %f0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                        iterator_types = ["parallel"]}
      ins(%dw0 : tensor<64xbf16>) outs(%f0e : tensor<64xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %v = arith.extf %a : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<64xf32>
  %p0 = tensor.cast %f0 : tensor<64xf32> to tensor<?xf32>
  call @print(%p0) : (tensor<?xf32>) -> ()
  %s00 = tensor.dim %dx0, %c0 : tensor<0x64xbf16>
  %s01 = tensor.dim %dx0, %c1 : tensor<0x64xbf16>
  call @print_sizes(%s00, %s01, %c0) : (index, index, index) -> ()

  // rank3_rows_zero at 0 x 5 x 16: dW 16 zeros; dx 0 x 5 x 16.
  %e1 = tensor.empty(%c5) : tensor<0x?x16xf32>
  %r1 = tensor.empty(%c5) : tensor<0x?xf32>
  %w1e = tensor.empty() : tensor<16xf32>
  %w1 = linalg.fill ins(%two : f32) outs(%w1e : tensor<16xf32>) -> tensor<16xf32>
  %dx1, %dw1 = call @rank3_rows_zero(%e1, %e1, %r1, %w1)
      : (tensor<0x?x16xf32>, tensor<0x?x16xf32>, tensor<0x?xf32>, tensor<16xf32>) -> (tensor<0x?x16xf32>, tensor<16xf32>)
  %p1 = tensor.cast %dw1 : tensor<16xf32> to tensor<?xf32>
  call @print(%p1) : (tensor<?xf32>) -> ()
  %s10 = tensor.dim %dx1, %c0 : tensor<0x?x16xf32>
  %s11 = tensor.dim %dx1, %c1 : tensor<0x?x16xf32>
  %s12 = tensor.dim %dx1, %c2 : tensor<0x?x16xf32>
  call @print_sizes(%s10, %s11, %s12) : (index, index, index) -> ()

  // columns_zero, 3 rows of N = 0: dx 3 x 0, dW of size 0.
  %e2 = tensor.empty(%c3) : tensor<?x0xf32>
  %r2e = tensor.empty(%c3) : tensor<?xf32>
  %r2 = linalg.fill ins(%one : f32) outs(%r2e : tensor<?xf32>) -> tensor<?xf32>
  %w2 = tensor.empty() : tensor<0xf32>
  %dx2, %dw2 = call @columns_zero(%e2, %e2, %r2, %w2)
      : (tensor<?x0xf32>, tensor<?x0xf32>, tensor<?xf32>, tensor<0xf32>) -> (tensor<?x0xf32>, tensor<0xf32>)
  %s20 = tensor.dim %dx2, %c0 : tensor<?x0xf32>
  %s21 = tensor.dim %dx2, %c1 : tensor<?x0xf32>
  %s22 = tensor.dim %dw2, %c0 : tensor<0xf32>
  call @print_sizes(%s20, %s21, %s22) : (index, index, index) -> ()
  return
}

// VALUES:      sizes = [64]
// VALUES-NEXT: {{^\[0(,  0){63}\]$}}
// VALUES:      sizes = [3]
// VALUES-NEXT: {{^\[0,  64,  0\]$}}
// VALUES:      sizes = [16]
// VALUES-NEXT: {{^\[0(,  0){15}\]$}}
// VALUES:      sizes = [3]
// VALUES-NEXT: {{^\[0,  5,  16\]$}}
// VALUES:      sizes = [3]
// VALUES-NEXT: {{^\[3,  0,  0\]$}}
// VALUES-NOT:  Memref
