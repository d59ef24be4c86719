// RUN: norm-opt %s -split-input-file --norm-decompose -norm-fuse-mixed-reductions='remarks=true' -verify-diagnostics -mlir-print-op-on-diagnostic=false | FileCheck %s

// Integer and boolean inputs that riders read: a dropout keep-mask (i8 or
// i1), a mask that zeroes padded rows, a per-row integer id. The payload
// converts them (uitofp, select) and computes in f32; they are inputs of
// the fused op like any other.

#id = affine_map<(d0, d1) -> (d0, d1)>
// Dropout before the norm, as in fused dropout + residual + LayerNorm
// blocks: dy_eff = dy * keep / (1 - p), keep an i8 mask.
// CHECK-LABEL: func.func @dropout_i8
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x64xbf16>, tensor<4x64xbf16>, tensor<4x64xi8>)
// CHECK:           arith.uitofp %{{.*}} : i8 to f32
func.func @dropout_i8(%dy: tensor<4x64xbf16>, %keep: tensor<4x64xi8>, %x: tensor<4x64xbf16>,
    %rstd: tensor<4xf32>, %w: tensor<64xbf16>) -> (tensor<4x64xbf16>, tensor<64xbf16>) {
  %e = tensor.empty() : tensor<4x64xbf16>
  %kept = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %keep : tensor<4x64xbf16>, tensor<4x64xi8>) outs(%e : tensor<4x64xbf16>) {
  ^bb0(%g: bf16, %k: i8, %o: bf16):
    %kf = arith.uitofp %k : i8 to f32
    %gf = arith.extf %g : bf16 to f32
    %scale = arith.constant 1.25 : f32
    %v = arith.mulf %gf, %kf : f32
    %v2 = arith.mulf %v, %scale : f32
    %t = arith.truncf %v2 : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x64xbf16>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1}}
  %dx, %dw = norm.rms_norm_grad %kept, %x, %rstd weight(%w : tensor<64xbf16>)
      : tensor<4x64xbf16>, tensor<4xf32> -> tensor<4x64xbf16>, tensor<64xbf16>
  return %dx, %dw : tensor<4x64xbf16>, tensor<64xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// A boolean keep-mask through select, f32 LayerNorm.
// CHECK-LABEL: func.func @dropout_i1_select
// CHECK:         norm.mixed_reduction full({{.*}}tensor<8x32xi1>)
// CHECK:           arith.select
func.func @dropout_i1_select(%dy: tensor<8x32xf32>, %keep: tensor<8x32xi1>, %x: tensor<8x32xf32>,
    %mean: tensor<8xf32>, %rstd: tensor<8xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>)
    -> (tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>) {
  %e = tensor.empty() : tensor<8x32xf32>
  %kept = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %keep : tensor<8x32xf32>, tensor<8x32xi1>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%g: f32, %k: i1, %o: f32):
    %zero = arith.constant 0.0 : f32
    %scale = arith.constant 2.0 : f32
    %s = arith.mulf %g, %scale : f32
    %v = arith.select %k, %s, %zero : f32
    linalg.yield %v : f32
  } -> tensor<8x32xf32>
  // expected-remark @+4 {{fused a mixed-order reduction group}}
  // expected-remark @+3 {{fused: row reduction 2 of 2}}
  // expected-remark @+2 {{fused: column reduction 1 of 2}}
  // expected-remark @+1 {{fused: column reduction 2 of 2}}
  %dx, %dw, %db = norm.layer_norm_grad %kept, %x, %mean, %rstd
      weight(%w : tensor<32xf32>) bias(%b : tensor<32xf32>)
      : tensor<8x32xf32>, tensor<8xf32> -> tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>
  return %dx, %dw, %db : tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// Padded rows zeroed by a per-row boolean mask, and a per-row i32 id (a
