// RUN: norm-opt %s -split-input-file --convert-norm-to-gpu -verify-diagnostics
// RUN: not norm-opt %s --convert-norm-to-gpu="threads-per-row=3" 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not norm-opt %s --convert-norm-to-gpu="vector-bytes=12" 2>&1 | FileCheck %s --check-prefix=VEC
// RUN: not norm-opt %s --convert-norm-to-gpu="chip=sm_75" 2>&1 | FileCheck %s --check-prefix=CHIP

// OPT: error: invalid GPU option 'threads-per-row=3': expected 0 (pick) or a power of two in [1, 1024]
// VEC: error: invalid GPU option 'vector-bytes=12': expected 1, 2, 4, 8 or 16
// CHIP: error: invalid GPU option 'chip=sm_75': the kernels need sm_80 or newer

// A payload may capture constants, sizes of the domain and 0-d tensor
// reads; a scalar function argument cannot be moved into a kernel.
func.func @captured(%x: tensor<4x8xf32>, %scale: f32, %init: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dw = norm.mixed_reduction full(%x : tensor<4x8xf32>) col_init(%init : tensor<8xf32>) row_stages {
  ^bb0(%xe: f32):
    norm.yield %xe : f32
  } elementwise {
  ^bb0(%xe: f32, %s: f32):
    // expected-error @below {{convert-norm-to-gpu: a payload uses a value defined outside the op that is neither a constant nor computed from the domain's sizes}}
    %y = arith.mulf %xe, %scale : f32
    norm.yield %y : f32
  } columns {
  ^bb0(%xe: f32, %s: f32):
    norm.yield %xe : f32
  } -> full(tensor<4x8xf32>) col(tensor<8xf32>)
  return %dx, %dw : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Channels-first (n_dim): a run-time N cannot take the strided kernel (its accumulators are sized
// by N): a located error.
func.func @dynamic_n(%x: tensor<4x?x8xf32>, %r: tensor<4x8xf32>, %z: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{cannot map onto the GPU: a channels-first domain (N = dim 1 of 'tensor<4x?x8xf32>') needs a static N}}
  %c = norm.mixed_reduction full(%x : tensor<4x?x8xf32>) row(%r : tensor<4x8xf32>) col_init(%z : tensor<?xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %s: f32):
    norm.yield %a : f32
  } {n_dim = 1 : i64} -> col(tensor<?xf32>)
  return %c : tensor<?xf32>
}

// -----

// A multi-axis group that is neither batched rows (adaLN) nor a GroupNorm
// slab domain (here the dims' roles run R, C, A, D: the channel dim the
// rows sum over comes before the group dim) has no GPU kernels: a located
// error, not a miscompile (norm-opt compile's fuse step leaves such groups
// unfused: multi-axis=gpu). adaLN: convert-norm-to-gpu-batched.mlir;
// GroupNorm: convert-norm-to-gpu-slabs.mlir.
func.func @unsupported_multi_axis(%xhat: tensor<2x3x2x4xf32>, %dy: tensor<2x3x2x4xf32>, %rstd: tensor<2x2xf32>, %w: tensor<3x2xf32>, %z: tensor<3x2xf32>) -> (tensor<2x3x2x4xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %nf = arith.constant 12.0 : f32
  // expected-error @+1 {{cannot map onto the GPU: a multi-axis domain (row_sum_dims, col_dims) that is neither batched rows (adaLN's [B, S, N]) nor GroupNorm's slabs}}
  %dx, %dc:2 = norm.mixed_reduction full(%xhat, %dy : tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32>) row(%rstd : tensor<2x2xf32>) col(%w : tensor<3x2xf32>) col_init(%z, %z : tensor<3x2xf32>, tensor<3x2xf32>)
  row_stages {
  ^bb0(%h: f32, %d: f32, %r: f32, %s: f32):
    %g = arith.mulf %d, %s : f32
    %gh = arith.mulf %g, %h : f32
    norm.yield %gh, %g : f32, f32
  }
  elementwise {
  ^bb0(%h: f32, %d: f32, %r: f32, %s: f32, %sgh: f32, %sg: f32):
    %g = arith.mulf %d, %s : f32
    %a = arith.divf %sgh, %nf : f32
    %b = arith.divf %sg, %nf : f32
    %ha = arith.mulf %h, %a : f32
    %t = arith.subf %g, %b : f32
    %u = arith.subf %t, %ha : f32
    %v = arith.mulf %u, %r : f32
    norm.yield %v : f32
  }
  columns {
  ^bb0(%h: f32, %d: f32, %r: f32, %s: f32, %sgh: f32, %sg: f32):
    %p = arith.mulf %d, %h : f32
    norm.yield %p, %d : f32, f32
  } {row_sum_dims = array<i64: 1, 3>, col_dims = array<i64: 1, 2>} -> full(tensor<2x3x2x4xf32>) col(tensor<3x2xf32>, tensor<3x2xf32>)
  return %dx, %dc#0, %dc#1 : tensor<2x3x2x4xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}
