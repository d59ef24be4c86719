// RUN: norm-opt %s -split-input-file -verify-diagnostics

func.func @rank1_domain(%x: tensor<8xf32>, %z: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'norm.mixed_reduction' op expects a domain of rank >= 2 ([rows..., N]), got 'tensor<8xf32>'}}
  %c = norm.mixed_reduction full(%x : tensor<8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %s: f32):
    norm.yield %a : f32
  } -> col(tensor<8xf32>)
  return %c : tensor<8xf32>
}

// -----

func.func @full_inputs_disagree(%x: tensor<4x8xf32>, %y: tensor<4x9xf32>, %z: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects every 'full' input [rows..., N] to match the domain 'tensor<4x8xf32>', got 'tensor<4x9xf32>'}}
  %c = norm.mixed_reduction full(%x, %y : tensor<4x8xf32>, tensor<4x9xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %s: f32):
    norm.yield %a : f32
  } -> col(tensor<8xf32>)
  return %c : tensor<8xf32>
}

// -----

func.func @row_input_shape(%x: tensor<4x8xf32>, %r: tensor<8xf32>, %z: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects every 'row' input [rows...] to match the domain 'tensor<4x8xf32>', got 'tensor<8xf32>'}}
  %c = norm.mixed_reduction full(%x : tensor<4x8xf32>) row(%r : tensor<8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %s: f32):
    norm.yield %a : f32
  } -> col(tensor<8xf32>)
  return %c : tensor<8xf32>
}

// -----

func.func @col_result_type(%x: tensor<4x8xf32>, %z: tensor<8xf32>) -> tensor<8xf16> {
  // expected-error @+1 {{expects column result type 'tensor<8xf16>' to match its 'col_init' 'tensor<8xf32>'}}
  %c = norm.mixed_reduction full(%x : tensor<4x8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %s: f32):
    norm.yield %a : f32
  } -> col(tensor<8xf16>)
  return %c : tensor<8xf16>
}

// -----

func.func @stage_block_args(%x: tensor<4x8xf32>, %z: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{region 'row_stages #1' expects block arguments ('f32', 'f32'): one per full, row and col input, then the row results available to it}}
  %c = norm.mixed_reduction full(%x : tensor<4x8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32):
    norm.yield %a : f32
  }, {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %s: f32, %t: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %s: f32, %t: f32):
    norm.yield %a : f32
  } -> col(tensor<8xf32>)
  return %c : tensor<8xf32>
}

// -----

func.func @elementwise_yield_types(%x: tensor<4x8xf32>, %z: tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>) {
  %d, %c = norm.mixed_reduction full(%x : tensor<4x8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %s: f32):
    // expected-error @+1 {{'norm.yield' op in region 'elementwise' must yield ('bf16')}}
    norm.yield %a : f32
  } columns {
  ^bb0(%a: f32, %s: f32):
    norm.yield %a : f32
  } -> full(tensor<4x8xbf16>) col(tensor<8xf32>)
  return %d, %c : tensor<4x8xbf16>, tensor<8xf32>
}

// -----

func.func @empty_stage(%x: tensor<4x8xf32>, %z: tensor<8xf32>) -> tensor<8xf32> {
  %c = norm.mixed_reduction full(%x : tensor<4x8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32):
    // expected-error @+1 {{'norm.yield' op in region 'row_stages #0' must yield at least one contribution}}
    norm.yield
  } elementwise {
  ^bb0(%a: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } -> col(tensor<8xf32>)
  return %c : tensor<8xf32>
}

// -----

func.func @col_init_count(%x: tensor<4x8xf32>, %z: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{has 1 'col_init' values for 2 column results}}
  %c:2 = norm.mixed_reduction full(%x : tensor<4x8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %s: f32):
    norm.yield %a, %a : f32, f32
  } -> col(tensor<8xf32>, tensor<8xf32>)
  return %c#0, %c#1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// f64: the op computes in f32 (issue 14: every lowering failed on it).
func.func @f64_input(%x: tensor<4x8xf64>, %init: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'norm.mixed_reduction' op operand #0 must be variadic of ranked tensor of bfloat16 type or 16-bit float or 32-bit float or 1-bit signless integer or 8-bit signless integer or 16-bit signless integer or 32-bit signless integer values, but got 'tensor<4x8xf64>'}}
  %c = norm.mixed_reduction full(%x : tensor<4x8xf64>) col_init(%init : tensor<8xf32>) row_stages {
  ^bb0(%a: f64):
    %t = arith.truncf %a : f64 to f32
    norm.yield %t : f32
  } elementwise {
  ^bb0(%a: f64, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f64, %s: f32):
    %t = arith.truncf %a : f64 to f32
    norm.yield %t : f32
  } -> col(tensor<8xf32>)
  return %c : tensor<8xf32>
}

