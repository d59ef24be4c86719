// Verifier (NormOps.cpp), ODS constraint and parser errors of
// norm.layer_norm_grad and norm.rms_norm_grad. Malformed operand/result
// combinations the custom syntax cannot spell use the generic form.
// RUN: norm-opt %s -split-input-file -verify-diagnostics
// RUN: %if mlir-opt-plugin %{ %mlir_opt_plugin %s -split-input-file -verify-diagnostics %}

//===----------------------------------------------------------------------===//
// norm.layer_norm_grad: verifier
//===----------------------------------------------------------------------===//

func.func @ln_x_rank_1(%dy: tensor<64xbf16>, %x: tensor<64xbf16>, %mean: tensor<f32>, %rstd: tensor<f32>) -> tensor<64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op expects 'x' of rank >= 2 (leading dims are rows, the trailing dim is normalised), got 'tensor<64xbf16>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<64xbf16>, tensor<f32> -> tensor<64xbf16>
  return %dx : tensor<64xbf16>
}

// -----

func.func @ln_stats_wrong_rank(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8x1xf32>, %rstd: tensor<8x1xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op expects 'mean' to be shaped like the leading dims of 'x' 'tensor<8x64xbf16>', got 'tensor<8x1xf32>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xbf16>, tensor<8x1xf32> -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

// Stats shaped like all of x (keepdim-less forward saved [rows..., N]).
func.func @ln_stats_full_shape(%dy: tensor<8x64xf32>, %x: tensor<8x64xf32>, %mean: tensor<8x64xf32>, %rstd: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{expects 'mean' to be shaped like the leading dims of 'x' 'tensor<8x64xf32>', got 'tensor<8x64xf32>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xf32>, tensor<8x64xf32> -> tensor<8x64xf32>
  return %dx : tensor<8x64xf32>
}

// -----

func.func @ln_stats_wrong_shape(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<4xf32>, %rstd: tensor<4xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op expects 'mean' to be shaped like the leading dims of 'x' 'tensor<8x64xbf16>', got 'tensor<4xf32>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xbf16>, tensor<4xf32> -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @ln_stats_wrong_shape_3d(%dy: tensor<2x16x64xf16>, %x: tensor<2x16x64xf16>, %mean: tensor<2x8xf32>, %rstd: tensor<2x8xf32>) -> tensor<2x16x64xf16> {
  // expected-error @+1 {{expects 'mean' to be shaped like the leading dims of 'x' 'tensor<2x16x64xf16>', got 'tensor<2x8xf32>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<2x16x64xf16>, tensor<2x8xf32> -> tensor<2x16x64xf16>
  return %dx : tensor<2x16x64xf16>
}

// -----

// Dynamic stats dims are compatible, but a static mismatch in another dim is
// still caught.
func.func @ln_stats_partly_dynamic(%dy: tensor<2x16x64xf16>, %x: tensor<2x16x64xf16>, %mean: tensor<?x8xf32>, %rstd: tensor<?x8xf32>) -> tensor<2x16x64xf16> {
  // expected-error @+1 {{expects 'mean' to be shaped like the leading dims of 'x' 'tensor<2x16x64xf16>', got 'tensor<?x8xf32>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<2x16x64xf16>, tensor<?x8xf32> -> tensor<2x16x64xf16>
  return %dx : tensor<2x16x64xf16>
}

// -----

func.func @ln_dx_element_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{'norm.layer_norm_grad' op expects result 'dx' to have the type of 'x' 'tensor<8x64xbf16>', got 'tensor<8x64xf32>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xf32>
  return %dx : tensor<8x64xf32>
}

// -----

func.func @ln_dx_shape(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{expects result 'dx' to have the type of 'x' 'tensor<8x64xbf16>', got 'tensor<?x64xbf16>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xbf16>, tensor<8xf32> -> tensor<?x64xbf16>
  return %dx : tensor<?x64xbf16>
}

// -----

func.func @ln_weight_without_dweight(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op has a 'weight' operand but no 'dweight' result}}
  %dx = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd, %w) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<64xf32>) -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @ln_dweight_without_weight(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op has a 'dweight' result but no 'weight' operand}}
  %0:2 = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>)
  return %0#0, %0#1 : tensor<8x64xbf16>, tensor<64xf32>
}

