#!/usr/bin/env bash
# Lowers test/gpu/Inputs/upstream_abi_check.mlir with upstream passes only (run
# by norm-opt, which registers them), translates it to LLVM IR, compiles and
# links it against libnorm_runtime.so (the mgpu* entry points) and a print
# shim (test/gpu/tools/runner_print.c: what vector.print calls; MLIR's runner
# utilities need libMLIR, which the GPU machine lacks) into
# OUT/upstream_abi_check, with the runtime beside it (RUNPATH $ORIGIN):
# carry OUT to the GPU machine and run it there.
#   test/gpu/build_upstream_abi_check.sh [OUT=.carry/upstream]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/.carry/upstream}
llvm=/usr/lib/llvm-22
mkdir -p "$out"
"$root/build/bin/norm-opt" "$root/test/gpu/Inputs/upstream_abi_check.mlir" \
  -pass-pipeline='builtin.module(gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm),gpu-module-to-binary{format=isa},convert-vector-to-llvm,convert-scf-to-cf,expand-strided-metadata,finalize-memref-to-llvm,gpu-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)' \
  -o "$out/upstream_abi_check.llvm.mlir"
"$llvm/bin/mlir-translate" --mlir-to-llvmir "$out/upstream_abi_check.llvm.mlir" \
  -o "$out/upstream_abi_check.ll"
clang-22 -O2 -c "$out/upstream_abi_check.ll" -o "$out/upstream_abi_check.o"
cp "$root/build/lib/libnorm_runtime.so" "$out/"
clang-22 "$out/upstream_abi_check.o" "$root/test/gpu/tools/runner_print.c" \
  -o "$out/upstream_abi_check" -L"$out" -lnorm_runtime -Wl,-rpath,'$ORIGIN'
echo "built $out/upstream_abi_check"
