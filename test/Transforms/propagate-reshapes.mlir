// RUN: norm-opt %s --norm-propagate-reshapes -split-input-file | FileCheck %s

// A sum over H*W of a collapsed [N, C, H, W]: the sum runs over H and W.
// CHECK-LABEL: func.func @sum_through_collapse
// CHECK-NOT:     tensor.collapse_shape
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
// CHECK-SAME:      ins(%arg0 : tensor<2x4x3x5xf32>) outs(%{{.*}} : tensor<2x4xf32>)
func.func @sum_through_collapse(%x: tensor<2x4x3x5xf32>) -> tensor<2x4xf32> {
  %c = tensor.collapse_shape %x [[0], [1], [2, 3]] : tensor<2x4x3x5xf32> into tensor<2x4x15xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(n, c, p) -> (n, c, p)>, affine_map<(n, c, p) -> (n, c)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c : tensor<2x4x15xf32>) outs(%z : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

// GroupNorm's [N, C] per-channel values viewed [N, G, C/G]: the generic
// computing them computes [N, G, C/G] (its other operand, the weight [C],
// expanded to [G, C/G]); the keepdim statistic read at (n, g, 0) stays.
// CHECK-LABEL: func.func @elementwise_into_expand
// CHECK-DAG:     %[[X:.*]] = tensor.expand_shape %arg0 {{\[\[}}0], [1, 2]] output_shape [%{{.*}}, 2, 2] : tensor<?x4xf32> into tensor<?x2x2xf32>
// CHECK-DAG:     %[[W:.*]] = tensor.expand_shape %arg1 {{\[\[}}0, 1]] output_shape [2, 2] : tensor<4xf32> into tensor<2x2xf32>
// CHECK:         %[[P:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[W]] : tensor<?x2x2xf32>, tensor<2x2xf32>) outs(%{{.*}} : tensor<?x2x2xf32>)
// CHECK-NOT:     tensor.expand_shape
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%[[P]], %arg2 : tensor<?x2x2xf32>, tensor<?x2x1xf32>)
// CHECK:         return %[[R]] : tensor<?x2x2xf32>
func.func @elementwise_into_expand(%t: tensor<?x4xf32>, %w: tensor<4xf32>, %m: tensor<?x2x1xf32>) -> tensor<?x2x2xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %t, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(n, c) -> (n, c)>, affine_map<(n, c) -> (c)>, affine_map<(n, c) -> (n, c)>], iterator_types = ["parallel", "parallel"]}
      ins(%t, %w : tensor<?x4xf32>, tensor<4xf32>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x4xf32>
  %v = tensor.expand_shape %p [[0], [1, 2]] output_shape [%n, 2, 2] : tensor<?x4xf32> into tensor<?x2x2xf32>
  %e2 = tensor.empty(%n) : tensor<?x2x2xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(n, g, c) -> (n, g, c)>, affine_map<(n, g, c) -> (n, g, 0)>, affine_map<(n, g, c) -> (n, g, c)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v, %m : tensor<?x2x2xf32>, tensor<?x2x1xf32>) outs(%e2 : tensor<?x2x2xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x2x2xf32>
  return %q : tensor<?x2x2xf32>
}

// -----

// A generic whose coarse result other users still read: the fine generic,
// and a collapse back for them.
// CHECK-LABEL: func.func @coarse_user_keeps_collapse
// CHECK:         %[[F:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x2x3xf32>)
// CHECK:         %[[C:.*]] = tensor.collapse_shape %[[F]] {{\[\[}}0], [1, 2]] : tensor<2x2x3xf32> into tensor<2x6xf32>
// CHECK:         return %[[F]], %[[C]]
func.func @coarse_user_keeps_collapse(%x: tensor<2x6xf32>) -> (tensor<2x2x3xf32>, tensor<2x6xf32>) {
  %e = tensor.empty() : tensor<2x6xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(n, c) -> (n, c)>, affine_map<(n, c) -> (n, c)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x6xf32>) outs(%e : tensor<2x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<2x6xf32>
  %v = tensor.expand_shape %p [[0], [1, 2]] output_shape [2, 2, 3] : tensor<2x6xf32> into tensor<2x2x3xf32>
  return %v, %p : tensor<2x2x3xf32>, tensor<2x6xf32>
}

// -----

// Left as written: a generic that reads its loop index (linalg.index), and
// a reshape next to a named op (the two alike collapses become one).
// CHECK-LABEL: func.func @not_expanded
// CHECK:         %[[C:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0], [1, 2]]
// CHECK:         linalg.generic {{.*}} ins(%[[C]] : tensor<2x15xf32>)
// CHECK:         linalg.index
// CHECK:         linalg.reduce ins(%[[C]] : tensor<2x15xf32>)
func.func @not_expanded(%x: tensor<2x3x5xf32>) -> (tensor<2x15xf32>, tensor<2xf32>) {
  %c = tensor.collapse_shape %x [[0], [1, 2]] : tensor<2x3x5xf32> into tensor<2x15xf32>
  %e = tensor.empty() : tensor<2x15xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(n, c) -> (n, c)>, affine_map<(n, c) -> (n, c)>], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<2x15xf32>) outs(%e : tensor<2x15xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %f = arith.sitofp %ii : i32 to f32
    %r = arith.mulf %a, %f : f32
    linalg.yield %r : f32
  } -> tensor<2x15xf32>
  %c2 = tensor.collapse_shape %x [[0], [1, 2]] : tensor<2x3x5xf32> into tensor<2x15xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2xf32>) -> tensor<2xf32>
  %s = linalg.reduce ins(%c2 : tensor<2x15xf32>) outs(%z : tensor<2xf32>) dimensions = [1]
    (%a: f32, %o: f32) {
      %r = arith.addf %a, %o : f32
      linalg.yield %r : f32
    }
  return %p, %s : tensor<2x15xf32>, tensor<2xf32>
}
