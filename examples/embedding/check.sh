#!/usr/bin/env bash
# ctest 'embedding-package': install norm-opt from BUILD into a scratch
# prefix, build this host compiler against the installed package, run it.
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
scratch=$build/embedding-check
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -G Ninja -S "$here" -B "$scratch/build" \
  -DNormOpt_DIR="$scratch/prefix/lib/cmake/NormOpt" >"$scratch.log" 2>&1 ||
  { cat "$scratch.log"; exit 1; }
ninja -C "$scratch/build" --quiet
out=$("$scratch/build/embed-norm")
generics=$(grep -c 'linalg.generic' <<<"$out" || true)
if [ "$generics" -ne 10 ] || grep -q 'norm\.rms_norm_grad' <<<"$out"; then
  echo "embed-norm: expected 10 linalg.generic and no norm op, got:"; echo "$out"
  exit 1
fi
echo "embedding-package: OK (installed package found, pass ran, $generics linalg.generic)"
