#!/usr/bin/env bash
#===- scripts/check_wheel_cli.sh - the installed wheel, used from outside -===#
#
# usage: scripts/check_wheel_cli.sh VENV INPUT.mlir HOST_DIR
# In a venv holding the installed wheel (scripts/dev.sh wheel-test): the
# `norm-opt` console script and `python -m norm_opt` report the bundled,
# self-contained executable; it fuses INPUT and compiles it to a library
# with the bundled runtime; a C host (HOST_DIR) builds on the wheel's CMake
# package. Run from a scratch directory, without $NORM_OPT or PYTHONPATH.
#===----------------------------------------------------------------------===#
set -euo pipefail
venv=$1 input=$2 host=$3
py=$venv/bin/python
fail() { echo "check_wheel_cli: $*" >&2; exit 1; }

# The console script execs the bundled binary.
version=$("$venv/bin/norm-opt" --version)
grep -q 'self-contained' <<<"$version" || fail "norm-opt --version: $version"
info=$("$py" -m norm_opt --version)
echo "$info" | sed 's/^/   /'
grep -q "_native/bin/norm-opt (bundled)" <<<"$info" ||
  fail "python -m norm_opt --version does not report the bundled norm-opt"
bundled=$("$py" -c 'import norm_opt; print(norm_opt.find_norm_opt())')
case "$bundled" in "$venv"/*) ;; *) fail "norm-opt in use is $bundled" ;; esac
# glibc alone (stage_wheel.sh checked the staged copy; this is the installed one).
if ldd "$bundled" | grep -v -E '^\s*(linux-vdso|/lib64/ld-linux|lib(c|m|dl|pthread|rt)\.so)'; then
  fail "the installed norm-opt needs more than glibc"
fi

# A pipeline, then a library linked with the bundled runtime.
mkdir -p lib
"$venv/bin/norm-opt" "$input" --norm-decompose --norm-fuse-mixed-reductions |
  grep -q 'norm.mixed_reduction' || fail "the bundled norm-opt did not fuse"
"$venv/bin/norm-opt" compile "$input" --chip=sm_90a --emit=lib -o lib/libk.so 2>&1 ||
  fail "norm-opt compile --emit=lib"
[ -s lib/libk.h ] && [ -s lib/libk.json ] || fail "no header or signature"
nm -D --defined-only lib/libk.so | grep -q ' T rms_norm_backward$' ||
  fail "the library does not export rms_norm_backward"

# A C host on the wheel's CMake package: norm-opt compiles its kernels at
# build time; with no GPU driver the launch reports it, and does not crash.
cmake_dir=$("$py" -m norm_opt --cmake-dir)
cmake -G Ninja -S "$host" -B host -DNormOpt_DIR="$cmake_dir" >host.log 2>&1 ||
  { cat host.log; fail "configuring the C host on the wheel's CMake package"; }
ninja -C host --quiet >>host.log 2>&1 || { cat host.log; fail "building the C host"; }
out=$(NORMRT_LIBCUDA=/nonexistent/libcuda.so.1 ./host/wheel-host 2>&1) && rc=0 || rc=$?
[ "$rc" -eq 0 ] || { echo "$out"; fail "the C host failed (exit $rc)"; }
grep -q 'no CUDA driver' <<<"$out" || fail "the C host: $out"
echo "   C host on the wheel's CMake package: $out"