// -----

func.func @ln_bias_without_dbias(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op has a 'bias' operand but no 'dbias' result}}
  %0:2 = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd, %w, %b) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1>, resultSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>)
  return %0#0, %0#1 : tensor<8x64xbf16>, tensor<64xf32>
}

// -----

func.func @ln_dbias_without_bias(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op has a 'dbias' result but no 'bias' operand}}
  %0:2 = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 1>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>)
  return %0#0, %0#1 : tensor<8x64xbf16>, tensor<64xf32>
}

// -----

// The custom syntax cannot mix up the pairs either: a bias-only op's second
// result is 'dbias', and a bias operand without its result is a parse error
// (below). In the generic form, bias with a dweight result:
func.func @ln_bias_with_dweight(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %b: tensor<64xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op has a 'dweight' result but no 'weight' operand}}
  %0:2 = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd, %b) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1>, resultSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<64xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>)
  return %0#0, %0#1 : tensor<8x64xbf16>, tensor<64xf32>
}

// -----

func.func @ln_weight_2d(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<1x64xf32>) -> (tensor<8x64xbf16>, tensor<1x64xf32>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op expects 'weight' to be 1-D with the trailing dim of 'x' 'tensor<8x64xbf16>', got 'tensor<1x64xf32>'}}
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<1x64xf32>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<1x64xf32>
  return %dx, %dw : tensor<8x64xbf16>, tensor<1x64xf32>
}

// -----

func.func @ln_weight_wrong_length(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<32xf32>) -> (tensor<8x64xbf16>, tensor<32xf32>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op expects 'weight' to be 1-D with the trailing dim of 'x' 'tensor<8x64xbf16>', got 'tensor<32xf32>'}}
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<32xf32>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<32xf32>
  return %dx, %dw : tensor<8x64xbf16>, tensor<32xf32>
}

// -----

func.func @ln_bias_wrong_length(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>, %b: tensor<128xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>, tensor<128xf32>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op expects 'bias' to be 1-D with the trailing dim of 'x' 'tensor<8x64xbf16>', got 'tensor<128xf32>'}}
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf32>) bias(%b : tensor<128xf32>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>, tensor<128xf32>
  return %dx, %dw, %db : tensor<8x64xbf16>, tensor<64xf32>, tensor<128xf32>
}

// -----

func.func @ln_dweight_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>) -> (tensor<8x64xbf16>, tensor<64xbf16>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op expects result 'dweight' to have the type of 'weight' 'tensor<64xf32>', got 'tensor<64xbf16>'}}
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf32>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>
  return %dx, %dw : tensor<8x64xbf16>, tensor<64xbf16>
}

// -----

func.func @ln_dbias_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %b: tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<?xbf16>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op expects result 'dbias' to have the type of 'bias' 'tensor<64xbf16>', got 'tensor<?xbf16>'}}
  %dx, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd bias(%b : tensor<64xbf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<?xbf16>
  return %dx, %db : tensor<8x64xbf16>, tensor<?xbf16>
}

// -----

func.func @ln_zero_centered_without_weight(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op has 'zero_centered_weight' but no 'weight'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd {zero_centered_weight} : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @ln_zero_centered_bias_only(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %b: tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<64xbf16>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op has 'zero_centered_weight' but no 'weight'}}
  %dx, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd bias(%b : tensor<64xbf16>) {zero_centered_weight} : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>
  return %dx, %db : tensor<8x64xbf16>, tensor<64xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// norm.layer_norm_grad: ODS-generated constraints
//===----------------------------------------------------------------------===//

