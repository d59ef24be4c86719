// RUN: norm-opt %s --norm-merge-nested-sums -split-input-file -mlir-print-debuginfo | FileCheck %s

#id3 = affine_map<(n, c, p) -> (n, c, p)>
#nc3 = affine_map<(n, c, p) -> (n, c)>
#id2 = affine_map<(n, c) -> (n, c)>
#n2 = affine_map<(n, c) -> (n)>
#c2 = affine_map<(n, c) -> (c)>

// The statistic of dx: a sum over the channels of (a per-channel sum over
// the positions) times the weight, one sum over (c, p) with the weight in
// its payload; its location names both.
// CHECK-LABEL: func.func @row_of_channel_sums
// CHECK:         %[[S:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "reduction", "reduction"]}
// CHECK-SAME:      ins(%arg0, %arg1 : tensor<2x4x6xf32>, tensor<4xf32>)
// CHECK:           %[[P:.*]] = arith.mulf
// CHECK:           %[[A:.*]] = arith.addf
// CHECK:         } -> tensor<2xf32> loc(#[[LOC:loc[0-9]+]])
// CHECK:         return %[[S]]
// CHECK-DAG:   #[[OUTER:loc[0-9]+]] = loc("outer")
// CHECK-DAG:   #[[INNER:loc[0-9]+]] = loc("inner")
// CHECK:       #[[LOC]] = loc(fused[#[[OUTER]], #[[INNER]]])
func.func @row_of_channel_sums(%x: tensor<2x4x6xf32>, %w: tensor<4xf32>) -> tensor<2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %t = linalg.generic {indexing_maps = [#id3, #nc3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x4x6xf32>) outs(%z : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32> loc("inner")
  %e2 = tensor.empty() : tensor<2xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2xf32>) -> tensor<2xf32>
  %s = linalg.generic {indexing_maps = [#id2, #c2, #n2], iterator_types = ["parallel", "reduction"]}
      ins(%t, %w : tensor<2x4xf32>, tensor<4xf32>) outs(%z2 : tensor<2xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  } -> tensor<2xf32> loc("outer")
  return %s : tensor<2xf32>
}

// -----

#id3 = affine_map<(n, c, p) -> (n, c, p)>
#nc3 = affine_map<(n, c, p) -> (n, c)>
#id2 = affine_map<(n, c) -> (n, c)>
#n2 = affine_map<(n, c) -> (n)>
#c2 = affine_map<(n, c) -> (c)>

// dweight: sum over N of (sum(dy x) - sum(dy) mean) rstd. The elementwise
// steps end only in that sum, so each becomes a sum too, and then the sum
// over N of them one sum over (n, p).
// CHECK-LABEL: func.func @column_of_channel_sums
// CHECK:         %[[D:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "reduction"]}
// CHECK-SAME:      ins(%arg0, %arg1, %arg0, %arg2, %arg3 : tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2xf32>, tensor<2xf32>)
// CHECK:           arith.subf
// CHECK:         } -> tensor<4xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[D]]
func.func @column_of_channel_sums(%dy: tensor<2x4x6xf32>, %x: tensor<2x4x6xf32>, %mean: tensor<2xf32>, %rstd: tensor<2xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %ds = linalg.generic {indexing_maps = [#id3, #id3, #nc3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy, %x : tensor<2x4x6xf32>, tensor<2x4x6xf32>) outs(%z : tensor<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %db = linalg.generic {indexing_maps = [#id3, #nc3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy : tensor<2x4x6xf32>) outs(%z : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %e1 = tensor.empty() : tensor<2x4xf32>
  %m = linalg.generic {indexing_maps = [#id2, #n2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%db, %mean : tensor<2x4xf32>, tensor<2xf32>) outs(%e1 : tensor<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %d = linalg.generic {indexing_maps = [#id2, #id2, #n2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%ds, %m, %rstd : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) outs(%e1 : tensor<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %r = arith.mulf %s, %c : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  %dw = linalg.generic {indexing_maps = [#id2, #c2], iterator_types = ["reduction", "parallel"]}
      ins(%d : tensor<2x4xf32>) outs(%z2 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %dw : tensor<4xf32>
}

// -----

#id3 = affine_map<(n, c, p) -> (n, c, p)>
#nc3 = affine_map<(n, c, p) -> (n, c)>
#id2 = affine_map<(n, c) -> (n, c)>
#n2 = affine_map<(n, c) -> (n)>

// Left as written: a sum of the square of a sum (not linear); a sum of a
// sum plus a constant (affine, not linear); an elementwise value of a sum
// that a result reads (it does not end in a sum); a sum into a non-zero
// init.
// CHECK-LABEL: func.func @not_merged
// CHECK-COUNT-6: linalg.generic
// CHECK-NOT:     linalg.generic
func.func @not_merged(%x: tensor<2x4x6xf32>, %acc: tensor<2x4xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2x4xf32>, tensor<2xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %t = linalg.generic {indexing_maps = [#id3, #nc3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x4x6xf32>) outs(%z : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %e2 = tensor.empty() : tensor<2xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2xf32>) -> tensor<2xf32>
  %sq = linalg.generic {indexing_maps = [#id2, #n2], iterator_types = ["parallel", "reduction"]}
      ins(%t : tensor<2x4xf32>) outs(%z2 : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %p = arith.mulf %a, %a : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  } -> tensor<2xf32>
  %aff = linalg.generic {indexing_maps = [#id2, #n2], iterator_types = ["parallel", "reduction"]}
      ins(%t : tensor<2x4xf32>) outs(%z2 : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %p = arith.addf %a, %one : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  } -> tensor<2xf32>
  %ew = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %p = arith.mulf %a, %one : f32
    linalg.yield %p : f32
  } -> tensor<2x4xf32>
  %u = linalg.generic {indexing_maps = [#id3, #nc3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x4x6xf32>) outs(%acc : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %v = linalg.generic {indexing_maps = [#id2, #n2], iterator_types = ["parallel", "reduction"]}
      ins(%u : tensor<2x4xf32>) outs(%z2 : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2xf32>
  return %sq, %aff, %ew, %v : tensor<2xf32>, tensor<2xf32>, tensor<2x4xf32>, tensor<2xf32>
}
