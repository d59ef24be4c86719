#!/bin/bash
# Device run: latency kernels (issue 44): correctness, sanitizers, timing.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install --no-deps --no-index --force-reinstall -q dist/*.whl 2>&1 | tail -1
export NORM_OPT=$(cd /tmp && python3 -c "import norm_opt.compiler as c; print(c.BUNDLED_NORM_OPT)")
export PYTHONPATH=python:test/lib-python:test/gpu
S=${STAGE:-all}
if [ "$S" = all ] || [ "$S" = check ]; then
  echo "=== gpu_check (full, no huge)"
  timeout 420 python3 test/gpu/gpu_check.py --dir .carry/gpu --no-huge --out $OUT > $OUT/gpu_check.log 2>&1; echo "gpu_check rc=$?"
  grep -E "^FAIL|checks passed|WORST|^ALL|failed" $OUT/gpu_check.log | tail -15
  grep -c "^PASS" $OUT/gpu_check.log
fi
if [ "$S" = all ] || [ "$S" = san ]; then
  for tool in memcheck racecheck synccheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 python3 test/gpu/gpu_check.py --dir .carry/gpu --libs liblayer_bf16.so,librms_f32.so --shapes 512x1024,29x17389,7x4099,3x4096,131x2999 > $OUT/san_$tool.log 2>&1
    echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|checks passed' $OUT/san_$tool.log | tr '\n' ' ')"
  done
fi
if [ "$S" = all ] || [ "$S" = bench ]; then
  echo "=== bench"
  timeout 400 python3 bench/bench.py --dir .carry/gpu --liger .carry/liger/src --out $OUT/b1 \
    --dtypes ${DT:-bf16,f32} --kinds layer,rms --providers norm-opt,torch-eager,torch-compile,liger \
    --shapes ${SHAPES:-512x1024,29x17389,256x1024,1024x1024,2048x1024,64x17389,128x17389} \
    --variant nolat=.carry/nolat --variant biglat=.carry/biglat --precompile 4 > $OUT/bench.log 2>&1; echo "bench rc=$?"
  tail -40 $OUT/bench.log
fi