func.func @ln_x_f64(%dy: tensor<8x64xf64>, %x: tensor<8x64xf64>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xf64> {
  // expected-error @+1 {{'norm.layer_norm_grad' op operand #0 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values, but got 'tensor<8x64xf64>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xf64>, tensor<8xf32> -> tensor<8x64xf64>
  return %dx : tensor<8x64xf64>
}

// -----

func.func @ln_x_i32(%dy: tensor<8x64xi32>, %x: tensor<8x64xi32>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xi32> {
  // expected-error @+1 {{'norm.layer_norm_grad' op operand #0 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values, but got 'tensor<8x64xi32>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xi32>, tensor<8xf32> -> tensor<8x64xi32>
  return %dx : tensor<8x64xi32>
}

// -----

// f8 is a float type, but not one the op supports.
func.func @ln_x_f8(%dy: tensor<8x64xf8E4M3FN>, %x: tensor<8x64xf8E4M3FN>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xf8E4M3FN> {
  // expected-error @+1 {{operand #0 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values, but got 'tensor<8x64xf8E4M3FN>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xf8E4M3FN>, tensor<8xf32> -> tensor<8x64xf8E4M3FN>
  return %dx : tensor<8x64xf8E4M3FN>
}

// -----

// Generic form: the custom syntax only parses ranked tensors for `x`.
func.func @ln_x_unranked(%dy: tensor<*xf32>, %x: tensor<*xf32>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{'norm.layer_norm_grad' op operand #0 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values, but got 'tensor<*xf32>'}}
  %dx = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<*xf32>, tensor<*xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<*xf32>
  return %dx : tensor<*xf32>
}

// -----

func.func @ln_parse_x_unranked(%dy: tensor<*xf32>, %x: tensor<*xf32>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{custom op 'norm.layer_norm_grad' invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<*xf32>, tensor<8xf32> -> tensor<*xf32>
  return %dx : tensor<*xf32>
}

// -----

func.func @ln_stats_bf16(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xbf16>, %rstd: tensor<8xbf16>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op operand #2 must be ranked tensor of 32-bit float values, but got 'tensor<8xbf16>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xbf16>, tensor<8xbf16> -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

// Only rstd in bf16 (generic form: the custom syntax spells one stats type).
func.func @ln_rstd_bf16(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xbf16>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op operand #3 must be ranked tensor of 32-bit float values, but got 'tensor<8xbf16>'}}
  %dx = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8xbf16>) -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @ln_mean_rstd_mismatch(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<4xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op failed to verify that all of {mean, rstd} have same type}}
  %dx = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<4xf32>) -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @ln_dy_type(%dy: tensor<8x64xf32>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op failed to verify that all of {dy, x} have same type}}
  %dx = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x64xf32>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @ln_dy_shape(%dy: tensor<8x32xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.layer_norm_grad' op failed to verify that all of {dy, x} have same type}}
  %dx = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x32xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @ln_weight_f64(%dy: tensor<8x64xf32>, %x: tensor<8x64xf32>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf64>) -> (tensor<8x64xf32>, tensor<64xf64>) {
  // expected-error @+1 {{'norm.layer_norm_grad' op operand #4 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values, but got 'tensor<64xf64>'}}
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf64>) : tensor<8x64xf32>, tensor<8xf32> -> tensor<8x64xf32>, tensor<64xf64>
  return %dx, %dw : tensor<8x64xf32>, tensor<64xf64>
}

// -----

func.func @ln_dx_f64(%dy: tensor<8x64xf32>, %x: tensor<8x64xf32>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xf64> {
  // expected-error @+1 {{'norm.layer_norm_grad' op result #0 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values, but got 'tensor<8x64xf64>'}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xf32>, tensor<8xf32> -> tensor<8x64xf64>
  return %dx : tensor<8x64xf64>
}

// -----

func.func @ln_operand_segments(%dy: tensor<8x64xf32>, %x: tensor<8x64xf32>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{'norm.layer_norm_grad' op operand count (4) does not match with the total size (5) specified in attribute 'operandSegmentSizes'}}
  %dx = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xf32>
  return %dx : tensor<8x64xf32>
}

// -----

func.func @ln_result_segments(%dy: tensor<8x64xf32>, %x: tensor<8x64xf32>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{'norm.layer_norm_grad' op result count (1) does not match with the total size (0) specified in attribute 'resultSegmentSizes'}}
  %dx = "norm.layer_norm_grad"(%dy, %x, %mean, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>}> : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x64xf32>
  return %dx : tensor<8x64xf32>
}

// -----

//===----------------------------------------------------------------------===//
// norm.layer_norm_grad: custom syntax
//===----------------------------------------------------------------------===//

func.func @ln_parse_missing_dweight_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{custom op 'norm.layer_norm_grad' expected the type of the 'dweight' result, which the 'weight' operand asks for}}
  %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf32>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @ln_parse_missing_dbias_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>) {
  // expected-error @+1 {{custom op 'norm.layer_norm_grad' expected the type of the 'dbias' result, which the 'bias' operand asks for}}
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd weight(%w : tensor<64xf32>) bias(%b : tensor<64xf32>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>
  return %dx, %dw : tensor<8x64xbf16>, tensor<64xf32>
}

// -----

func.func @ln_parse_extra_result_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>, %rstd: tensor<8xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{custom op 'norm.layer_norm_grad' expected no more result types: 'dx', then 'dweight' only with a 'weight' operand and 'dbias' only with a 'bias' operand}}
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>
  return %dx : tensor<8x64xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// norm.rms_norm_grad
