#!/usr/bin/env bash
# ctest 'embedding-package': install norm-opt from BUILD into a scratch
# prefix and use it as a new user would: the installed norm-opt (version, a
# pipeline, compile to a library with the installed runtime), the installed
# plugin in upstream mlir-opt, and the two host programs of this directory
# built against the installed CMake package.
set -euo pipefail
build=$1
mlir_opt=${2:-/usr/lib/llvm-22/bin/mlir-opt}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
scratch=$build/embedding-check
prefix=$scratch/prefix
rm -rf "$scratch"
mkdir -p "$scratch"
cmake --install "$build" --prefix "$prefix" >/dev/null
fail() { echo "embedding-package: $*"; exit 1; }

# The installed binaries find libMLIR.so without the build tree.
for f in "$prefix/bin/norm-opt" "$prefix/lib/libNormOptPlugin.so" \
         "$prefix/lib/libNormCAPI.so"; do
  runpath=$(readelf -d "$f" | sed -n 's/.*R\(UN\)\?PATH.*\[\(.*\)\]/\2/p')
  case ":$runpath:" in
    *"$build"*) fail "$f has the build tree in its RUNPATH ($runpath)" ;;
    *:/usr/lib/llvm-22/lib:*) ;;
    *) fail "$f: RUNPATH '$runpath' lacks the LLVM library directory" ;;
  esac
done
"$prefix/bin/norm-opt" --version | grep -q 'norm-opt' ||
  fail "installed norm-opt --version failed"
fused=$("$prefix/bin/norm-opt" "$root/examples/rms_norm_backward.mlir" \
  --norm-decompose --norm-fuse-mixed-reductions)
grep -q 'norm.mixed_reduction' <<<"$fused" ||
  fail "installed norm-opt did not fuse"
# compile --emit=lib links the installed runtime archive.
"$prefix/bin/norm-opt" compile "$root/test/norm-opt/Inputs/rms-f32.mlir" \
  --emit=lib -o "$scratch/librms.so"
[ -s "$scratch/librms.h" ] && [ -s "$scratch/librms.json" ] ||
  fail "installed norm-opt compile wrote no header/signature"

# The installed plugin in upstream mlir-opt.
plugin=$prefix/lib/libNormOptPlugin.so
"$mlir_opt" --load-dialect-plugin="$plugin" --load-pass-plugin="$plugin" \
  "$root/examples/rms_norm_backward.mlir" \
  --pass-pipeline='builtin.module(func.func(norm-decompose,norm-fuse-mixed-reductions))' |
  grep -q 'norm.mixed_reduction' || fail "mlir-opt with the installed plugin"

# The hosts, built against the installed package.
cmake -G Ninja -S "$here" -B "$scratch/build" \
  -DNormOpt_DIR="$prefix/lib/cmake/NormOpt" >"$scratch.log" 2>&1 ||
  { cat "$scratch.log"; exit 1; }
ninja -C "$scratch/build" --quiet
out=$("$scratch/build/embed-norm")
generics=$(grep -c 'linalg.generic' <<<"$out" || true)
if [ "$generics" -ne 10 ] || grep -q 'norm\.rms_norm_grad' <<<"$out"; then
  echo "embed-norm: expected 10 linalg.generic and no norm op, got:"; echo "$out"
  exit 1
fi
out=$("$scratch/build/embed-norm-c")
grep -q 'norm.mixed_reduction' <<<"$out" && ! grep -q 'norm.rms_norm_grad' <<<"$out" ||
  { echo "embed-norm-c: expected the fused op, got:"; echo "$out"; exit 1; }
echo "embedding-package: OK (installed norm-opt, plugin in mlir-opt, C++ host: $generics linalg.generic, C host: fused)"
