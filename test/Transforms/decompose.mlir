// --norm-decompose: norm.layer_norm_grad / norm.rms_norm_grad to the linalg
// on tensors chain a front end emits. The same checks hold with the pass
// anchored on functions, and no norm op survives it.
// RUN: norm-opt %s -norm-decompose -split-input-file | FileCheck %s
// RUN: norm-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(func.func(norm-decompose))' | FileCheck %s
// RUN: %if mlir-opt-plugin %{ %mlir_opt_plugin %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(func.func(norm-decompose))' | FileCheck %s %}
// RUN: norm-opt %s -norm-decompose -split-input-file \
// RUN:   | FileCheck %s --check-prefix=NONORM
// NONORM-NOT: norm.

// LayerNorm, bf16 activations, bf16 weight and bias: the whole chain.

// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:map[0-9]*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[COL:map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[VEC:map[0-9]*]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @layer_norm_bf16_weight_bias(
// CHECK-SAME: %[[DY:[^:]+]]: tensor<8x64xbf16>, %[[X:[^:]+]]: tensor<8x64xbf16>, %[[MEAN:[^:]+]]: tensor<8xf32>, %[[RSTD:[^:]+]]: tensor<8xf32>, %[[W:[^:]+]]: tensor<64xbf16>, %[[B:[^:]+]]: tensor<64xbf16>)
// CHECK-SAME: -> (tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>)

// x and dy to f32.
// CHECK: %[[E0:.+]] = tensor.empty() : tensor<8x64xf32>
// CHECK-NEXT: %[[X32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]] : tensor<8x64xbf16>) outs(%[[E0]] : tensor<8x64xf32>) {
// CHECK-NEXT: ^bb0(%[[IN:.+]]: bf16, %{{.+}}: f32):
// CHECK-NEXT: %[[V:.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: linalg.yield %[[V]] : f32
// CHECK-NEXT: } -> tensor<8x64xf32>
// CHECK: %[[E1:.+]] = tensor.empty() : tensor<8x64xf32>
// CHECK-NEXT: %[[DY32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[DY]] : tensor<8x64xbf16>) outs(%[[E1]] : tensor<8x64xf32>) {
// CHECK-NEXT: ^bb0(%[[IN:.+]]: bf16, %{{.+}}: f32):
// CHECK-NEXT: %[[V:.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: linalg.yield %[[V]] : f32

// xhat = (x - mean) * rstd, mean and rstd broadcast over N.
// CHECK: %[[XHAT:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X32]], %[[MEAN]], %[[RSTD]] : tensor<8x64xf32>, tensor<8xf32>, tensor<8xf32>) outs(%{{.+}} : tensor<8x64xf32>) {
// CHECK-NEXT: ^bb0(%[[XE:.+]]: f32, %[[ME:.+]]: f32, %[[RE:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: %[[C:.+]] = arith.subf %[[XE]], %[[ME]] : f32
// CHECK-NEXT: %[[V:.+]] = arith.mulf %[[C]], %[[RE]] : f32
// CHECK-NEXT: linalg.yield %[[V]] : f32

// The weight to f32, then wdy = w * dy, w broadcast over the rows.
// CHECK: %[[W32:.+]] = linalg.generic {indexing_maps = [#[[VEC]], #[[VEC]]], iterator_types = ["parallel"]} ins(%[[W]] : tensor<64xbf16>) outs(%{{.+}} : tensor<64xf32>) {
// CHECK: arith.extf %{{.+}} : bf16 to f32
// CHECK: %[[WDY:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[COL]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[DY32]], %[[W32]] : tensor<8x64xf32>, tensor<64xf32>) outs(%{{.+}} : tensor<8x64xf32>) {
// CHECK-NEXT: ^bb0(%[[DYE:.+]]: f32, %[[WE:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: %[[V:.+]] = arith.mulf %[[DYE]], %[[WE]] : f32
// CHECK-NEXT: linalg.yield %[[V]] : f32

