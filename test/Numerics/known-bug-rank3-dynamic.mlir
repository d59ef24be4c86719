// Known bug, expected to fail until fixed (docs/numerics.md, "Bugs found"):
// --norm-lower-to-cpu crashes on rank-3 input whose two leading dims are
// both dynamic ([?, ?, N]). Partial accumulation collapses the full inputs
// to [?, N] and expands dx back with `tensor.expand_shape ... output_shape
// [%B, %S, N]`; after bufferization upstream --expand-strided-metadata
// (LLVM 22) segfaults on a memref.expand_shape with two dynamic sizes in one
// reassociation group (llvm-project issue 186830, fixed for LLVM 23). The
// unfused path has no expand_shape and runs. One dynamic leading dim
// ([B, ?, N] or [?, S, N]) works. When this passes, drop the XFAIL line and
// the "lead" entry of norm_diffgen.KNOWN_BUGS / KNOWN_FAILURES in
// lit_inputs_numerics.py.
//
// XFAIL: *
// RUN: norm-opt %s --norm-lower-to-cpu=programs=3 | FileCheck %s
// CHECK: llvm.func @rms_rank3_dynamic

func.func @rms_rank3_dynamic(%dy: tensor<?x?x8xf32>, %x: tensor<?x?x8xf32>, %rstd: tensor<?x?xf32>, %w: tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>) {
  %dx, %dw = norm.rms_norm_grad %dy, %x, %rstd weight(%w : tensor<8xf32>) : tensor<?x?x8xf32>, tensor<?x?xf32> -> tensor<?x?x8xf32>, tensor<8xf32>
  return %dx, %dw : tensor<?x?x8xf32>, tensor<8xf32>
}
