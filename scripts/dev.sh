#!/usr/bin/env bash
#===- scripts/dev.sh - set up, build, run the examples or the tests ------===#
#
# usage: scripts/dev.sh example   install what is missing, build, run the
#                                 shipped examples through every stage
#        scripts/dev.sh test      install what is missing, build, run ctest,
#                                 then the sanitizer job (what CI runs)
#        scripts/dev.sh build     install what is missing, build
#        scripts/dev.sh sanitize  the ASan + UBSan build (clang-22) in
#                                 build-asan/: unit tests, lit, the replay
#                                 of the saved corpus and a 60 s fuzz run
#        scripts/dev.sh wheel     build, link the self-contained norm-opt
#                                 (static LLVM/MLIR) and make the Python
#                                 wheel dist/norm_opt-<v>-py3-none-<plat>.whl
#        scripts/dev.sh wheel-test  the wheel, installed into a fresh venv:
#                                 the Python tests against it, the bundled
#                                 norm-opt's CLI, a C host on its CMake package
#        scripts/dev.sh gpu-test [--only a,b] [--quick] [--list]
#                                 here: build the wheel; on a GPU machine:
#                                 install it and run every GPU check
#                                 (test/gpu/suite.py; the benchmarks are
#                                 bench/'s: docs/benchmarks.md)
#
# Environment: NORM_BUILD_DIR (default: build/), NORM_ASAN_BUILD_DIR
# (default: build-asan/), NORM_SANITIZE=0 (test: without the sanitizer job), NORM_WHEEL=0 (test:
# without the wheel job), NORM_FUZZ_SECONDS (default 60), NORM_UNITY=0
# (configure without unity builds), MLIR_DIR, CUDAToolkit_ROOT.
# Re-running is fast and quiet when everything is already in place.
#===----------------------------------------------------------------------===#
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${NORM_BUILD_DIR:-$root/build}
packages=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
          cmake ninja-build g++ libgtest-dev python3 clang-22 libclang-rt-22-dev
          zlib1g-dev libzstd-dev lld-22 python3-build python3-venv)

# Each step with the time since the start (CI's budget: docs/reliability.md).
log() { printf '== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  log "installing: ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
}

# Unity builds (CMake's CMAKE_UNITY_BUILD, up to 8 sources per
# translation unit): most of a translation unit's compile time here is
# parsing MLIR's headers, so batching the sources halves a cold build
# (docs/reliability.md, "Sanitizer jobs"). NORM_UNITY=0 configures one
# translation unit per source (faster to rebuild after editing one file).
unity_build=()
[ "${NORM_UNITY:-1}" = 0 ] ||
  unity_build=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8)

configure_and_build() {
  if [ ! -f "$build/build.ninja" ]; then
    log "configuring $build"
    local args=(-G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
                "${unity_build[@]}")
    [ -n "${MLIR_DIR:-}" ] && args+=(-DMLIR_DIR="$MLIR_DIR")
    [ -n "${CUDAToolkit_ROOT:-}" ] && args+=(-DCUDAToolkit_ROOT="$CUDAToolkit_ROOT")
    # The log lives in the build directory (cmake creates it).
    mkdir -p "$build"
    cmake "${args[@]}" >"$build/configure.log" 2>&1 ||
      { cat "$build/configure.log"; exit 1; }
  fi
  # grep -c reads all of ninja's output (grep -q would stop early and,
  # under pipefail, fail the pipeline with ninja's SIGPIPE).
  if [ "$(ninja -C "$build" -n 2>/dev/null | grep -c '^\[')" -gt 0 ]; then
    log "building $build"
  fi
  local out
  out=$(ninja -C "$build" --quiet 2>&1) || { printf '%s\n' "$out"; exit 1; }
  printf '%s\n' "$out" | grep -v '^ninja: \(Entering directory\|no work to do\)' || true
}