// Row reductions over N, into zero-filled f32 [rows]: sum(xhat * wdy),
// sum(wdy).
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[E2:.+]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: %[[Z2:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E2]] : tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[SXW:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[XHAT]], %[[WDY]] : tensor<8x64xf32>, tensor<8x64xf32>) outs(%[[Z2]] : tensor<8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32, %[[B2:.+]]: f32, %[[ACC:.+]]: f32):
// CHECK-NEXT: %[[P:.+]] = arith.mulf %[[A]], %[[B2]] : f32
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: %[[E3:.+]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: %[[Z3:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E3]] : tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[SW:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[WDY]] : tensor<8x64xf32>) outs(%[[Z3]] : tensor<8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32, %[[ACC:.+]]: f32):
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[ACC]], %[[A]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32

// dx = rstd * (wdy - (xhat * sum(xhat * wdy) / N + sum(wdy) / N)), N = 64.
// CHECK: %[[N:.+]] = arith.constant 6.400000e+01 : f32
// CHECK: %[[DX32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ROW]], #[[ROW]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[XHAT]], %[[WDY]], %[[SXW]], %[[SW]], %[[RSTD]] : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%{{.+}} : tensor<8x64xf32>) {
// CHECK-NEXT: ^bb0(%[[XH:.+]]: f32, %[[WD:.+]]: f32, %[[S1:.+]]: f32, %[[S2:.+]]: f32, %[[R:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: %[[C1:.+]] = arith.divf %[[S1]], %[[N]] : f32
// CHECK-NEXT: %[[PROJ:.+]] = arith.mulf %[[XH]], %[[C1]] : f32
// CHECK-NEXT: %[[C2:.+]] = arith.divf %[[S2]], %[[N]] : f32
// CHECK-NEXT: %[[PROJ2:.+]] = arith.addf %[[PROJ]], %[[C2]] : f32
// CHECK-NEXT: %[[DIFF:.+]] = arith.subf %[[WD]], %[[PROJ2]] : f32
// CHECK-NEXT: %[[V:.+]] = arith.mulf %[[DIFF]], %[[R]] : f32
// CHECK-NEXT: linalg.yield %[[V]] : f32

// dx back to bf16.
// CHECK: %[[E4:.+]] = tensor.empty() : tensor<8x64xbf16>
// CHECK-NEXT: %[[DX:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[DX32]] : tensor<8x64xf32>) outs(%[[E4]] : tensor<8x64xbf16>) {
// CHECK-NEXT: ^bb0(%[[IN:.+]]: f32, %{{.+}}: bf16):
// CHECK-NEXT: %[[V:.+]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[V]] : bf16

// dweight = sum over rows of dy * xhat, into zero-filled f32 [N], then bf16.
// CHECK: %[[E5:.+]] = tensor.empty() : tensor<64xf32>
// CHECK-NEXT: %[[Z5:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E5]] : tensor<64xf32>) -> tensor<64xf32>
// CHECK-NEXT: %[[DW32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[COL]]], iterator_types = ["reduction", "parallel"]} ins(%[[DY32]], %[[XHAT]] : tensor<8x64xf32>, tensor<8x64xf32>) outs(%[[Z5]] : tensor<64xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32, %[[B2:.+]]: f32, %[[ACC:.+]]: f32):
// CHECK-NEXT: %[[P:.+]] = arith.mulf %[[A]], %[[B2]] : f32
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: %[[DW:.+]] = linalg.generic {indexing_maps = [#[[VEC]], #[[VEC]]], iterator_types = ["parallel"]} ins(%[[DW32]] : tensor<64xf32>) outs(%{{.+}} : tensor<64xbf16>) {
// CHECK: arith.truncf %{{.+}} : f32 to bf16

// dbias = sum over rows of dy, then bf16.
// CHECK: %[[E6:.+]] = tensor.empty() : tensor<64xf32>
// CHECK-NEXT: %[[Z6:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E6]] : tensor<64xf32>) -> tensor<64xf32>
// CHECK-NEXT: %[[DB32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[COL]]], iterator_types = ["reduction", "parallel"]} ins(%[[DY32]] : tensor<8x64xf32>) outs(%[[Z6]] : tensor<64xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32, %[[ACC:.+]]: f32):
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[ACC]], %[[A]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: %[[DB:.+]] = linalg.generic {indexing_maps = [#[[VEC]], #[[VEC]]], iterator_types = ["parallel"]} ins(%[[DB32]] : tensor<64xf32>) outs(%{{.+}} : tensor<64xbf16>) {
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// CHECK: return %[[DX]], %[[DW]], %[[DB]] : tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
// CHECK-NEXT: }
func.func @layer_norm_bf16_weight_bias(
    %dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>,
    %rstd: tensor<8xf32>, %w: tensor<64xbf16>, %b: tensor<64xbf16>)
    -> (tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd
      weight(%w : tensor<64xbf16>) bias(%b : tensor<64xbf16>)
      : tensor<8x64xbf16>, tensor<8xf32>
      -> tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
  return %dx, %dw, %db : tensor<8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
}

// -----

// RMSNorm, f32, no weight: no conversions, wdy is dy itself, one row
// reduction, no mean term, no column reduction.

// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:map[0-9]*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @rms_norm_f32_no_weight(
// CHECK-SAME: %[[DY:[^:]+]]: tensor<4x8xf32>, %[[X:[^:]+]]: tensor<4x8xf32>, %[[RSTD:[^:]+]]: tensor<4xf32>) -> tensor<4x8xf32>
// CHECK-NOT: arith.extf
// CHECK: %[[XHAT:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[RSTD]] : tensor<4x8xf32>, tensor<4xf32>) outs(%{{.+}} : tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[XE:.+]]: f32, %[[RE:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: %[[V:.+]] = arith.mulf %[[XE]], %[[RE]] : f32
// CHECK-NEXT: linalg.yield %[[V]] : f32
// CHECK-NOT: linalg.generic
// CHECK: %[[SXW:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[XHAT]], %[[DY]] : tensor<4x8xf32>, tensor<4x8xf32>) outs(%{{.+}} : tensor<4xf32>) {
// CHECK-NOT: linalg.generic
// CHECK: %[[N:.+]] = arith.constant 8.000000e+00 : f32
// CHECK: %[[DX:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ROW]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[XHAT]], %[[DY]], %[[SXW]], %[[RSTD]] : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) outs(%{{.+}} : tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[XH:.+]]: f32, %[[WD:.+]]: f32, %[[S1:.+]]: f32, %[[R:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: %[[C1:.+]] = arith.divf %[[S1]], %[[N]] : f32
// CHECK-NEXT: %[[PROJ:.+]] = arith.mulf %[[XH]], %[[C1]] : f32
// CHECK-NEXT: %[[DIFF:.+]] = arith.subf %[[WD]], %[[PROJ]] : f32
// CHECK-NEXT: %[[V:.+]] = arith.mulf %[[DIFF]], %[[R]] : f32
// CHECK-NEXT: linalg.yield %[[V]] : f32
// CHECK-NEXT: } -> tensor<4x8xf32>
// CHECK-NEXT: return %[[DX]] : tensor<4x8xf32>
// CHECK-NOT: arith.truncf
// CHECK-NOT: "reduction", "parallel"
func.func @rms_norm_f32_no_weight(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>,
                                  %rstd: tensor<4xf32>) -> tensor<4x8xf32> {
  %dx = norm.rms_norm_grad %dy, %x, %rstd
      : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  return %dx : tensor<4x8xf32>
}

// -----

// LayerNorm, f16, rank 3 ([B, S, N], stats [B, S]), zero-centred weight:
// wdy = (w + 1) * dy, and dweight reduces over both leading dims.

// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[ROW:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[COL:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[VEC:map[0-9]*]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @layer_norm_f16_3d_zero_centered(
// CHECK-SAME: %[[DY:[^:]+]]: tensor<2x16x64xf16>, %[[X:[^:]+]]: tensor<2x16x64xf16>, %[[MEAN:[^:]+]]: tensor<2x16xf32>, %[[RSTD:[^:]+]]: tensor<2x16xf32>, %[[W:[^:]+]]: tensor<64xf16>)
// CHECK: %[[X32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]] : tensor<2x16x64xf16>) outs(%{{.+}} : tensor<2x16x64xf32>)
// CHECK: arith.extf %{{.+}} : f16 to f32
// CHECK: %[[DY32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[DY]] : tensor<2x16x64xf16>) outs(%{{.+}} : tensor<2x16x64xf32>)
// CHECK: arith.extf %{{.+}} : f16 to f32
// CHECK: %[[XHAT:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X32]], %[[MEAN]], %[[RSTD]] : tensor<2x16x64xf32>, tensor<2x16xf32>, tensor<2x16xf32>)
// CHECK: %[[W32:.+]] = linalg.generic {indexing_maps = [#[[VEC]], #[[VEC]]], iterator_types = ["parallel"]} ins(%[[W]] : tensor<64xf16>) outs(%{{.+}} : tensor<64xf32>)
// CHECK: arith.extf %{{.+}} : f16 to f32
// CHECK: %[[WDY:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[COL]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[DY32]], %[[W32]] : tensor<2x16x64xf32>, tensor<64xf32>)
// CHECK-NEXT: ^bb0(%[[DYE:.+]]: f32, %[[WE:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[W1:.+]] = arith.addf %[[WE]], %[[ONE]] : f32
// CHECK-NEXT: %[[V:.+]] = arith.mulf %[[DYE]], %[[W1]] : f32
// CHECK-NEXT: linalg.yield %[[V]] : f32
// CHECK: %[[SXW:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ROW]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[XHAT]], %[[WDY]] : {{.*}}) outs(%{{.+}} : tensor<2x16xf32>)
// CHECK: %[[SW:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[WDY]] : tensor<2x16x64xf32>) outs(%{{.+}} : tensor<2x16xf32>)
// CHECK: %[[N:.+]] = arith.constant 6.400000e+01 : f32
// CHECK: %[[DX32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ROW]], #[[ROW]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[XHAT]], %[[WDY]], %[[SXW]], %[[SW]], %[[RSTD]] : {{.*}})
// CHECK: arith.divf %{{.+}}, %[[N]] : f32
// CHECK: %[[DX:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[DX32]] : tensor<2x16x64xf32>) outs(%{{.+}} : tensor<2x16x64xf16>)
// CHECK: arith.truncf %{{.+}} : f32 to f16
// dweight reads dy, not (w + 1) * dy.
// CHECK: %[[DW32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[COL]]], iterator_types = ["reduction", "reduction", "parallel"]} ins(%[[DY32]], %[[XHAT]] : tensor<2x16x64xf32>, tensor<2x16x64xf32>) outs(%{{.+}} : tensor<64xf32>)
// CHECK: %[[DW:.+]] = linalg.generic {indexing_maps = [#[[VEC]], #[[VEC]]], iterator_types = ["parallel"]} ins(%[[DW32]] : tensor<64xf32>) outs(%{{.+}} : tensor<64xf16>)
// CHECK: arith.truncf %{{.+}} : f32 to f16
// CHECK: return %[[DX]], %[[DW]] : tensor<2x16x64xf16>, tensor<64xf16>
func.func @layer_norm_f16_3d_zero_centered(
    %dy: tensor<2x16x64xf16>, %x: tensor<2x16x64xf16>, %mean: tensor<2x16xf32>,
    %rstd: tensor<2x16xf32>, %w: tensor<64xf16>)
    -> (tensor<2x16x64xf16>, tensor<64xf16>) {
  %dx, %dw = norm.layer_norm_grad %dy, %x, %mean, %rstd
      weight(%w : tensor<64xf16>) {zero_centered_weight}
      : tensor<2x16x64xf16>, tensor<2x16xf32> -> tensor<2x16x64xf16>, tensor<64xf16>
  return %dx, %dw : tensor<2x16x64xf16>, tensor<64xf16>
}

// -----

// RMSNorm, bf16, dynamic rows and N: sizes come from tensor.dim of x, and N
// is converted to f32 at run time.

// CHECK-LABEL: func.func @rms_norm_dynamic(
// CHECK-SAME: %[[DY:[^:]+]]: tensor<?x?xbf16>, %[[X:[^:]+]]: tensor<?x?xbf16>, %[[RSTD:[^:]+]]: tensor<?xf32>, %[[W:[^:]+]]: tensor<?xbf16>)
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG: %[[ROWS:.+]] = tensor.dim %[[X]], %[[C0]] : tensor<?x?xbf16>
// CHECK-DAG: %[[NDIM:.+]] = tensor.dim %[[X]], %[[C1]] : tensor<?x?xbf16>
// CHECK: tensor.empty(%[[ROWS]], %[[NDIM]]) : tensor<?x?xf32>
// CHECK: linalg.generic {{.*}} ins(%[[X]] : tensor<?x?xbf16>) outs(%{{.+}} : tensor<?x?xf32>)
// CHECK: tensor.empty(%[[NDIM]]) : tensor<?xf32>
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[W]] : tensor<?xbf16>) outs(%{{.+}} : tensor<?xf32>)
// CHECK: tensor.empty(%[[ROWS]]) : tensor<?xf32>
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: %[[SXW:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} outs(%{{.+}} : tensor<?xf32>)
// CHECK: %[[NI64:.+]] = arith.index_cast %[[NDIM]] : index to i64
// CHECK-NEXT: %[[N:.+]] = arith.uitofp %[[NI64]] : i64 to f32
// CHECK: %[[DX32:.+]] = linalg.generic {{.*}} ins(%{{.+}}, %{{.+}}, %[[SXW]], %[[RSTD]] : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) outs(%{{.+}} : tensor<?x?xf32>)
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: arith.divf %{{.+}}, %[[N]] : f32
// CHECK: %[[DX:.+]] = linalg.generic {{.*}} ins(%[[DX32]] : tensor<?x?xf32>) outs(%{{.+}} : tensor<?x?xbf16>)
// CHECK: tensor.empty(%[[NDIM]]) : tensor<?xf32>
// CHECK: %[[DW32:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}} outs(%{{.+}} : tensor<?xf32>)
// CHECK: %[[DW:.+]] = linalg.generic {{.*}} ins(%[[DW32]] : tensor<?xf32>) outs(%{{.+}} : tensor<?xbf16>)
// CHECK: return %[[DX]], %[[DW]] : tensor<?x?xbf16>, tensor<?xbf16>
func.func @rms_norm_dynamic(%dy: tensor<?x?xbf16>, %x: tensor<?x?xbf16>,
                            %rstd: tensor<?xf32>, %w: tensor<?xbf16>)
    -> (tensor<?x?xbf16>, tensor<?xbf16>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<?xbf16>)
      : tensor<?x?xbf16>, tensor<?xf32> -> tensor<?x?xbf16>, tensor<?xbf16>
  return %dx, %dw : tensor<?x?xbf16>, tensor<?xbf16>
}

// -----

// A static weight with a dynamic x: the column results are built with the
// dynamic N of x and cast back to the static result type.

// CHECK-LABEL: func.func @rms_norm_static_weight_dynamic_x(
// CHECK-SAME: %[[W:[^:]+]]: tensor<64xf32>) -> (tensor<?x?xbf16>, tensor<64xf32>)
// CHECK: %[[DW32:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}} outs(%{{.+}} : tensor<?xf32>)
// CHECK: } -> tensor<?xf32>
// CHECK-NEXT: %[[DW:.+]] = tensor.cast %[[DW32]] : tensor<?xf32> to tensor<64xf32>
// CHECK-NEXT: return %{{.+}}, %[[DW]] : tensor<?x?xbf16>, tensor<64xf32>
func.func @rms_norm_static_weight_dynamic_x(
    %dy: tensor<?x?xbf16>, %x: tensor<?x?xbf16>, %rstd: tensor<?xf32>,
    %w: tensor<64xf32>) -> (tensor<?x?xbf16>, tensor<64xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<64xf32>)
      : tensor<?x?xbf16>, tensor<?xf32> -> tensor<?x?xbf16>, tensor<64xf32>
  return %dx, %dw : tensor<?x?xbf16>, tensor<64xf32>
}

// -----

// A dynamic bias with a static x: the cast goes the other way.

// CHECK-LABEL: func.func @layer_norm_dynamic_bias_static_x(
// CHECK: %[[DB32:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}} outs(%{{.+}} : tensor<64xf32>)
// CHECK: } -> tensor<64xf32>
// CHECK-NEXT: %[[DB:.+]] = tensor.cast %[[DB32]] : tensor<64xf32> to tensor<?xf32>
// CHECK-NEXT: return %{{.+}}, %[[DB]] : tensor<8x64xf32>, tensor<?xf32>
func.func @layer_norm_dynamic_bias_static_x(
    %dy: tensor<8x64xf32>, %x: tensor<8x64xf32>, %mean: tensor<8xf32>,
    %rstd: tensor<8xf32>, %b: tensor<?xf32>) -> (tensor<8x64xf32>, tensor<?xf32>) {
  %dx, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd bias(%b : tensor<?xf32>)
      : tensor<8x64xf32>, tensor<8xf32> -> tensor<8x64xf32>, tensor<?xf32>
  return %dx, %db : tensor<8x64xf32>, tensor<?xf32>
}

// -----

// LayerNorm, bf16 x with f32 weight and bias: x and dy are widened, the
// weight is used as is and the column sums are returned without truncation.

// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[COL:map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @layer_norm_f32_params_bf16_x(
// CHECK-SAME: %[[DY:[^:]+]]: tensor<8x64xbf16>, %[[X:[^:]+]]: tensor<8x64xbf16>, %[[MEAN:[^:]+]]: tensor<8xf32>, %[[RSTD:[^:]+]]: tensor<8xf32>, %[[W:[^:]+]]: tensor<64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK: %[[X32:.+]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8x64xbf16>)
// CHECK: arith.extf %{{.+}} : bf16 to f32
// CHECK: %[[DY32:.+]] = linalg.generic {{.*}} ins(%[[DY]] : tensor<8x64xbf16>)
// CHECK: arith.extf %{{.+}} : bf16 to f32
// CHECK-NOT: arith.extf
// CHECK: %[[WDY:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[COL]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[DY32]], %[[W]] : tensor<8x64xf32>, tensor<64xf32>)
// CHECK-NOT: arith.extf
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// CHECK-NOT: arith.truncf
// CHECK: %[[DW:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[COL]]], iterator_types = ["reduction", "parallel"]} ins(%[[DY32]], %{{.+}} : tensor<8x64xf32>, tensor<8x64xf32>) outs(%{{.+}} : tensor<64xf32>)
// CHECK-NOT: arith.truncf
// CHECK: %[[DB:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[COL]]], iterator_types = ["reduction", "parallel"]} ins(%[[DY32]] : tensor<8x64xf32>) outs(%{{.+}} : tensor<64xf32>)
// CHECK-NOT: arith.truncf
// CHECK: return %{{.+}}, %[[DW]], %[[DB]] : tensor<8x64xbf16>, tensor<64xf32>, tensor<64xf32>
func.func @layer_norm_f32_params_bf16_x(
    %dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>,
    %rstd: tensor<8xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<8x64xbf16>, tensor<64xf32>, tensor<64xf32>) {
  %dx, %dw, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd
      weight(%w : tensor<64xf32>) bias(%b : tensor<64xf32>)
      : tensor<8x64xbf16>, tensor<8xf32>
      -> tensor<8x64xbf16>, tensor<64xf32>, tensor<64xf32>
  return %dx, %dw, %db : tensor<8x64xbf16>, tensor<64xf32>, tensor<64xf32>
}

// -----

// LayerNorm, bias without weight: wdy is dy itself, both row sums read it,
// and the only column reduction is dbias (f32 here, so no truncation).

// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:map[0-9]*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[COL:map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @layer_norm_bias_only(
// CHECK-SAME: %[[DY:[^:]+]]: tensor<8x64xbf16>, %[[X:[^:]+]]: tensor<8x64xbf16>, %[[MEAN:[^:]+]]: tensor<8xf32>, %[[RSTD:[^:]+]]: tensor<8xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK: %[[X32:.+]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8x64xbf16>)
// CHECK: %[[DY32:.+]] = linalg.generic {{.*}} ins(%[[DY]] : tensor<8x64xbf16>)
// CHECK: %[[XHAT:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X32]], %[[MEAN]], %[[RSTD]] :
// CHECK-NOT: #[[COL]]
// CHECK: %[[SXW:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[XHAT]], %[[DY32]] :
// CHECK: %[[SW:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[DY32]] :
// CHECK: %[[DX32:.+]] = linalg.generic {{.*}} ins(%[[XHAT]], %[[DY32]], %[[SXW]], %[[SW]], %[[RSTD]] :
// CHECK: %[[DX:.+]] = linalg.generic {{.*}} ins(%[[DX32]] : tensor<8x64xf32>) outs(%{{.+}} : tensor<8x64xbf16>)
// CHECK-NOT: linalg.generic
// CHECK: %[[DB:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[COL]]], iterator_types = ["reduction", "parallel"]} ins(%[[DY32]] : tensor<8x64xf32>) outs(%{{.+}} : tensor<64xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[DX]], %[[DB]] : tensor<8x64xbf16>, tensor<64xf32>
func.func @layer_norm_bias_only(
    %dy: tensor<8x64xbf16>, %x: tensor<8x64xbf16>, %mean: tensor<8xf32>,
    %rstd: tensor<8xf32>, %b: tensor<64xf32>) -> (tensor<8x64xbf16>, tensor<64xf32>) {
  %dx, %db = norm.layer_norm_grad %dy, %x, %mean, %rstd bias(%b : tensor<64xf32>)
      : tensor<8x64xbf16>, tensor<8xf32> -> tensor<8x64xbf16>, tensor<64xf32>
  return %dx, %db : tensor<8x64xbf16>, tensor<64xf32>
}

// -----

// RMSNorm, bias only (bf16): one row sum of xhat * dy, dbias truncated back
// to bf16, no dweight.

// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:map[0-9]*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[COL:map[0-9]*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @rms_norm_bias_only(
// CHECK-SAME: %[[DY:[^:]+]]: tensor<4x8xbf16>, %[[X:[^:]+]]: tensor<4x8xbf16>, %[[RSTD:[^:]+]]: tensor<4xf32>, %[[B:[^:]+]]: tensor<8xbf16>)
// CHECK: %[[X32:.+]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x8xbf16>)
// CHECK: %[[DY32:.+]] = linalg.generic {{.*}} ins(%[[DY]] : tensor<4x8xbf16>)
// CHECK: %[[XHAT:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X32]], %[[RSTD]] :
// CHECK: %[[SXW:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[XHAT]], %[[DY32]] :
// CHECK-NOT: "parallel", "reduction"
// CHECK: %[[DX32:.+]] = linalg.generic {{.*}} ins(%[[XHAT]], %[[DY32]], %[[SXW]], %[[RSTD]] :
// CHECK: %[[DX:.+]] = linalg.generic {{.*}} ins(%[[DX32]] : tensor<4x8xf32>) outs(%{{.+}} : tensor<4x8xbf16>)
// CHECK: %[[DB32:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[COL]]], iterator_types = ["reduction", "parallel"]} ins(%[[DY32]] : tensor<4x8xf32>) outs(%{{.+}} : tensor<8xf32>)
// CHECK: %[[DB:.+]] = linalg.generic {{.*}} ins(%[[DB32]] : tensor<8xf32>) outs(%{{.+}} : tensor<8xbf16>)
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// CHECK: return %[[DX]], %[[DB]] : tensor<4x8xbf16>, tensor<8xbf16>
func.func @rms_norm_bias_only(%dy: tensor<4x8xbf16>, %x: tensor<4x8xbf16>,
                              %rstd: tensor<4xf32>, %b: tensor<8xbf16>)
    -> (tensor<4x8xbf16>, tensor<8xbf16>) {
  %dx, %db = norm.rms_norm_grad %dy, %x, %rstd bias(%b : tensor<8xbf16>)
      : tensor<4x8xbf16>, tensor<4xf32> -> tensor<4x8xbf16>, tensor<8xbf16>
  return %dx, %db : tensor<4x8xbf16>, tensor<8xbf16>
}

// -----

// Ops the pass does not own stay as they are: an unrelated linalg.generic
// and arith op around a norm op, and their uses of its results.

// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @untouched_neighbours(
// CHECK-SAME: %[[DY:[^:]+]]: tensor<4x8xf32>, %[[X:[^:]+]]: tensor<4x8xf32>, %[[RSTD:[^:]+]]: tensor<4xf32>, %[[S:[^:]+]]: f32)
// CHECK: %[[SQ:.+]] = arith.mulf %[[S]], %[[S]] : f32
// CHECK-NEXT: %[[E:.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: %[[SCALED:.+]] = linalg.generic {indexing_maps = [#[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[DY]] : tensor<4x8xf32>) outs(%[[E]] : tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[IN:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT: %[[V:.+]] = arith.mulf %[[IN]], %[[SQ]] : f32
// CHECK-NEXT: linalg.yield %[[V]] : f32
// CHECK-NEXT: } -> tensor<4x8xf32>
// The decomposition reads the scaled dy and goes in between.
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%{{.+}}, %[[SCALED]] :
// CHECK: %[[DX:.+]] = linalg.generic {{.*}} ins(%{{.+}}, %[[SCALED]], %{{.+}}, %[[RSTD]] :
// CHECK: %[[SUM:.+]] = arith.addf %[[S]], %[[SQ]] : f32
// CHECK-NEXT: return %[[DX]], %[[SUM]] : tensor<4x8xf32>, f32
func.func @untouched_neighbours(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>,
                                %rstd: tensor<4xf32>, %s: f32)
    -> (tensor<4x8xf32>, f32) {
  %sq = arith.mulf %s, %s : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %scaled = linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                       affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%dy : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.mulf %in, %sq : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %dx = norm.rms_norm_grad %scaled, %x, %rstd
      : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  %sum = arith.addf %s, %sq : f32
  return %dx, %sum : tensor<4x8xf32>, f32
}

// -----

// Without norm ops the pass changes nothing.

// CHECK-LABEL: func.func @no_norm_ops(
// CHECK-SAME: %[[A:[^:]+]]: tensor<4x8xf32>, %[[B:[^:]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[E:.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: %[[R:.+]] = linalg.add ins(%[[A]], %[[B]] : tensor<4x8xf32>, tensor<4x8xf32>) outs(%[[E]] : tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[R]] : tensor<4x8xf32>
// CHECK-NEXT: }
func.func @no_norm_ops(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.add ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>)
      outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Norm ops nested in a region are rewritten in place, and two ops in one
// function are both rewritten.

// CHECK-LABEL: func.func @nested_and_repeated(
// CHECK: scf.if
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: scf.yield
// CHECK: } else {
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: scf.yield
// CHECK: }
// CHECK: return
func.func @nested_and_repeated(%c: i1, %dy: tensor<4x8xf32>, %x: tensor<4x8xf32>,
                               %mean: tensor<4xf32>, %rstd: tensor<4xf32>)
    -> tensor<4x8xf32> {
  %r = scf.if %c -> tensor<4x8xf32> {
    %dx = norm.rms_norm_grad %dy, %x, %rstd
        : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
    scf.yield %dx : tensor<4x8xf32>
  } else {
    %dx = norm.layer_norm_grad %dy, %x, %mean, %rstd
        : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
    scf.yield %dx : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

// GroupNorm, NCHW: the channels expanded into [groups, C / groups]; the
// statistics indexed by (n, group), the weight by (group, channel); the row
// reductions over the slab (channel in group, H, W: 2 x 3 x 3 = 18
// elements), the column reductions over N, H and W; dx and the parameter
// gradients collapsed back.

// CHECK-DAG: #[[GID:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[GROW:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1)>
// CHECK-DAG: #[[GCOL:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2)>
// CHECK-LABEL: func.func @group_norm_nchw(
// CHECK-SAME:    %[[DY:[^:]+]]: tensor<2x6x3x3xbf16>, %[[X:[^:]+]]: tensor<2x6x3x3xbf16>, %[[MEAN:[^:]+]]: tensor<2x3xf32>, %[[RSTD:[^:]+]]: tensor<2x3xf32>, %[[W:[^:]+]]: tensor<6xf32>
// CHECK-DAG:     %[[DYE:.*]] = tensor.expand_shape %[[DY]] {{\[}}[0], [1, 2], [3], [4]] output_shape [2, 3, 2, 3, 3] : tensor<2x6x3x3xbf16> into tensor<2x3x2x3x3xbf16>
// CHECK-DAG:     %[[XE:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2], [3], [4]] output_shape [2, 3, 2, 3, 3]
// CHECK-DAG:     %[[WE:.*]] = tensor.expand_shape %[[W]] {{\[}}[0, 1]] output_shape [3, 2] : tensor<6xf32> into tensor<3x2xf32>
// CHECK:         %[[XHAT:.*]] = linalg.generic {indexing_maps = [#[[GID]], #[[GROW]], #[[GROW]], #[[GID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%{{.*}}, %[[MEAN]], %[[RSTD]] :
// CHECK:         %[[WDY:.*]] = linalg.generic {indexing_maps = [#[[GID]], #[[GCOL]], #[[GID]]], {{.*}} ins(%{{.*}}, %[[WE]] :
// CHECK:         linalg.generic {indexing_maps = [#[[GID]], #[[GID]], #[[GROW]]], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%[[XHAT]], %[[WDY]] :
// CHECK:         linalg.generic {indexing_maps = [#[[GID]], #[[GROW]]], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%[[WDY]] :
// CHECK:         arith.constant 1.800000e+01 : f32
// CHECK:         %[[DW:.*]] = linalg.generic {indexing_maps = [#[[GID]], #[[GID]], #[[GCOL]]], iterator_types = ["reduction", "parallel", "parallel", "reduction", "reduction"]}
// CHECK:         %[[DB:.*]] = linalg.generic {indexing_maps = [#[[GID]], #[[GCOL]]], iterator_types = ["reduction", "parallel", "parallel", "reduction", "reduction"]}
// CHECK-DAG:     %[[DXC:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2], [3], [4]] : tensor<2x3x2x3x3xbf16> into tensor<2x6x3x3xbf16>
// CHECK-DAG:     %[[DWC:.*]] = tensor.collapse_shape %[[DW]] {{\[}}[0, 1]] : tensor<3x2xf32> into tensor<6xf32>
// CHECK-DAG:     %[[DBC:.*]] = tensor.collapse_shape %[[DB]] {{\[}}[0, 1]] : tensor<3x2xf32> into tensor<6xf32>
// CHECK:         return %[[DXC]], %[[DWC]], %[[DBC]]
func.func @group_norm_nchw(%dy: tensor<2x6x3x3xbf16>, %x: tensor<2x6x3x3xbf16>, %m: tensor<2x3xf32>, %r: tensor<2x3xf32>, %w: tensor<6xf32>, %b: tensor<6xf32>)
    -> (tensor<2x6x3x3xbf16>, tensor<6xf32>, tensor<6xf32>) {
  %dx, %dw, %db = norm.group_norm_grad %dy, %x, %m, %r
      weight(%w : tensor<6xf32>) bias(%b : tensor<6xf32>) {groups = 3 : i64}
      : tensor<2x6x3x3xbf16>, tensor<2x3xf32>
      -> tensor<2x6x3x3xbf16>, tensor<6xf32>, tensor<6xf32>
  return %dx, %dw, %db : tensor<2x6x3x3xbf16>, tensor<6xf32>, tensor<6xf32>
}

// -----

// GroupNorm, channels last with dynamic N and H: the channels (the last
// dim) expanded; the slab's size is H x (C / groups) at run time.

// CHECK-DAG: #[[CID:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[CROW:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2)>
// CHECK-DAG: #[[CCOL:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
// CHECK-LABEL: func.func @group_norm_channels_last_dynamic(
// CHECK:         %[[N:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x?x4xf32>
// CHECK:         %[[H:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x?x4xf32>
// CHECK:         tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2, 3]] output_shape [%[[N]], %[[H]], 2, 2] : tensor<?x?x4xf32> into tensor<?x?x2x2xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[CID]], #[[CID]], #[[CROW]]], iterator_types = ["parallel", "reduction", "parallel", "reduction"]}
// CHECK:         %[[SIZE:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK:         arith.index_cast %[[SIZE]] : index to i64
// CHECK:         linalg.generic {indexing_maps = [#[[CID]], #[[CID]], #[[CCOL]]], iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
// CHECK:         tensor.collapse_shape %{{.*}} {{\[}}[0], [1], [2, 3]] : tensor<?x?x2x2xf32> into tensor<?x?x4xf32>
func.func @group_norm_channels_last_dynamic(%dy: tensor<?x?x4xf32>, %x: tensor<?x?x4xf32>, %m: tensor<?x2xf32>, %r: tensor<?x2xf32>, %w: tensor<4xf32>)
    -> (tensor<?x?x4xf32>, tensor<4xf32>) {
  %dx, %dw = norm.group_norm_grad %dy, %x, %m, %r weight(%w : tensor<4xf32>)
      {groups = 2 : i64, channels_last}
      : tensor<?x?x4xf32>, tensor<?x2xf32> -> tensor<?x?x4xf32>, tensor<4xf32>
  return %dx, %dw : tensor<?x?x4xf32>, tensor<4xf32>
}
