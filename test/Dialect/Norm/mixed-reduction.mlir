// RUN: norm-opt %s -split-input-file | norm-opt -split-input-file | FileCheck %s
// RUN: norm-opt %s -split-input-file -mlir-print-op-generic | norm-opt -split-input-file | FileCheck %s
// RUN: %if mlir-opt-plugin %{ %mlir_opt_plugin %s -split-input-file | %mlir_opt_plugin -split-input-file | FileCheck %s %}

// CHECK-LABEL: func.func @rms_one_stage
// CHECK:         %{{.*}}, %{{.*}} = norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>) row(%{{.*}} : tensor<4xf32>) col(%{{.*}} : tensor<8xf32>) col_init(%{{.*}} : tensor<8xf32>) row_stages {
// CHECK-NEXT:    ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK:           norm.yield %{{.*}} : f32
// CHECK-NEXT:    } elementwise {
// CHECK-NEXT:    ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK:           norm.yield %{{.*}} : f32
// CHECK-NEXT:    } columns {
// CHECK:           norm.yield %{{.*}} : f32
// CHECK-NEXT:    } -> full(tensor<4x8xf32>) col(tensor<8xf32>)
func.func @rms_one_stage(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %rstd: tensor<4xf32>, %w: tensor<8xf32>, %z: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %n = arith.constant 8.0 : f32
  %dx, %dw = norm.mixed_reduction full(%x, %dy : tensor<4x8xf32>, tensor<4x8xf32>) row(%rstd : tensor<4xf32>) col(%w : tensor<8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%xe: f32, %dye: f32, %r: f32, %we: f32):
    %xhat = arith.mulf %xe, %r : f32
    %wdy = arith.mulf %dye, %we : f32
    %c = arith.mulf %xhat, %wdy : f32
    norm.yield %c : f32
  }
  elementwise {
  ^bb0(%xe: f32, %dye: f32, %r: f32, %we: f32, %s: f32):
    %xhat = arith.mulf %xe, %r : f32
    %wdy = arith.mulf %dye, %we : f32
    %c1 = arith.divf %s, %n : f32
    %p = arith.mulf %xhat, %c1 : f32
    %d = arith.subf %wdy, %p : f32
    %dxe = arith.mulf %d, %r : f32
    norm.yield %dxe : f32
  }
  columns {
  ^bb0(%xe: f32, %dye: f32, %r: f32, %we: f32, %s: f32):
    %xhat = arith.mulf %xe, %r : f32
    %c = arith.mulf %dye, %xhat : f32
    norm.yield %c : f32
  } -> full(tensor<4x8xf32>) col(tensor<8xf32>)
  return %dx, %dw : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Two stages (a recomputed mean, then a centred sum), a bf16 rank-3 domain
// with dynamic rows, no row/col inputs, two full results, no column init
// beyond the two sums.
// CHECK-LABEL: func.func @two_stages_rank3
// CHECK:         norm.mixed_reduction full(%{{.*}} : tensor<?x3x16xbf16>) col_init(%{{.*}}, %{{.*}} : tensor<16xf32>, tensor<16xf32>) row_stages {
// CHECK:         }, {
// CHECK-NEXT:    ^bb0(%{{.*}}: bf16, %{{.*}}: f32):
// CHECK:         } -> full(tensor<?x3x16xbf16>, tensor<?x3x16xf32>) col(tensor<16xf32>, tensor<16xf32>)
func.func @two_stages_rank3(%x: tensor<?x3x16xbf16>, %z: tensor<16xf32>) -> (tensor<?x3x16xbf16>, tensor<?x3x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %n = arith.constant 16.0 : f32
  %a, %b, %c:2 = norm.mixed_reduction full(%x : tensor<?x3x16xbf16>) col_init(%z, %z : tensor<16xf32>, tensor<16xf32>)
  row_stages {
  ^bb0(%xe: bf16):
    %v = arith.extf %xe : bf16 to f32
    norm.yield %v : f32
  }, {
  ^bb0(%xe: bf16, %sum: f32):
    %v = arith.extf %xe : bf16 to f32
    %m = arith.divf %sum, %n : f32
    %d = arith.subf %v, %m : f32
    norm.yield %d : f32
  }
  elementwise {
  ^bb0(%xe: bf16, %sum: f32, %centred: f32):
    %v = arith.extf %xe : bf16 to f32
    %o = arith.subf %v, %centred : f32
    %t = arith.truncf %o : f32 to bf16
    norm.yield %t, %o : bf16, f32
  }
  columns {
  ^bb0(%xe: bf16, %sum: f32, %centred: f32):
    %v = arith.extf %xe : bf16 to f32
    norm.yield %v, %sum : f32, f32
  } -> full(tensor<?x3x16xbf16>, tensor<?x3x16xf32>) col(tensor<16xf32>, tensor<16xf32>)
  return %a, %b, %c#0, %c#1 : tensor<?x3x16xbf16>, tensor<?x3x16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A multi-axis domain (issue 42): adaLN over x [B, S, N]. Row sums over N
// (row_sum_dims = [2]), so row inputs are [B, S]; columns keep (B, N)
// (col_dims = [0, 2]), so (1 + scale) and d(scale), d(shift) are [B, N].

// CHECK-LABEL: func.func @adaln_multi_axis
// CHECK:         norm.mixed_reduction full(%{{.*}}, %{{.*}} : tensor<2x3x8xf32>, tensor<2x3x8xf32>) row(%{{.*}} : tensor<2x3xf32>) col(%{{.*}} : tensor<2x8xf32>) col_init(%{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2x8xf32>) row_stages {
// CHECK:         } {col_dims = array<i64: 0, 2>, row_sum_dims = array<i64: 2>} -> full(tensor<2x3x8xf32>) col(tensor<2x8xf32>, tensor<2x8xf32>)
func.func @adaln_multi_axis(%xhat: tensor<2x3x8xf32>, %dy: tensor<2x3x8xf32>, %rstd: tensor<2x3xf32>, %scale: tensor<2x8xf32>, %z: tensor<2x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %one = arith.constant 1.0 : f32
  %nf = arith.constant 8.0 : f32
  %dx, %dc:2 = norm.mixed_reduction full(%xhat, %dy : tensor<2x3x8xf32>, tensor<2x3x8xf32>) row(%rstd : tensor<2x3xf32>) col(%scale : tensor<2x8xf32>) col_init(%z, %z : tensor<2x8xf32>, tensor<2x8xf32>)
  row_stages {
  ^bb0(%h: f32, %d: f32, %r: f32, %s: f32):
    %w = arith.addf %s, %one : f32
    %g = arith.mulf %d, %w : f32
    %gh = arith.mulf %g, %h : f32
    norm.yield %gh, %g : f32, f32
  }
  elementwise {
  ^bb0(%h: f32, %d: f32, %r: f32, %s: f32, %sgh: f32, %sg: f32):
    %w = arith.addf %s, %one : f32
    %g = arith.mulf %d, %w : f32
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
  } {row_sum_dims = array<i64: 2>, col_dims = array<i64: 0, 2>} -> full(tensor<2x3x8xf32>) col(tensor<2x8xf32>, tensor<2x8xf32>)
  return %dx, %dc#0, %dc#1 : tensor<2x3x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