// -----

func.func @f64_column_result(%x: tensor<4x8xf32>, %init: tensor<8xf64>) -> tensor<8xf64> {
  // expected-error @+1 {{'norm.mixed_reduction' op operand #1 must be variadic of ranked tensor of bfloat16 type or 16-bit float or 32-bit float values, but got 'tensor<8xf64>'}}
  %c = norm.mixed_reduction full(%x : tensor<4x8xf32>) col_init(%init : tensor<8xf64>) row_stages {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %s: f32):
    %e = arith.extf %a : f32 to f64
    norm.yield %e : f64
  } -> col(tensor<8xf64>)
  return %c : tensor<8xf64>
}

// -----

func.func @f64_row_sum(%x: tensor<4x8xf32>, %init: tensor<8xf32>) -> tensor<8xf32> {
  %c = norm.mixed_reduction full(%x : tensor<4x8xf32>) col_init(%init : tensor<8xf32>) row_stages {
  ^bb0(%a: f32):
    %e = arith.extf %a : f32 to f64
    // expected-error @+1 {{'norm.yield' op in region 'row_stages #0' must yield bf16, f16 or f32 (sums are computed in f32), got 'f64'}}
    norm.yield %e : f64
  } elementwise {
  ^bb0(%a: f32, %s: f64):
    norm.yield
  } columns {
  ^bb0(%a: f32, %s: f64):
    norm.yield %a : f32
  } -> col(tensor<8xf32>)
  return %c : tensor<8xf32>
}

// -----

func.func @n_dim_out_of_range(%x: tensor<4x8xf32>, %z: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects n_dim in [0, 2), got 2}}
  %c = norm.mixed_reduction full(%x : tensor<4x8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %s: f32):
    norm.yield %a : f32
  } {n_dim = 2 : i64} -> col(tensor<8xf32>)
  return %c : tensor<8xf32>
}

// -----

// Channels-first: with n_dim = 1 the rows of [2, 8, 5] are [2, 5].
func.func @n_dim_row_shape(%x: tensor<2x8x5xf32>, %r: tensor<2x8xf32>, %z: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects every 'row' input [rows...] to match the domain 'tensor<2x8x5xf32>', got 'tensor<2x8xf32>'}}
  %c = norm.mixed_reduction full(%x : tensor<2x8x5xf32>) row(%r : tensor<2x8xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %s: f32):
    norm.yield %a : f32
  } {n_dim = 1 : i64} -> col(tensor<8xf32>)
  return %c : tensor<8xf32>
}

// -----

func.func @multi_axis_needs_both(%x: tensor<2x4x2x5xf32>, %r: tensor<2x4xf32>, %w: tensor<4x2xf32>, %z: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expects 'row_sum_dims' and 'col_dims' together (a multi-axis domain), or neither}}
  %c = norm.mixed_reduction full(%x : tensor<2x4x2x5xf32>) row(%r : tensor<2x4xf32>) col(%w : tensor<4x2xf32>) col_init(%z : tensor<4x2xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32, %e: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield %a : f32
  } {row_sum_dims = array<i64: 2, 3>} -> col(tensor<4x2xf32>)
  return %c : tensor<4x2xf32>
}
// -----

func.func @multi_axis_not_with_n_dim(%x: tensor<2x4x2x5xf32>, %r: tensor<2x4xf32>, %w: tensor<4x2xf32>, %z: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expects 'n_dim' or the multi-axis 'row_sum_dims' and 'col_dims', not both}}
  %c = norm.mixed_reduction full(%x : tensor<2x4x2x5xf32>) row(%r : tensor<2x4xf32>) col(%w : tensor<4x2xf32>) col_init(%z : tensor<4x2xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32, %e: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield %a : f32
  } {n_dim = 1 : i64, row_sum_dims = array<i64: 2, 3>, col_dims = array<i64: 1, 2>} -> col(tensor<4x2xf32>)
  return %c : tensor<4x2xf32>
}
// -----

func.func @multi_axis_all_dims(%x: tensor<2x4x2x5xf32>, %r: tensor<2x4xf32>, %w: tensor<4x2xf32>, %z: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expects 'row_sum_dims' to hold some but not all of the domain's 4 dims, got 4}}
  %c = norm.mixed_reduction full(%x : tensor<2x4x2x5xf32>) row(%r : tensor<2x4xf32>) col(%w : tensor<4x2xf32>) col_init(%z : tensor<4x2xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32, %e: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield %a : f32
  } {row_sum_dims = array<i64: 0, 1, 2, 3>, col_dims = array<i64: 1, 2>} -> col(tensor<4x2xf32>)
  return %c : tensor<4x2xf32>
}
// -----