// segment number) scaling dy: row inputs of integer types.
// CHECK-LABEL: func.func @row_mask_and_ids
// CHECK:         norm.mixed_reduction full({{.*}}) row({{.*}}tensor<6xi1>, tensor<6xi32>{{.*}})
// CHECK:           arith.sitofp %{{.*}} : i32 to f32
func.func @row_mask_and_ids(%dy: tensor<6x48xf32>, %valid: tensor<6xi1>, %ids: tensor<6xi32>,
    %x: tensor<6x48xf32>, %rstd: tensor<6xf32>, %w: tensor<48xf32>) -> (tensor<6x48xf32>, tensor<48xf32>) {
  %e = tensor.empty() : tensor<6x48xf32>
  %masked = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %valid, %ids : tensor<6x48xf32>, tensor<6xi1>, tensor<6xi32>) outs(%e : tensor<6x48xf32>) {
  ^bb0(%g: f32, %v: i1, %i: i32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %if = arith.sitofp %i : i32 to f32
    %s = arith.addf %if, %one : f32
    %gs = arith.mulf %g, %s : f32
    %r = arith.select %v, %gs, %zero : f32
    linalg.yield %r : f32
  } -> tensor<6x48xf32>
  // expected-remark @+2 {{fused a mixed-order reduction group}}
  // expected-remark @+1 {{fused: column reduction 1 of 1}}
  %dx, %dw = norm.rms_norm_grad %masked, %x, %rstd weight(%w : tensor<48xf32>)
      : tensor<6x48xf32>, tensor<6xf32> -> tensor<6x48xf32>, tensor<48xf32>
  return %dx, %dw : tensor<6x48xf32>, tensor<48xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
// What leaves the group must be floating point: an integer result (the
// flipped mask, also returned) keeps it unfused, with a remark on each of
// its reductions.
// CHECK-LABEL: func.func @integer_result_stays
// CHECK-NOT:     norm.mixed_reduction
func.func @integer_result_stays(%dy: tensor<4x16xf32>, %keep: tensor<4x16xi8>, %x: tensor<4x16xf32>,
    %rstd: tensor<4xf32>, %w: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xi8>) {
  %e = tensor.empty() : tensor<4x16xi8>
  %flip = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%keep : tensor<4x16xi8>) outs(%e : tensor<4x16xi8>) {
  ^bb0(%k: i8, %o: i8):
    %one = arith.constant 1 : i8
    %f = arith.xori %k, %one : i8
    linalg.yield %f : i8
  } -> tensor<4x16xi8>
  %ef = tensor.empty() : tensor<4x16xf32>
  %kept = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %flip : tensor<4x16xf32>, tensor<4x16xi8>) outs(%ef : tensor<4x16xf32>) {
  ^bb0(%g: f32, %k: i8, %o: f32):
    %kf = arith.uitofp %k : i8 to f32
    %v = arith.mulf %g, %kf : f32
    linalg.yield %v : f32
  } -> tensor<4x16xf32>
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty() : tensor<4xf32>
  %zr = linalg.fill ins(%zero : f32) outs(%er : tensor<4xf32>) -> tensor<4xf32>
  // expected-remark @+1 {{not fused: a result has element type i8 (the fused op computes in f32: bf16, f16 and f32 only)}}
  %s = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%kept, %x : tensor<4x16xf32>, tensor<4x16xf32>) outs(%zr : tensor<4xf32>) {
  ^bb0(%g: f32, %a: f32, %o: f32):
    %p = arith.mulf %g, %a : f32
    %v = arith.addf %o, %p : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %dx = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%kept, %s : tensor<4x16xf32>, tensor<4xf32>) outs(%ef : tensor<4x16xf32>) {
  ^bb0(%g: f32, %a: f32, %o: f32):
    %v = arith.subf %g, %a : f32
    linalg.yield %v : f32
  } -> tensor<4x16xf32>
  %ec = tensor.empty() : tensor<16xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<16xf32>) -> tensor<16xf32>
  // expected-remark @+1 {{not fused: a result has element type i8}}
  %dw = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%kept : tensor<4x16xf32>) outs(%zc : tensor<16xf32>) {
  ^bb0(%g: f32, %o: f32):
    %v = arith.addf %o, %g : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %dx, %dw, %flip : tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xi8>
}
