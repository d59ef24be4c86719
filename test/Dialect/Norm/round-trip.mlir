// Round trip of norm.layer_norm_grad and norm.rms_norm_grad through the
// custom assembly format, and through the generic form: every activation
// type, with and without weight and bias, zero-centred weights, parameter
// types other than x's, rank 2 and 3, static and dynamic shapes.
// RUN: norm-opt %s | norm-opt | FileCheck %s
// RUN: norm-opt %s -mlir-print-op-generic | norm-opt | FileCheck %s
// RUN: %if mlir-opt-plugin %{ %mlir_opt_plugin %s | %mlir_opt_plugin | FileCheck %s %}

// CHECK-LABEL: func.func @ln_bf16_weight_bias(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<64xbf16>) bias(%arg5 : tensor<64xbf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
// CHECK-NEXT:    return %dx, %dweight, %dbias : tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
func.func @ln_bf16_weight_bias(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xbf16>, %b: tensor<64xbf16>)
    -> (tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xbf16>) bias(%b : tensor<64xbf16>)
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
  return %dx, %dw, %db : tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
}

// CHECK-LABEL: func.func @ln_f16_no_affine(
// CHECK-NEXT:    %dx = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 : tensor<8x64xf16>, tensor<8xf32> -> tensor<8x64xf16>
// CHECK-NEXT:    return %dx : tensor<8x64xf16>
func.func @ln_f16_no_affine(%dy: tensor<8x64xf16>, %x: tensor<8x64xf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>)
    -> tensor<8x64xf16> {
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd
      : tensor<8x64xf16>, tensor<8xf32> -> tensor<8x64xf16>
  return %dx : tensor<8x64xf16>
}

// CHECK-LABEL: func.func @ln_f32_weight_only(
// CHECK-NEXT:    %dx, %dweight = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<64xf32>) : tensor<8x64xf32>, tensor<8xf32> -> tensor<8x64xf32>, tensor<64xf32>
// CHECK-NEXT:    return %dx, %dweight : tensor<8x64xf32>, tensor<64xf32>
func.func @ln_f32_weight_only(%dy: tensor<8x64xf32>, %x: tensor<8x64xf32>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>)
    -> (tensor<8x64xf32>, tensor<64xf32>) {
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf32>)
      : tensor<8x64xf32>, tensor<8xf32> -> tensor<8x64xf32>, tensor<64xf32>
  return %dx, %dw : tensor<8x64xf32>, tensor<64xf32>
}

// A bias without a weight: the one extra result type is dbias's.
// CHECK-LABEL: func.func @ln_bf16_bias_only(
// CHECK-NEXT:    %dx, %dbias = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 bias(%arg4 : tensor<64xf32>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>
// CHECK-NEXT:    return %dx, %dbias : tensor<8x64xbf16>, tensor<64xf32>
func.func @ln_bf16_bias_only(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %b: tensor<64xf32>)
    -> (tensor<8x64xbf16>, tensor<64xf32>) {
  %dx, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd bias(%b : tensor<64xf32>)
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>
  return %dx, %db : tensor<8x64xbf16>, tensor<64xf32>
}

// CHECK-LABEL: func.func @ln_zero_centered(
// CHECK-NEXT:    %dx, %dweight = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<64xbf16>) {zero_centered_weight} : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>
// CHECK-NEXT:    return %dx, %dweight : tensor<8x64xbf16>, tensor<64xbf16>
func.func @ln_zero_centered(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xbf16>)
    -> (tensor<8x64xbf16>, tensor<64xbf16>) {
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xbf16>) {zero_centered_weight}
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>
  return %dx, %dw : tensor<8x64xbf16>, tensor<64xbf16>
}