run_examples() {
  local opt="$build/bin/norm-opt" out="$build/examples"
  stage() { printf '   %-30s -> %s %s\n' "$1" "${out#"$root"/}/$2" "${*:3}"; }
  mkdir -p "$out"
  for f in "$root"/examples/*.mlir; do
    local name
    name=$(basename "$f" .mlir)
    log "$name: $(grep -c 'norm\.[a-z_]*_grad ' "$f") norm op(s) in $(basename "$f")"
    # Stage 1: parse + verify.
    "$opt" "$f" -o "$out/$name.verified.mlir"
    stage "parse + verify" "$name.verified.mlir"
    # Stage 2: --norm-decompose to the linalg form front ends emit.
    local d="$out/$name.decomposed.mlir"
    "$opt" "$f" --norm-decompose -o "$d"
    stage "--norm-decompose" "$name.decomposed.mlir:" \
      "$(grep -c 'linalg.generic' "$d") linalg.generic," \
      "$(grep -c '"reduction"\]' "$d") row reduction(s) over N," \
      "$(grep -c '"reduction", "parallel"\]' "$d") column reduction(s) over rows," \
      "$(grep -c 'norm\.' "$d") norm op(s) left"
    # Stage 3: recognition of the mixed-order reduction group.
    local fz="$out/$name.fused.mlir"
    "$opt" "$d" --norm-fuse-mixed-reductions='remarks=true' \
      -mlir-print-op-on-diagnostic=false -o "$fz" 2>"$out/$name.remarks"
    stage "--norm-fuse-mixed-reductions" "$name.fused.mlir:" \
      "$(grep -c 'norm.mixed_reduction' "$fz") norm.mixed_reduction," \
      "$(grep -c 'linalg.generic' "$fz") linalg.generic left"
    sed -n 's/.*remark: /     remark: /p' "$out/$name.remarks"
    # Stage 4: the persistent row loop with fp32 partials (P = 8).
    local pa="$out/$name.partial.mlir"
    "$opt" "$fz" --pass-pipeline='builtin.module(func.func(norm-partial-accumulate{programs=8}))' -o "$pa"
    stage "--norm-partial-accumulate" "$name.partial.mlir:" \
      "$(grep -c 'scf.forall (' "$pa") scf.forall over P programs," \
      "$(grep -c 'scf.for ' "$pa") scf.for"
    # Stage 5: the CPU path (LLVM dialect with C interfaces).
    "$opt" "$f" --norm-lower-to-cpu -o "$out/$name.cpu.mlir"
    stage "--norm-lower-to-cpu" "$name.cpu.mlir:" \
      "$(grep -c 'llvm.func @_mlir_ciface' "$out/$name.cpu.mlir") C interface(s)"
    # Stage 6: GPU kernels (PTX for sm_90a, cubin via ptxas, and a library).
    "$opt" compile "$f" --chip=sm_90a --emit=ptx -o "$out/$name.ptx"
    stage "norm-opt compile --emit=ptx" "$name.ptx:" \
      "$(grep -c '^.visible .entry' "$out/$name.ptx") kernel(s)," \
      "$(grep -c 'ld.global.v4' "$out/$name.ptx") 16-byte loads"
    "$opt" compile "$f" --chip=sm_90a --emit=lib -o "$out/lib$name.so"
    stage "norm-opt compile --emit=lib" "lib$name.so" "+ lib$name.h:" \
      "$(grep -c '^int ' "$out/lib$name.h") C function(s)"
  done
}

# The ASan + UBSan job (docs/reliability.md): a second build directory with
# clang, the fuzz target, the unit tests and the lit suite on it, a short
# fuzz run from the saved corpus and a replay of that corpus.
sanitize() {
  local asan=${NORM_ASAN_BUILD_DIR:-$root/build-asan}
  local seconds=${NORM_FUZZ_SECONDS:-60}
  if ! command -v clang++-22 >/dev/null; then
    log "sanitize: clang++-22 not found (apt-get install clang-22 libclang-rt-22-dev)"
    exit 1
  fi
  if [ ! -f "$asan/build.ninja" ]; then
    log "configuring $asan (ASan + UBSan, libFuzzer)"
    # LLVM_USE_SANITIZER: LLVM's CMake adds the flags (and drops -z defs
    # from shared libraries: the sanitizer runtime is the executable's).
    CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$root" -B "$asan" \
      -DCMAKE_BUILD_TYPE=Release -DNORM_ENABLE_FUZZER=ON "${unity_build[@]}" \
      -DLLVM_USE_SANITIZER='Address;Undefined' \
      -DLLVM_UBSAN_FLAGS="-fsanitize=undefined -fno-sanitize=vptr,function" \
      -DCMAKE_C_FLAGS_RELEASE="-O1 -gline-tables-only -DNDEBUG" \
      -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only -DNDEBUG" \
      -DCMAKE_C_FLAGS="-fno-sanitize-recover=undefined" \
      -DCMAKE_CXX_FLAGS="-fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link" \
      >"$asan.configure.log" 2>&1 || { cat "$asan.configure.log"; exit 1; }
  fi
  log "building $asan"
  local out
  out=$(ninja -C "$asan" --quiet 2>&1) || { printf '%s\n' "$out"; exit 1; }
  # LLVM's and MLIR's own static registries are not freed at exit (the
  # executables' ASan defaults, tools/sanitizer-defaults, say so too).
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  log "sanitize: unit tests and lit on $asan"
  # Python loading our libraries through ctypes and cc linking the
  # instrumented runtime archive into plain programs cannot work here: those
  # ctest entries stay on the plain build. Lit skips what needs upstream
  # mlir-opt loading the plugin or --emit=lib itself (lit features
  # `sanitizer`, `mlir-opt-plugin`; docs/reliability.md lists them).
  local corpus="$root/test/fuzz/corpus" fuzz="$asan/bin/norm-fuzz" work
  work=$(mktemp -d)
  # Every saved input once; a crash, a sanitizer report, a timeout (300 s
  # per input) or running out of memory fails. The log is shown on failure.
  # Two halves of the corpus replay beside ctest (-j1 there): three
  # processes share the two cores, and the replay is not the long pole.
  local n
  n=$(ls "$corpus" | wc -l)
  log "sanitize: replaying the saved corpus ($n inputs, two halves) beside ctest"
  mkdir "$work/half0" "$work/half1" "$work/seed"
  local i=0 f
  for f in "$corpus"/*; do
    ln -s "$f" "$work/half$((i % 2))/"
    # Every 12th input seeds the short fuzz run below.
    [ $((i % 12)) -eq 0 ] && ln -s "$f" "$work/seed/"
    i=$((i + 1))
  done
  local replays=()
  for half in 0 1; do
    ( start=$SECONDS
      "$fuzz" -runs=0 -timeout=300 -detect_leaks=0 \
        -artifact_prefix="$work/" "$work/half$half" \
        >"$work/replay$half.log" 2>&1
      rc=$?; echo $((SECONDS - start)) >"$work/replay$half.seconds"
      exit $rc ) &
    replays+=($!)
  done
  ctest --test-dir "$asan" --output-on-failure --no-tests=error \
    -E 'embedding-package|runtime-ctypes|runtime-linkage|python-' -j1 ||
    { kill "${replays[@]}" 2>/dev/null; exit 1; }
  for half in 0 1; do
    wait "${replays[$half]}" ||
      { tail -n 80 "$work/replay$half.log"
        log "sanitize: the corpus replay failed ($work)"; exit 1; }
  done
  local replayed seeds
  replayed=$(( $(cat "$work/replay0.seconds") + $(cat "$work/replay1.seconds") ))
  seeds=$(ls "$work/seed" | wc -l)
  # libFuzzer's -max_total_time counts from its start, and it executes its
  # inputs before it mutates: a sample of the corpus (every input was just
  # replayed), its share of the replay's time, plus $seconds.
  local warm=$(( replayed * seeds / n + 10 ))
  log "sanitize: fuzzing for $seconds s from $seeds of the corpus's inputs (replayed in $replayed core-seconds)"
  mkdir "$work/new"
  "$fuzz" -max_total_time=$((warm + seconds)) -timeout=300 -detect_leaks=0 \
    -max_len=16384 -dict="$root/test/fuzz/mlir.dict" -artifact_prefix="$work/" \
    "$work/new" "$work/seed" >"$work/fuzz.log" 2>&1 ||
    { tail -n 80 "$work/fuzz.log"; log "sanitize: the fuzzer found a failure ($work)"; exit 1; }
  grep -E '^#[0-9]+ *(INITED|DONE)' "$work/fuzz.log" || true
  rm -rf "$work"
}

# The wheel (docs/embedding.md, "The wheel"): the self-contained norm-opt
# linked from the plain build's own objects (target norm-opt-self-contained:
# LLVM/MLIR from their static archives), the runtime, the package.
wheel() {
  configure_and_build
  log "wheel: linking the self-contained norm-opt in $build"
  local out
  out=$(ninja -C "$build" --quiet norm-opt-self-contained NormRuntime \
        NormRuntimeStatic 2>&1) || { printf '%s\n' "$out"; exit 1; }
  log "wheel: staging and checking the self-contained files"
  "$root/scripts/stage_wheel.sh" "$build" "$build/wheel"
  rm -f "$root"/dist/norm_opt-*.whl
  # Debian's python3-build, no isolation: nothing is fetched.
  /usr/bin/python3 -m build --wheel --no-isolation --outdir "$root/dist" \
    "$build/wheel" >"$build/wheel.log" 2>&1 || { cat "$build/wheel.log"; exit 1; }
  log "wheel: $(cd "$root" && ls dist/norm_opt-*.whl) ($(du -k "$root"/dist/norm_opt-*.whl | cut -f1) KiB)"
}

# The wheel installed offline into a fresh venv, then used from outside the
# source tree: no $NORM_OPT, no $NORM_OPT_LIBRARY_PATH, no PYTHONPATH.
wheel_test() {
  local venv="$build/wheel-venv" work="$build/wheel-test"
  rm -rf "$venv" "$work"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --no-index --no-cache-dir "$root"/dist/norm_opt-*.whl
  mkdir -p "$work"
  cp -r "$root/python/tests" "$work/tests"
  log "wheel-test: the CLI of the installed package"
  (cd "$work" && env -u NORM_OPT -u NORM_OPT_LIBRARY_PATH -u PYTHONPATH \
     NORM_OPT_CACHE_DIR="$work/cache" \
     "$root/scripts/check_wheel_cli.sh" "$venv" "$root/examples/rms_norm_backward.mlir" \
     "$root/examples/embedding/wheel-host")
  # The self-contained build is the same compiler: the same PTX as the
  # shared-library build's, where that build is here (CI: always).
  if [ -x "$build/bin/norm-opt" ]; then
    local f n
    for f in "$root"/examples/*.mlir; do
      n=$(basename "$f" .mlir)
      "$venv/bin/norm-opt" compile "$f" --emit=ptx -o "$work/$n.bundled.ptx" 2>"$work/$n.log"
      "$build/bin/norm-opt" compile "$f" --emit=ptx -o "$work/$n.shared.ptx" 2>>"$work/$n.log"
      cmp -s "$work/$n.bundled.ptx" "$work/$n.shared.ptx" ||
        { log "wheel-test: $n: the bundled norm-opt's PTX differs from $build's"; exit 1; }
    done
    log "wheel-test: the bundled and the shared-library norm-opt write the same PTX ($(ls "$root"/examples/*.mlir | wc -l) examples)"
  fi
  log "wheel-test: the Python tests against the installed package"
  local bundled
  bundled=$("$venv/bin/python" -c 'import norm_opt; print(norm_opt.find_norm_opt())')
  (cd "$work" && env -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1 \
     NORM_OPT_TEST_INSTALLED=1 NORM_OPT="$bundled" \
     NORM_OPT_CACHE_DIR="$work/cache" NORM_OPT_TEST_TMP="$work/tmp" \
     NORMRT_TEST_SCENARIO=no-driver NORMRT_LIBCUDA=/nonexistent/libcuda.so.1 \
     sh -c '"$1/bin/python" -m norm_opt.kernels --out libs --chip sm_90a --kind layer --hidden 256 --dtype bf16 >/dev/null &&
            "$1/bin/python" -m norm_opt.kernels --out libs --chip sm_90a --kind rms --hidden 256 --dtype f32 >/dev/null &&
            NORM_OPT_LIBRARY_PATH=$PWD/libs "$1/bin/python" -m unittest -q \
              tests.test_signature tests.test_compile tests.test_reference tests.test_kernels tests.test_fx_import \
              tests.test_library' sh "$venv" 2>&1) |
    tee "$work/unittest.log" | tail -n 3
  grep -q '^OK' "$work/unittest.log" || { cat "$work/unittest.log"; exit 1; }
  ! grep -q 'skipped' "$work/unittest.log" || { log "wheel-test: a test was skipped"; exit 1; }
}

# The GPU suite (test/gpu/suite.py: the checks of test/gpu, not the
# benchmarks of bench/). Here (no GPU): build the wheel, the
# only thing the suite needs from this machine. On a GPU machine (no LLVM):
# install that wheel (dist/) and run every GPU check with its bundled
# norm-opt; extra arguments go to the suite (--only, --quick, --list).
gpu_test() {
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    install_missing; wheel
    log "gpu-test: no GPU here; built $(ls "$root"/dist/norm_opt-*.whl)." \
        "On a GPU machine, with this tree and dist/: scripts/dev.sh gpu-test"
    python3 "$root/test/gpu/suite.py" "$@"
    return
  fi
  local whl
  whl=$(ls "$root"/dist/norm_opt-*.whl 2>/dev/null | head -n 1)
  [ -n "$whl" ] || { log "gpu-test: no wheel in dist/ (build it with scripts/dev.sh gpu-test on the build machine)"; exit 1; }
  python3 -m pip install -q --no-deps --no-index --force-reinstall "$whl"
  NORM_OPT=$(cd /tmp && python3 -c "import norm_opt.compiler as c; print(c.BUNDLED_NORM_OPT)")
  export NORM_OPT
  python3 "$root/test/gpu/suite.py" "$@"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  example) install_missing; configure_and_build; run_examples ;;
  test)    install_missing; configure_and_build
           log "ctest on $build"
           # --no-tests=error: a build dir without tests is a failure.
           ctest --test-dir "$build" --output-on-failure --no-tests=error \
             -j "$(nproc)"
           [ "${NORM_WHEEL:-1}" = 0 ] || { wheel; wheel_test; }
           [ "${NORM_SANITIZE:-1}" = 0 ] || sanitize ;;
  wheel)   install_missing; wheel ;;
  wheel-test) install_missing; wheel; wheel_test ;;
  sanitize) install_missing; sanitize ;;
  build)   install_missing; configure_and_build ;;
  gpu-test) gpu_test "$@" ;;
  *) sed -n '3,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
