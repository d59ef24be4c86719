// RUN: norm-opt %s -split-input-file --norm-partial-accumulate=programs=3 | FileCheck %s
// RUN: %if mlir-opt-plugin %{ %mlir_opt_plugin %s -split-input-file --pass-pipeline='builtin.module(func.func(norm-partial-accumulate{programs=3}))' | FileCheck %s %}
// RUN: not norm-opt %s --norm-partial-accumulate=programs=0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADP

// BADP: 'programs' must be in [1, 65536], got 0

// RMSNorm with weight: one row stage, dx, one column sum.
// CHECK-LABEL: func.func @rms
// CHECK-SAME:    (%[[X:.*]]: tensor<?x64xbf16>, %[[DY:.*]]: tensor<?x64xbf16>, %[[R:.*]]: tensor<?xf32>, %[[W:.*]]: tensor<64xf32>, %[[Z:.*]]: tensor<64xf32>)
// CHECK-DAG:     %[[P:.*]] = arith.constant 3 : index
// CHECK-DAG:     %[[C64:.*]] = arith.constant 64 : index
// CHECK-DAG:     %[[M:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x64xbf16>
// CHECK-DAG:     %[[DXE:.*]] = tensor.empty(%[[M]]) : tensor<?x64xbf16>
// The fp32 partial buffer [P, N] is allocated in the IR.
// CHECK-DAG:     %[[WS:.*]] = tensor.empty() : tensor<3x64xf32>
// CHECK:         %[[B:.*]] = arith.ceildivui %[[M]], %[[P]] : index
// CHECK:         %[[F:.*]]:2 = scf.forall (%[[PID:.*]]) in (%[[P]]) shared_outs(%[[DXO:.*]] = %[[DXE]], %[[PART:.*]] = %[[WS]]) -> (tensor<?x64xbf16>, tensor<3x64xf32>) {
// CHECK:           %[[LO0:.*]] = arith.muli %[[PID]], %[[B]] : index
// CHECK:           %[[LO:.*]] = arith.minui %[[LO0]], %[[M]] : index
// CHECK:           %[[HI:.*]] = arith.minui %{{.*}}, %[[M]] : index
// CHECK:           %[[CNT:.*]] = arith.subi %[[HI]], %[[LO]] : index
// CHECK:           %[[TILE:.*]] = tensor.extract_slice %[[DXO]][%[[LO]], 0] [%[[CNT]], 64] [1, 1]
// CHECK:           %[[ACC0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<64xf32>)
// CHECK:           %[[ROWS:.*]]:2 = scf.for %[[ROW:.*]] = %[[LO]] to %[[HI]] step %{{.*}} iter_args(%[[T:.*]] = %[[TILE]], %[[ACC:.*]] = %[[ACC0]]) -> (tensor<?x64xbf16>, tensor<64xf32>) {
// Row stage: an f32 sum over the row.
// CHECK:             %[[S:.*]] = scf.for %{{.*}} = %{{.*}} to %[[C64]] step %{{.*}} iter_args(%[[SA:.*]] = %{{.*}}) -> (f32) {
// CHECK:               arith.addf %[[SA]], %{{.*}} : f32
// Elementwise + columns in one pass: dx inserted, column contribution
// added into the loop-carried fp32 accumulator.
// CHECK:             scf.for %[[COL:.*]] = %{{.*}} to %[[C64]] step %{{.*}} iter_args(%[[T2:.*]] = %[[T]], %[[A2:.*]] = %[[ACC]]) -> (tensor<?x64xbf16>, tensor<64xf32>) {
// CHECK:               arith.divf %[[S]], %{{.*}} : f32
// CHECK:               arith.truncf %{{.*}} : f32 to bf16
// CHECK:               tensor.insert %{{.*}} into %[[T2]]
// CHECK:               %[[OLD:.*]] = tensor.extract %[[A2]][%[[COL]]] : tensor<64xf32>
// CHECK:               %[[NEW:.*]] = arith.addf %[[OLD]], %{{.*}} : f32
// CHECK:               tensor.insert %[[NEW]] into %[[A2]][%[[COL]]] : tensor<64xf32>
// CHECK:           scf.forall.in_parallel {
// CHECK-NEXT:        tensor.parallel_insert_slice %[[ROWS]]#0 into %[[DXO]][%[[LO]], 0] [%[[CNT]], 64] [1, 1]
// CHECK-NEXT:        tensor.parallel_insert_slice %[[ROWS]]#1 into %[[PART]][%[[PID]], 0] [1, 64] [1, 1] : tensor<64xf32> into tensor<3x64xf32>
// Final reduction: for every column, the P partial rows in order, then the
// initial value.
// CHECK:         %[[DW:.*]] = scf.for %[[N:.*]] = %{{.*}} to %[[C64]] step %{{.*}} iter_args(%[[OUT:.*]] = %[[Z]]) -> (tensor<64xf32>) {
// CHECK:           %[[SUM:.*]] = scf.for %[[Q:.*]] = %{{.*}} to %[[P]] step %{{.*}} iter_args(%[[QA:.*]] = %{{.*}}) -> (f32) {
// CHECK:             %[[PQ:.*]] = tensor.extract %[[F]]#1[%[[Q]], %[[N]]] : tensor<3x64xf32>
// CHECK:             arith.addf %[[QA]], %[[PQ]] : f32
// CHECK:           %[[INIT:.*]] = tensor.extract %[[OUT]][%[[N]]] : tensor<64xf32>
// CHECK:           arith.addf %[[INIT]], %[[SUM]] : f32
// CHECK:         return %[[F]]#0, %[[DW]]
func.func @rms(%x: tensor<?x64xbf16>, %dy: tensor<?x64xbf16>, %rstd: tensor<?xf32>, %w: tensor<64xf32>, %z: tensor<64xf32>) -> (tensor<?x64xbf16>, tensor<64xf32>) {
  %n = arith.constant 64.0 : f32
  %dx, %dw = norm.mixed_reduction full(%x, %dy : tensor<?x64xbf16>, tensor<?x64xbf16>) row(%rstd : tensor<?xf32>) col(%w : tensor<64xf32>) col_init(%z : tensor<64xf32>)
  row_stages {
  ^bb0(%xe: bf16, %dye: bf16, %r: f32, %we: f32):
    %x32 = arith.extf %xe : bf16 to f32
    %dy32 = arith.extf %dye : bf16 to f32
    %xhat = arith.mulf %x32, %r : f32
    %wdy = arith.mulf %dy32, %we : f32
    %c = arith.mulf %xhat, %wdy : f32
    norm.yield %c : f32
  }
  elementwise {
  ^bb0(%xe: bf16, %dye: bf16, %r: f32, %we: f32, %s: f32):
    %x32 = arith.extf %xe : bf16 to f32
    %dy32 = arith.extf %dye : bf16 to f32
    %xhat = arith.mulf %x32, %r : f32
    %wdy = arith.mulf %dy32, %we : f32
    %c1 = arith.divf %s, %n : f32
    %p = arith.mulf %xhat, %c1 : f32
    %d = arith.subf %wdy, %p : f32
    %v = arith.mulf %d, %r : f32
    %t = arith.truncf %v : f32 to bf16
    norm.yield %t : bf16
  }
  columns {
  ^bb0(%xe: bf16, %dye: bf16, %r: f32, %we: f32, %s: f32):
    %x32 = arith.extf %xe : bf16 to f32
    %dy32 = arith.extf %dye : bf16 to f32
    %xhat = arith.mulf %x32, %r : f32
    %c = arith.mulf %dy32, %xhat : f32
    norm.yield %c : f32
  } -> full(tensor<?x64xbf16>) col(tensor<64xf32>)
  return %dx, %dw : tensor<?x64xbf16>, tensor<64xf32>
}