// CHECK-LABEL: func.func @ln_zero_centered_bias(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<64xf16>) bias(%arg5 : tensor<64xf16>) {zero_centered_weight} : tensor<8x64xf16>, tensor<8xf32> -> tensor<8x64xf16>, tensor<64xf16>, tensor<64xf16>
// CHECK-NEXT:    return %dx, %dweight, %dbias : tensor<8x64xf16>, tensor<64xf16>, tensor<64xf16>
func.func @ln_zero_centered_bias(%dy: tensor<8x64xf16>, %x: tensor<8x64xf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf16>, %b: tensor<64xf16>)
    -> (tensor<8x64xf16>, tensor<64xf16>, tensor<64xf16>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf16>) bias(%b : tensor<64xf16>) {zero_centered_weight}
      : tensor<8x64xf16>, tensor<8xf32> -> tensor<8x64xf16>, tensor<64xf16>, tensor<64xf16>
  return %dx, %dw, %db : tensor<8x64xf16>, tensor<64xf16>, tensor<64xf16>
}

// CHECK-LABEL: func.func @ln_f32_params_bf16_x(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<64xf32>) bias(%arg5 : tensor<64xf32>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>, tensor<64xf32>
// CHECK-NEXT:    return %dx, %dweight, %dbias : tensor<8x64xbf16>, tensor<64xf32>, tensor<64xf32>
func.func @ln_f32_params_bf16_x(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<8x64xbf16>, tensor<64xf32>, tensor<64xf32>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf32>) bias(%b : tensor<64xf32>)
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>, tensor<64xf32>
  return %dx, %dw, %db : tensor<8x64xbf16>, tensor<64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @ln_f16_params_bf16_x(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<64xf16>) bias(%arg5 : tensor<64xbf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf16>, tensor<64xbf16>
// CHECK-NEXT:    return %dx, %dweight, %dbias : tensor<8x64xbf16>, tensor<64xf16>, tensor<64xbf16>
func.func @ln_f16_params_bf16_x(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf16>, %b: tensor<64xbf16>)
    -> (tensor<8x64xbf16>, tensor<64xf16>, tensor<64xbf16>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf16>) bias(%b : tensor<64xbf16>)
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf16>, tensor<64xbf16>
  return %dx, %dw, %db : tensor<8x64xbf16>, tensor<64xf16>, tensor<64xbf16>
}

// CHECK-LABEL: func.func @ln_3d(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<64xf32>) bias(%arg5 : tensor<64xf32>) : tensor<2x16x64xbf16>, tensor<2x16xf32> -> tensor<2x16x64xbf16>, tensor<64xf32>, tensor<64xf32>
// CHECK-NEXT:    return %dx, %dweight, %dbias : tensor<2x16x64xbf16>, tensor<64xf32>, tensor<64xf32>
func.func @ln_3d(%dy: tensor<2x16x64xbf16>, %x: tensor<2x16x64xbf16>, %mean: tensor<2x16xf32>, %rstd: tensor<2x16xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<2x16x64xbf16>, tensor<64xf32>, tensor<64xf32>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf32>) bias(%b : tensor<64xf32>)
      : tensor<2x16x64xbf16>, tensor<2x16xf32> -> tensor<2x16x64xbf16>, tensor<64xf32>, tensor<64xf32>
  return %dx, %dw, %db : tensor<2x16x64xbf16>, tensor<64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @ln_dynamic_rows(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<64xbf16>) bias(%arg5 : tensor<64xbf16>) : tensor<?x64xbf16>, tensor<?xf32> -> tensor<?x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
// CHECK-NEXT:    return %dx, %dweight, %dbias : tensor<?x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
func.func @ln_dynamic_rows(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %mean: tensor<?xf32>, %rstd: tensor<?xf32>, %w: tensor<64xbf16>, %b: tensor<64xbf16>)
    -> (tensor<?x64xbf16>, tensor<64xbf16>, tensor<64xbf16>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xbf16>) bias(%b : tensor<64xbf16>)
      : tensor<?x64xbf16>, tensor<?xf32> -> tensor<?x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
  return %dx, %dw, %db : tensor<?x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
}

// CHECK-LABEL: func.func @ln_dynamic_rows_n(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<?xf32>) bias(%arg5 : tensor<?xf32>) : tensor<?x?xbf16>, tensor<?xf32> -> tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>
// CHECK-NEXT:    return %dx, %dweight, %dbias : tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>
func.func @ln_dynamic_rows_n(%dy: tensor<?x?xbf16>, %x: tensor<?x?xbf16>, %mean: tensor<?xf32>, %rstd: tensor<?xf32>, %w: tensor<?xf32>, %b: tensor<?xf32>)
    -> (tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<?xf32>) bias(%b : tensor<?xf32>)
      : tensor<?x?xbf16>, tensor<?xf32> -> tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>
  return %dx, %dw, %db : tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>
}

