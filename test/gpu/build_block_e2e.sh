#!/usr/bin/env bash
# Issue 26's end-to-end run: a whole block backward in linalg
# (examples/transformer_block_backward.mlir: matmul -> RMSNorm backward ->
# add -> matmul -> LayerNorm backward) lowered by ONE pipeline: the norm
# groups by ours (--norm-lower-to-nvvm, then --convert-norm-to-gpu-launch:
# gpu.launch_func on the GPU), everything else by upstream passes (the
# matmuls and the add as host loops). Allocations go through
# finalize-memref-to-llvm's generic functions, which test/gpu/tools/
# block_e2e_main.c backs with managed memory (mgpuMemAlloc host_shared), so
# host loops and kernels share every buffer. The GPU machine has no MLIR, so
# instead of mlir-runner the lowered module is compiled here and linked with
# the runtime into OUT/block_e2e (RUNPATH $ORIGIN); test/gpu/block_e2e_check.py
# runs it there against float64. (llvm-request-c-wrappers runs before the
# host lowering: the runtime's declarations keep their C names.)
#   test/gpu/build_block_e2e.sh [OUT=.carry/block_e2e]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/.carry/block_e2e}
llvm=/usr/lib/llvm-22
norm_opt=${NORM_OPT:-$root/build/bin/norm-opt}
mkdir -p "$out"
"$norm_opt" "$root/examples/transformer_block_backward.mlir" \
  --norm-lower-to-nvvm --llvm-request-c-wrappers \
  --convert-norm-to-gpu-launch="host-shared=true synchronize=true" \
  -o "$out/block.launch.mlir"
"$norm_opt" "$out/block.launch.mlir" -pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},convert-linalg-to-loops,convert-scf-to-cf,expand-strided-metadata,finalize-memref-to-llvm{use-generic-functions=true},gpu-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)' \
  -o "$out/block.llvm.mlir"
"$llvm/bin/mlir-translate" --mlir-to-llvmir "$out/block.llvm.mlir" -o "$out/block.ll"
clang-22 -O2 -c "$out/block.ll" -o "$out/block.o"
cp "$root/build/lib/libnorm_runtime.so" "$out/"
clang-22 -O2 "$out/block.o" "$root/test/gpu/tools/block_e2e_main.c" \
  -o "$out/block_e2e" -L"$out" -lnorm_runtime -lm -Wl,-rpath,'$ORIGIN'
echo "built $out/block_e2e"