// -----

// Rank-3 domain: full inputs collapse to [B*S, N] and dx expands back;
// two chained row stages; two column results, each with its partial buffer.
// CHECK-LABEL: func.func @rank3_two_stages
// CHECK:         %[[XC:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<2x?x16xf32> into tensor<?x16xf32>
// CHECK-DAG:     tensor.empty() : tensor<3x16xf32>
// CHECK-DAG:     tensor.empty() : tensor<3x16xf32>
// CHECK:         scf.forall
// CHECK:           scf.for
// CHECK:             %[[S0:.*]] = scf.for {{.*}} -> (f32)
// CHECK:             %[[S1:.*]] = scf.for {{.*}} -> (f32)
// CHECK:               arith.divf %[[S0]]
// CHECK:           scf.forall.in_parallel
// CHECK-COUNT-3:     tensor.parallel_insert_slice
// CHECK:         tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [2, %{{.*}}, 16] : tensor<?x16xf32> into tensor<2x?x16xf32>
// CHECK-COUNT-2: scf.for {{.*}} -> (tensor<16xf32>)
func.func @rank3_two_stages(%x: tensor<2x?x16xf32>, %z: tensor<16xf32>) -> (tensor<2x?x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %n = arith.constant 16.0 : f32
  %a, %c:2 = norm.mixed_reduction full(%x : tensor<2x?x16xf32>) col_init(%z, %z : tensor<16xf32>, tensor<16xf32>)
  row_stages {
  ^bb0(%xe: f32):
    norm.yield %xe : f32
  }, {
  ^bb0(%xe: f32, %sum: f32):
    %m = arith.divf %sum, %n : f32
    %d = arith.subf %xe, %m : f32
    %sq = arith.mulf %d, %d : f32
    norm.yield %sq : f32
  }
  elementwise {
  ^bb0(%xe: f32, %sum: f32, %ssq: f32):
    %o = arith.subf %xe, %ssq : f32
    norm.yield %o : f32
  }
  columns {
  ^bb0(%xe: f32, %sum: f32, %ssq: f32):
    norm.yield %xe, %ssq : f32, f32
  } -> full(tensor<2x?x16xf32>) col(tensor<16xf32>, tensor<16xf32>)
  return %a, %c#0, %c#1 : tensor<2x?x16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A statically empty domain has nothing to loop over (before: N = 0 built
// an out-of-bounds tensor.extract_slice): the full results are empty and
// the column results are their initial values.
// CHECK-LABEL: func.func @empty_columns
// CHECK-SAME:    (%[[X:.*]]: tensor<?x0xf32>, %[[INIT:.*]]: tensor<0xf32>)
// CHECK-NOT:     scf.forall
// CHECK:         %[[C0:.*]] = arith.constant 0 : index
// CHECK:         %[[M:.*]] = tensor.dim %[[X]], %[[C0]]
// CHECK:         %[[E:.*]] = tensor.empty(%[[M]]) : tensor<?x0xf32>
// CHECK:         return %[[E]], %[[INIT]] : tensor<?x0xf32>, tensor<0xf32>
func.func @empty_columns(%x: tensor<?x0xf32>, %init: tensor<0xf32>) -> (tensor<?x0xf32>, tensor<0xf32>) {
  %dx, %dw = norm.mixed_reduction full(%x : tensor<?x0xf32>) col_init(%init : tensor<0xf32>) row_stages {
  ^bb0(%a: f32):
    norm.yield %a : f32
  } elementwise {
  ^bb0(%a: f32, %s: f32):
    %v = arith.mulf %a, %s : f32
    norm.yield %v : f32
  } columns {
  ^bb0(%a: f32, %s: f32):
    norm.yield %a : f32
  } -> full(tensor<?x0xf32>) col(tensor<0xf32>)
  return %dx, %dw : tensor<?x0xf32>, tensor<0xf32>
}

// -----

// CHECK-LABEL: func.func @empty_rows
// CHECK-SAME:    (%[[X:.*]]: tensor<4x0x16xbf16>, %[[INIT:.*]]: tensor<16xbf16>)
// CHECK-NOT:     scf.forall
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4x0x16xbf16>
// CHECK:         return %[[E]], %[[INIT]] : tensor<4x0x16xbf16>, tensor<16xbf16>
func.func @empty_rows(%x: tensor<4x0x16xbf16>, %init: tensor<16xbf16>) -> (tensor<4x0x16xbf16>, tensor<16xbf16>) {
  %dx, %dw = norm.mixed_reduction full(%x : tensor<4x0x16xbf16>) col_init(%init : tensor<16xbf16>) row_stages {
  ^bb0(%a: bf16):
    norm.yield %a : bf16
  } elementwise {
  ^bb0(%a: bf16, %s: bf16):
    norm.yield %a : bf16
  } columns {
  ^bb0(%a: bf16, %s: bf16):
    norm.yield %a : bf16
  } -> full(tensor<4x0x16xbf16>) col(tensor<16xbf16>)
  return %dx, %dw : tensor<4x0x16xbf16>, tensor<16xbf16>
}

// -----

// Channels-first (n_dim = 1): the full inputs are transposed to [B, S, C],
// the loops run over the rows as usual, and dx is transposed back.
// CHECK-LABEL: func.func @channels_first
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<2x8x5xf32>) outs(%{{.*}} : tensor<2x5x8xf32>) permutation = [0, 2, 1]
// CHECK:         tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<2x5x8xf32> into tensor<10x8xf32>
// CHECK:         tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<2x5xf32> into tensor<10xf32>
// CHECK:         scf.forall
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<2x5x8xf32>) outs(%{{.*}} : tensor<2x8x5xf32>) permutation = [0, 2, 1]
func.func @channels_first(%x: tensor<2x8x5xf32>, %r: tensor<2x5xf32>, %z: tensor<8xf32>) -> (tensor<2x8x5xf32>, tensor<8xf32>) {
  %dx, %c = norm.mixed_reduction full(%x : tensor<2x8x5xf32>) row(%r : tensor<2x5xf32>) col_init(%z : tensor<8xf32>)
  row_stages {
  ^bb0(%a: f32, %b: f32):
    %p = arith.mulf %a, %b : f32
    norm.yield %p : f32
  } elementwise {
  ^bb0(%a: f32, %b: f32, %s: f32):
    %p = arith.mulf %a, %s : f32
    norm.yield %p : f32
  } columns {
  ^bb0(%a: f32, %b: f32, %s: f32):
    norm.yield %a : f32
  } {n_dim = 1 : i64} -> full(tensor<2x8x5xf32>) col(tensor<8xf32>)
  return %dx, %c : tensor<2x8x5xf32>, tensor<8xf32>
}