// CHECK-LABEL: func.func @ln_3d_dynamic(
// CHECK-NEXT:    %dx, %dweight = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<?xf16>) : tensor<?x?x?xf16>, tensor<?x?xf32> -> tensor<?x?x?xf16>, tensor<?xf16>
// CHECK-NEXT:    return %dx, %dweight : tensor<?x?x?xf16>, tensor<?xf16>
func.func @ln_3d_dynamic(%dy: tensor<?x?x?xf16>, %x: tensor<?x?x?xf16>, %mean: tensor<?x?xf32>, %rstd: tensor<?x?xf32>, %w: tensor<?xf16>)
    -> (tensor<?x?x?xf16>, tensor<?xf16>) {
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<?xf16>)
      : tensor<?x?x?xf16>, tensor<?x?xf32> -> tensor<?x?x?xf16>, tensor<?xf16>
  return %dx, %dw : tensor<?x?x?xf16>, tensor<?xf16>
}

// Static stats and weight with a dynamic x are compatible.
// CHECK-LABEL: func.func @ln_mixed_static_dynamic(
// CHECK-NEXT:    %dx, %dweight = norm.layer_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<64xf32>) : tensor<?x?xbf16>, tensor<8xf32> -> tensor<?x?xbf16>, tensor<64xf32>
// CHECK-NEXT:    return %dx, %dweight : tensor<?x?xbf16>, tensor<64xf32>
func.func @ln_mixed_static_dynamic(%dy: tensor<?x?xbf16>, %x: tensor<?x?xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>)
    -> (tensor<?x?xbf16>, tensor<64xf32>) {
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf32>)
      : tensor<?x?xbf16>, tensor<8xf32> -> tensor<?x?xbf16>, tensor<64xf32>
  return %dx, %dw : tensor<?x?xbf16>, tensor<64xf32>
}

// CHECK-LABEL: func.func @rms_bf16_weight(
// CHECK-NEXT:    %dx, %dweight = norm.rms_norm_grad %arg0, %arg1, %arg2 weight(%arg3 : tensor<64xbf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>
// CHECK-NEXT:    return %dx, %dweight : tensor<8x64xbf16>, tensor<64xbf16>
func.func @rms_bf16_weight(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %w: tensor<64xbf16>)
    -> (tensor<8x64xbf16>, tensor<64xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xbf16>)
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>
  return %dx, %dw : tensor<8x64xbf16>, tensor<64xbf16>
}

// CHECK-LABEL: func.func @rms_f16_no_affine(
// CHECK-NEXT:    %dx = norm.rms_norm_grad %arg0, %arg1, %arg2 : tensor<8x64xf16>, tensor<8xf32> -> tensor<8x64xf16>
// CHECK-NEXT:    return %dx : tensor<8x64xf16>
func.func @rms_f16_no_affine(%dy: tensor<8x64xf16>, %x: tensor<8x64xf16>, %rstd: tensor<8xf32>)
    -> tensor<8x64xf16> {
  %dx = norm.rms_norm_grad %dy, %x, %rstd
      : tensor<8x64xf16>, tensor<8xf32> -> tensor<8x64xf16>
  return %dx : tensor<8x64xf16>
}

// CHECK-LABEL: func.func @rms_f32_weight_bias(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.rms_norm_grad %arg0, %arg1, %arg2 weight(%arg3 : tensor<64xf32>) bias(%arg4 : tensor<64xf32>) : tensor<8x64xf32>, tensor<8xf32> -> tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>
// CHECK-NEXT:    return %dx, %dweight, %dbias : tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>
func.func @rms_f32_weight_bias(%dy: tensor<8x64xf32>, %x: tensor<8x64xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %dx, %dw, %db = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xf32>) bias(%b : tensor<64xf32>)
      : tensor<8x64xf32>, tensor<8xf32> -> tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>
  return %dx, %dw, %db : tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// A bias without a weight: the one extra result type is dbias's.