func.func @multi_axis_unsorted(%x: tensor<2x4x2x5xf32>, %r: tensor<2x4xf32>, %w: tensor<4x2xf32>, %z: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expects 'row_sum_dims' to be strictly ascending dims in [0, 4)}}
  %c = norm.mixed_reduction full(%x : tensor<2x4x2x5xf32>) row(%r : tensor<2x4xf32>) col(%w : tensor<4x2xf32>) col_init(%z : tensor<4x2xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32, %e: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield %a : f32
  } {row_sum_dims = array<i64: 3, 2>, col_dims = array<i64: 1, 2>} -> col(tensor<4x2xf32>)
  return %c : tensor<4x2xf32>
}
// -----

func.func @multi_axis_out_of_range(%x: tensor<2x4x2x5xf32>, %r: tensor<2x4xf32>, %w: tensor<4x2xf32>, %z: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expects 'col_dims' to be strictly ascending dims in [0, 4)}}
  %c = norm.mixed_reduction full(%x : tensor<2x4x2x5xf32>) row(%r : tensor<2x4xf32>) col(%w : tensor<4x2xf32>) col_init(%z : tensor<4x2xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32, %e: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield %a : f32
  } {row_sum_dims = array<i64: 2, 3>, col_dims = array<i64: 1, 4>} -> col(tensor<4x2xf32>)
  return %c : tensor<4x2xf32>
}
// -----

func.func @multi_axis_disjoint(%x: tensor<2x4x2x5xf32>, %r: tensor<2x4xf32>, %w: tensor<4x2xf32>, %z: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expects 'row_sum_dims' and 'col_dims' to share a dim}}
  %c = norm.mixed_reduction full(%x : tensor<2x4x2x5xf32>) row(%r : tensor<2x4xf32>) col(%w : tensor<4x2xf32>) col_init(%z : tensor<4x2xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32, %e: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield %a : f32
  } {row_sum_dims = array<i64: 2, 3>, col_dims = array<i64: 0, 1>} -> col(tensor<4x2xf32>)
  return %c : tensor<4x2xf32>
}
// -----

func.func @multi_axis_spelling_2d(%x: tensor<2x4x2x5xf32>, %r: tensor<2x4x5xf32>, %w: tensor<2xf32>, %z: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{expects the 2-D form (row_sum_dims = col_dims = [2]) to be spelled 'n_dim = 2'}}
  %c = norm.mixed_reduction full(%x : tensor<2x4x2x5xf32>) row(%r : tensor<2x4x5xf32>) col(%w : tensor<2xf32>) col_init(%z : tensor<2xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32, %e: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield %a : f32
  } {row_sum_dims = array<i64: 2>, col_dims = array<i64: 2>} -> col(tensor<2xf32>)
  return %c : tensor<2xf32>
}
// -----

// GroupNorm over [N, G, C/G, HW]: the statistics are [N, G], not [N, C/G].
func.func @multi_axis_row_shape(%x: tensor<2x4x2x5xf32>, %r: tensor<2x2xf32>, %w: tensor<4x2xf32>, %z: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expects every 'row' input (the dims not in row_sum_dims) to match the domain 'tensor<2x4x2x5xf32>', got 'tensor<2x2xf32>'}}
  %c = norm.mixed_reduction full(%x : tensor<2x4x2x5xf32>) row(%r : tensor<2x2xf32>) col(%w : tensor<4x2xf32>) col_init(%z : tensor<4x2xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32, %e: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield %a : f32
  } {row_sum_dims = array<i64: 2, 3>, col_dims = array<i64: 1, 2>} -> col(tensor<4x2xf32>)
  return %c : tensor<4x2xf32>
}
// -----

// ... and the weight and its gradient [G, C/G].
func.func @multi_axis_col_shape(%x: tensor<2x4x2x5xf32>, %r: tensor<2x4xf32>, %w: tensor<8xf32>, %z: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{expects every 'col' input (col_dims) to match the domain 'tensor<2x4x2x5xf32>', got 'tensor<8xf32>'}}
  %c = norm.mixed_reduction full(%x : tensor<2x4x2x5xf32>) row(%r : tensor<2x4xf32>) col(%w : tensor<8xf32>) col_init(%z : tensor<4x2xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32, %e: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield
  } columns {
  ^bb0(%a: f32, %b: f32, %e: f32, %s: f32):
    norm.yield %a : f32
  } {row_sum_dims = array<i64: 2, 3>, col_dims = array<i64: 1, 2>} -> col(tensor<4x2xf32>)
  return %c : tensor<4x2xf32>
}