// -----

// A multi-axis domain (adaLN: x [B, S, N], row_sum_dims = [2], col_dims =
// [0, 2]): the rows are [B * S, N] as in 2-D, the column slots are the
// (b, n) of each point, [B * N] per program: b = row / S, so a program
// whose rows cross a sample adds each row into its sample's slots. The
// partials are [P, B * N]; the final reduction runs over B * N slots and
// expands back to [B, N].

// CHECK-LABEL: func.func @adaln_multi_axis
// CHECK-DAG:     %[[X:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
// CHECK-DAG:     %[[R:.*]] = tensor.collapse_shape %arg2 {{\[\[}}0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK-DAG:     %[[SC:.*]] = tensor.collapse_shape %arg3 {{\[\[}}0, 1]] : tensor<2x8xf32> into tensor<16xf32>
// CHECK:         scf.forall (%[[P:.*]]) in (%{{.*}}) shared_outs({{.*}}) -> (tensor<6x8xf32>, tensor<3x16xf32>, tensor<3x16xf32>)
// CHECK:           linalg.fill {{.*}} -> tensor<16xf32>
// CHECK:           scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (tensor<?x8xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK:             scf.for %[[COL:.*]] = %{{.*}} to %{{.*}} step
// CHECK:               %[[B:.*]] = arith.divui %[[ROW]], %{{.*}} : index
// CHECK:               arith.remui %[[B]], %{{.*}} : index
// CHECK:               tensor.extract %[[SC]][%{{.*}}] : tensor<16xf32>
// CHECK:             scf.for %{{.*}} = %{{.*}} to %{{.*}} step {{.*}} -> (tensor<?x8xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK:               tensor.extract %[[SC]][%{{.*}}] : tensor<16xf32>
// CHECK:               tensor.extract %arg{{[0-9]+}}[%[[SLOT:.*]]] : tensor<16xf32>
// CHECK:               tensor.insert %{{.*}} into %arg{{[0-9]+}}[%[[SLOT]]] : tensor<16xf32>
// CHECK:           tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[P]], 0] [1, 16] [1, 1] : tensor<16xf32> into tensor<3x16xf32>
// CHECK:         tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [2, 3, 8] : tensor<6x8xf32> into tensor<2x3x8xf32>
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c16
// CHECK:         tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [2, 8] : tensor<16xf32> into tensor<2x8xf32>
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c16
// CHECK:         tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [2, 8] : tensor<16xf32> into tensor<2x8xf32>
// CHECK-NOT:     norm.mixed_reduction
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