// CHECK-LABEL: func.func @rms_bf16_bias_only(
// CHECK-NEXT:    %dx, %dbias = norm.rms_norm_grad %arg0, %arg1, %arg2 bias(%arg3 : tensor<64xbf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>
// CHECK-NEXT:    return %dx, %dbias : tensor<8x64xbf16>, tensor<64xbf16>
func.func @rms_bf16_bias_only(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %b: tensor<64xbf16>)
    -> (tensor<8x64xbf16>, tensor<64xbf16>) {
  %dx, %db = norm.rms_norm_grad %dy, %x, %rstd bias(%b : tensor<64xbf16>)
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>
  return %dx, %db : tensor<8x64xbf16>, tensor<64xbf16>
}

// CHECK-LABEL: func.func @rms_zero_centered(
// CHECK-NEXT:    %dx, %dweight = norm.rms_norm_grad %arg0, %arg1, %arg2 weight(%arg3 : tensor<2048xbf16>) {zero_centered_weight} : tensor<2x16x2048xbf16>, tensor<2x16xf32> -> tensor<2x16x2048xbf16>, tensor<2048xbf16>
// CHECK-NEXT:    return %dx, %dweight : tensor<2x16x2048xbf16>, tensor<2048xbf16>
func.func @rms_zero_centered(%dy: tensor<2x16x2048xbf16>, %x: tensor<2x16x2048xbf16>, %rstd: tensor<2x16xf32>, %w: tensor<2048xbf16>)
    -> (tensor<2x16x2048xbf16>, tensor<2048xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<2048xbf16>) {zero_centered_weight}
      : tensor<2x16x2048xbf16>, tensor<2x16xf32> -> tensor<2x16x2048xbf16>, tensor<2048xbf16>
  return %dx, %dw : tensor<2x16x2048xbf16>, tensor<2048xbf16>
}

// CHECK-LABEL: func.func @rms_f32_weight_bf16_x(
// CHECK-NEXT:    %dx, %dweight = norm.rms_norm_grad %arg0, %arg1, %arg2 weight(%arg3 : tensor<64xf32>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>
// CHECK-NEXT:    return %dx, %dweight : tensor<8x64xbf16>, tensor<64xf32>
func.func @rms_f32_weight_bf16_x(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %w: tensor<64xf32>)
    -> (tensor<8x64xbf16>, tensor<64xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xf32>)
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>
  return %dx, %dw : tensor<8x64xbf16>, tensor<64xf32>
}

// CHECK-LABEL: func.func @rms_3d_f32(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.rms_norm_grad %arg0, %arg1, %arg2 weight(%arg3 : tensor<64xf32>) bias(%arg4 : tensor<64xf32>) : tensor<2x16x64xf32>, tensor<2x16xf32> -> tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
// CHECK-NEXT:    return %dx, %dweight, %dbias : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
func.func @rms_3d_f32(%dy: tensor<2x16x64xf32>, %x: tensor<2x16x64xf32>, %rstd: tensor<2x16xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %dx, %dw, %db = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xf32>) bias(%b : tensor<64xf32>)
      : tensor<2x16x64xf32>, tensor<2x16xf32> -> tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
  return %dx, %dw, %db : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @rms_dynamic_rows(
// CHECK-NEXT:    %dx, %dweight = norm.rms_norm_grad %arg0, %arg1, %arg2 weight(%arg3 : tensor<4096xbf16>) : tensor<?x4096xbf16>, tensor<?xf32> -> tensor<?x4096xbf16>, tensor<4096xbf16>
// CHECK-NEXT:    return %dx, %dweight : tensor<?x4096xbf16>, tensor<4096xbf16>
func.func @rms_dynamic_rows(%dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %rstd: tensor<?xf32>, %w: tensor<4096xbf16>)
    -> (tensor<?x4096xbf16>, tensor<4096xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<4096xbf16>)
      : tensor<?x4096xbf16>, tensor<?xf32> -> tensor<?x4096xbf16>, tensor<4096xbf16>
  return %dx, %dw : tensor<?x4096xbf16>, tensor<4096xbf16>
}