//===----------------------------------------------------------------------===//

func.func @rms_x_rank_1(%dy: tensor<64xf32>, %x: tensor<64xf32>, %rstd: tensor<f32>) -> tensor<64xf32> {
  // expected-error @+1 {{'norm.rms_norm_grad' op expects 'x' of rank >= 2 (leading dims are rows, the trailing dim is normalised), got 'tensor<64xf32>'}}
  %dx = norm.rms_norm_grad %dy, %x, %rstd : tensor<64xf32>, tensor<f32> -> tensor<64xf32>
  return %dx : tensor<64xf32>
}

// -----

func.func @rms_rstd_wrong_rank(%dy: tensor<2x16x64xbf16>, %x: tensor<2x16x64xbf16>, %rstd: tensor<32xf32>) -> tensor<2x16x64xbf16> {
  // expected-error @+1 {{'norm.rms_norm_grad' op expects 'rstd' to be shaped like the leading dims of 'x' 'tensor<2x16x64xbf16>', got 'tensor<32xf32>'}}
  %dx = norm.rms_norm_grad %dy, %x, %rstd : tensor<2x16x64xbf16>, tensor<32xf32> -> tensor<2x16x64xbf16>
  return %dx : tensor<2x16x64xbf16>
}

// -----

func.func @rms_rstd_wrong_shape(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<16xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.rms_norm_grad' op expects 'rstd' to be shaped like the leading dims of 'x' 'tensor<8x64xbf16>', got 'tensor<16xf32>'}}
  %dx = norm.rms_norm_grad %dy, %x, %rstd : tensor<8x64xbf16>, tensor<16xf32> -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @rms_rstd_f16(%dy: tensor<8x64xf16>, %x: tensor<8x64xf16>, %rstd: tensor<8xf16>) -> tensor<8x64xf16> {
  // expected-error @+1 {{'norm.rms_norm_grad' op operand #2 must be ranked tensor of 32-bit float values, but got 'tensor<8xf16>'}}
  %dx = norm.rms_norm_grad %dy, %x, %rstd : tensor<8x64xf16>, tensor<8xf16> -> tensor<8x64xf16>
  return %dx : tensor<8x64xf16>
}

// -----

func.func @rms_dx_type(%dy: tensor<8x64xf16>, %x: tensor<8x64xf16>, %rstd: tensor<8xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.rms_norm_grad' op expects result 'dx' to have the type of 'x' 'tensor<8x64xf16>', got 'tensor<8x64xbf16>'}}
  %dx = norm.rms_norm_grad %dy, %x, %rstd : tensor<8x64xf16>, tensor<8xf32> -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @rms_weight_without_dweight(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %w: tensor<64xbf16>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.rms_norm_grad' op has a 'weight' operand but no 'dweight' result}}
  %dx = "norm.rms_norm_grad"(%dy, %x, %rstd, %w) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<64xbf16>) -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @rms_dweight_without_weight(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>) -> (tensor<8x64xbf16>, tensor<64xbf16>) {
  // expected-error @+1 {{'norm.rms_norm_grad' op has a 'dweight' result but no 'weight' operand}}
  %0:2 = "norm.rms_norm_grad"(%dy, %x, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>) -> (tensor<8x64xbf16>, tensor<64xbf16>)
  return %0#0, %0#1 : tensor<8x64xbf16>, tensor<64xbf16>
}

// -----

func.func @rms_bias_without_dbias(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %b: tensor<64xbf16>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.rms_norm_grad' op has a 'bias' operand but no 'dbias' result}}
  %dx = "norm.rms_norm_grad"(%dy, %x, %rstd, %b) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<64xbf16>) -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @rms_dbias_without_bias(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %w: tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>) {
  // expected-error @+1 {{'norm.rms_norm_grad' op has a 'dbias' result but no 'bias' operand}}
  %0:3 = "norm.rms_norm_grad"(%dy, %x, %rstd, %w) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>, resultSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8xf32>, tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>)
  return %0#0, %0#1, %0#2 : tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
}

// -----

func.func @rms_weight_wrong_length(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %w: tensor<65xbf16>) -> (tensor<8x64xbf16>, tensor<65xbf16>) {
  // expected-error @+1 {{'norm.rms_norm_grad' op expects 'weight' to be 1-D with the trailing dim of 'x' 'tensor<8x64xbf16>', got 'tensor<65xbf16>'}}
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<65xbf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<65xbf16>
  return %dx, %dw : tensor<8x64xbf16>, tensor<65xbf16>
}

// -----

func.func @rms_weight_scalar(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %w: tensor<bf16>) -> (tensor<8x64xbf16>, tensor<bf16>) {
  // expected-error @+1 {{'norm.rms_norm_grad' op expects 'weight' to be 1-D with the trailing dim of 'x' 'tensor<8x64xbf16>', got 'tensor<bf16>'}}
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<bf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<bf16>
  return %dx, %dw : tensor<8x64xbf16>, tensor<bf16>
}

// -----

func.func @rms_dweight_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %w: tensor<64xbf16>) -> (tensor<8x64xbf16>, tensor<64xf32>) {
  // expected-error @+1 {{'norm.rms_norm_grad' op expects result 'dweight' to have the type of 'weight' 'tensor<64xbf16>', got 'tensor<64xf32>'}}
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xbf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>
  return %dx, %dw : tensor<8x64xbf16>, tensor<64xf32>
}

