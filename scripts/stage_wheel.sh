#!/usr/bin/env bash
#===- scripts/stage_wheel.sh - the Python wheel's tree from a static build -===#
#
# usage: scripts/stage_wheel.sh BUILD STAGE
#   BUILD: a build holding bin/norm-opt-self-contained (scripts/dev.sh
#          wheel), or one configured with -DNORM_OPT_STATIC_LLVM=ON, whose
#          bin/norm-opt is self-contained
#   STAGE: filled with python/ and norm_opt/_native/ (bin/norm-opt stripped,
#          lib/libnorm_runtime{.so,_static.a}, include/norm/Runtime, the
#          CMake package), ready for `python3 -m build --wheel`.
# Fails if the executable or the runtime needs more than glibc, or if the
# stripped norm-opt grows past NORM_OPT_MAX_MB (64: it is 58.8 MB; issue 39
# asked for 40, docs/embedding.md "The wheel" says where the bytes go).
#===----------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$1 stage=$2
max_mb=${NORM_OPT_MAX_MB:-64}

rm -rf "$stage"
mkdir -p "$stage"
cp "$root/python/pyproject.toml" "$root/python/setup.py" "$stage/"
cp -r "$root/python/norm_opt" "$stage/norm_opt"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
native="$stage/norm_opt/_native"
mkdir -p "$native/bin" "$native/lib/cmake/NormOpt" "$native/include/norm/Runtime"
exe=$build/bin/norm-opt-self-contained
[ -x "$exe" ] || exe=$build/bin/norm-opt
strip --strip-all -o "$native/bin/norm-opt" "$exe"
chmod 755 "$native/bin/norm-opt"
strip --strip-unneeded -o "$native/lib/libnorm_runtime.so" "$build/lib/libnorm_runtime.so"
strip --strip-debug -o "$native/lib/libnorm_runtime_static.a" "$build/lib/libnorm_runtime_static.a"
cp "$root/include/norm/Runtime/NormRuntime.h" "$native/include/norm/Runtime/"
cp "$root/cmake/wheel/NormOptConfig.cmake" \
   "$build/NormOptConfigVersion.cmake" "$native/lib/cmake/NormOpt/"

# glibc alone: libc, libm, libdl, libpthread, librt, the loader and the vDSO.
for f in "$native/bin/norm-opt" "$native/lib/libnorm_runtime.so"; do
  others=$(ldd "$f" | grep -v -E '^\s*(linux-vdso|/lib64/ld-linux|lib(c|m|dl|pthread|rt)\.so)' || true)
  if [ -n "$others" ]; then
    echo "stage_wheel: $(basename "$f") needs more than glibc:" >&2
    echo "$others" >&2
    exit 1
  fi
done
bytes=$(stat -c %s "$native/bin/norm-opt")
if [ "$bytes" -gt $((max_mb * 1000 * 1000)) ]; then
  echo "stage_wheel: the stripped norm-opt is $bytes bytes, over $max_mb MB" >&2
  exit 1
fi
glibc=$(objdump -T "$native/bin/norm-opt" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -1)
echo "stage_wheel: norm-opt $((bytes / 1000)) kB stripped, needs $glibc at most"