// CHECK-LABEL: func.func @rms_dynamic_rows_n(
// CHECK-NEXT:    %dx, %dweight = norm.rms_norm_grad %arg0, %arg1, %arg2 weight(%arg3 : tensor<?xbf16>) : tensor<?x?xbf16>, tensor<?xf32> -> tensor<?x?xbf16>, tensor<?xbf16>
// CHECK-NEXT:    return %dx, %dweight : tensor<?x?xbf16>, tensor<?xbf16>
func.func @rms_dynamic_rows_n(%dy: tensor<?x?xbf16>, %x: tensor<?x?xbf16>, %rstd: tensor<?xf32>, %w: tensor<?xbf16>)
    -> (tensor<?x?xbf16>, tensor<?xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<?xbf16>)
      : tensor<?x?xbf16>, tensor<?xf32> -> tensor<?x?xbf16>, tensor<?xbf16>
  return %dx, %dw : tensor<?x?xbf16>, tensor<?xbf16>
}

// CHECK-LABEL: func.func @rms_f16_dynamic_n_no_affine(
// CHECK-NEXT:    %dx = norm.rms_norm_grad %arg0, %arg1, %arg2 : tensor<4x?xf16>, tensor<4xf32> -> tensor<4x?xf16>
// CHECK-NEXT:    return %dx : tensor<4x?xf16>
func.func @rms_f16_dynamic_n_no_affine(%dy: tensor<4x?xf16>, %x: tensor<4x?xf16>, %rstd: tensor<4xf32>)
    -> tensor<4x?xf16> {
  %dx = norm.rms_norm_grad %dy, %x, %rstd
      : tensor<4x?xf16>, tensor<4xf32> -> tensor<4x?xf16>
  return %dx : tensor<4x?xf16>
}

// GroupNorm, NCHW, bf16 with f32 weight and bias.
// CHECK-LABEL: func.func @group_norm_nchw(
// CHECK-NEXT:    %dx, %dweight, %dbias = norm.group_norm_grad %arg0, %arg1, %arg2, %arg3 weight(%arg4 : tensor<320xf32>) bias(%arg5 : tensor<320xf32>) {groups = 32 : i64} : tensor<8x320x64x64xbf16>, tensor<8x32xf32> -> tensor<8x320x64x64xbf16>, tensor<320xf32>, tensor<320xf32>
func.func @group_norm_nchw(%dy: tensor<8x320x64x64xbf16>, %x: tensor<8x320x64x64xbf16>, %mean: tensor<8x32xf32>, %rstd: tensor<8x32xf32>, %w: tensor<320xf32>, %b: tensor<320xf32>)
    -> (tensor<8x320x64x64xbf16>, tensor<320xf32>, tensor<320xf32>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %mean, %rstd
      weight(%w : tensor<320xf32>) bias(%b : tensor<320xf32>) {groups = 32 : i64}
      : tensor<8x320x64x64xbf16>, tensor<8x32xf32>
      -> tensor<8x320x64x64xbf16>, tensor<320xf32>, tensor<320xf32>
  return %dx, %dw, %db : tensor<8x320x64x64xbf16>, tensor<320xf32>, tensor<320xf32>
}

// GroupNorm, channels last, dynamic N and spatial dims, no affine.
// CHECK-LABEL: func.func @group_norm_channels_last(
// CHECK-NEXT:    %dx = norm.group_norm_grad %arg0, %arg1, %arg2, %arg3 {channels_last, groups = 4 : i64} : tensor<?x?x?x64xf32>, tensor<?x4xf32> -> tensor<?x?x?x64xf32>
func.func @group_norm_channels_last(%dy: tensor<?x?x?x64xf32>, %x: tensor<?x?x?x64xf32>, %mean: tensor<?x4xf32>, %rstd: tensor<?x4xf32>)
    -> tensor<?x?x?x64xf32> {
  %dx = norm.group_norm_grad %dy, %x, %mean, %rstd {groups = 4 : i64, channels_last}
      : tensor<?x?x?x64xf32>, tensor<?x4xf32> -> tensor<?x?x?x64xf32>
  return %dx : tensor<?x?x?x64xf32>
}