// -----

func.func @rms_zero_centered_without_weight(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'norm.rms_norm_grad' op has 'zero_centered_weight' but no 'weight'}}
  %dx = norm.rms_norm_grad %dy, %x, %rstd {zero_centered_weight} : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @rms_x_i32(%dy: tensor<8x64xi32>, %x: tensor<8x64xi32>, %rstd: tensor<8xf32>) -> tensor<8x64xi32> {
  // expected-error @+1 {{'norm.rms_norm_grad' op operand #0 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values, but got 'tensor<8x64xi32>'}}
  %dx = norm.rms_norm_grad %dy, %x, %rstd : tensor<8x64xi32>, tensor<8xf32> -> tensor<8x64xi32>
  return %dx : tensor<8x64xi32>
}

// -----

func.func @rms_dy_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xf16>, %rstd: tensor<8xf32>) -> tensor<8x64xf16> {
  // expected-error @+1 {{'norm.rms_norm_grad' op failed to verify that all of {dy, x} have same type}}
  %dx = "norm.rms_norm_grad"(%dy, %x, %rstd) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<8x64xbf16>, tensor<8x64xf16>, tensor<8xf32>) -> tensor<8x64xf16>
  return %dx : tensor<8x64xf16>
}

// -----

func.func @rms_parse_bias_without_dbias_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %b: tensor<64xbf16>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{custom op 'norm.rms_norm_grad' expected the type of the 'dbias' result, which the 'bias' operand asks for}}
  %dx = norm.rms_norm_grad %dy, %x, %rstd bias(%b : tensor<64xbf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @rms_parse_extra_result_type(%dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %rstd: tensor<8xf32>, %w: tensor<64xbf16>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{custom op 'norm.rms_norm_grad' expected no more result types}}
  %dx, %dw, %db = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xbf16>) : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
  return %dx : tensor<8x64xbf16>
}

// -----

func.func @group_norm_dynamic_channels(%dy: tensor<2x?x4xf32>, %x: tensor<2x?x4xf32>, %m: tensor<2x2xf32>, %r: tensor<2x2xf32>) -> tensor<2x?x4xf32> {
  // expected-error @+1 {{'norm.group_norm_grad' op expects a static channel count (dim 1 of 'x' 'tensor<2x?x4xf32>')}}
  %dx = norm.group_norm_grad %dy, %x, %m, %r {groups = 2 : i64} : tensor<2x?x4xf32>, tensor<2x2xf32> -> tensor<2x?x4xf32>
  return %dx : tensor<2x?x4xf32>
}

// -----

func.func @group_norm_groups_do_not_divide(%dy: tensor<2x6x4xf32>, %x: tensor<2x6x4xf32>, %m: tensor<2x4xf32>, %r: tensor<2x4xf32>) -> tensor<2x6x4xf32> {
  // expected-error @+1 {{'norm.group_norm_grad' op expects 'groups' (4) to divide the 6 channels}}
  %dx = norm.group_norm_grad %dy, %x, %m, %r {groups = 4 : i64} : tensor<2x6x4xf32>, tensor<2x4xf32> -> tensor<2x6x4xf32>
  return %dx : tensor<2x6x4xf32>
}

// -----

func.func @group_norm_zero_groups(%dy: tensor<2x6x4xf32>, %x: tensor<2x6x4xf32>, %m: tensor<2x0xf32>, %r: tensor<2x0xf32>) -> tensor<2x6x4xf32> {
  // expected-error @+1 {{'norm.group_norm_grad' op attribute 'groups' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %dx = norm.group_norm_grad %dy, %x, %m, %r {groups = 0 : i64} : tensor<2x6x4xf32>, tensor<2x0xf32> -> tensor<2x6x4xf32>
  return %dx : tensor<2x6x4xf32>
}

// -----

func.func @group_norm_stats_shape(%dy: tensor<2x6x4xf32>, %x: tensor<2x6x4xf32>, %m: tensor<2x3xf32>, %r: tensor<2x3xf32>) -> tensor<2x6x4xf32> {
  // expected-error @+1 {{'norm.group_norm_grad' op expects 'mean' and 'rstd' shaped [N, groups] = [2, 2], got 'tensor<2x3xf32>'}}
  %dx = norm.group_norm_grad %dy, %x, %m, %r {groups = 2 : i64} : tensor<2x6x4xf32>, tensor<2x3xf32> -> tensor<2x6x4xf32>
  return %dx : tensor<2x6x4xf32>
}

// -----

func.func @group_norm_weight_shape(%dy: tensor<2x4x6xf32>, %x: tensor<2x4x6xf32>, %m: tensor<2x2xf32>, %r: tensor<2x2xf32>, %w: tensor<4xf32>) -> tensor<2x4x6xf32> {
  // expected-error @+1 {{'norm.group_norm_grad' op expects 'weight' to be 1-D with the channel count of 'x' 'tensor<2x4x6xf32>', got 'tensor<4xf32>'}}
  %dx, %dw = norm.group_norm_grad %dy, %x, %m, %r weight(%w : tensor<4xf32>) {groups = 2 : i64, channels_last} : tensor<2x4x6xf32>, tensor<2x2xf32> -> tensor<2x4x6xf32>, tensor<4xf32>
  return %dx : tensor<2x4x6xf32>
}

// -----

func.func @group_norm_rank(%dy: tensor<6xf32>, %x: tensor<6xf32>, %m: tensor<1x2xf32>, %r: tensor<1x2xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'norm.group_norm_grad' op expects 'x' of rank >= 2}}
  %dx = norm.group_norm_grad %dy, %x, %m, %r {groups = 2 : i64} : tensor<6xf32>, tensor<1x2xf32> -> tensor<6xf32>
  return %dx : tensor<6xf32>
}
