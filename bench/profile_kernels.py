#!/usr/bin/env python3
"""Per-kernel GPU times of our backward (main vs final kernel), by shape.

Runs on the GPU machine over norm_opt.kernel_set's libraries; uses
torch.profiler (CUPTI) to split one call's device time between the kernels
it launches, warm L2 and cold L2 (256 MB written before each call).

  python3 bench/profile_kernels.py --dir .carry/gpu \
      --cases layer_bf16:29x17389,rms_bf16:4096x1024
"""

import argparse
import collections
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from norm_opt import testing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".carry/gpu")
    ap.add_argument("--cases", required=True)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--plain", action="store_true",
                    help="two plain calls per case, no torch.profiler (run "
                         "under ncu: ncu --clock-control none -k regex:main "
                         "python3 bench/profile_kernels.py --plain ...)")
    args = ap.parse_args()
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    gen = torch.Generator(device="cuda")
    gen.manual_seed(3)
    for case, m, n, lib, fn, sig, t, outs in testing.prepared_cases(
            args.dir, args.cases, gen):
        for _ in range(2 if args.plain else 3):
            testing.call(lib, fn, sig, t, outs, m, n)
        torch.cuda.synchronize()
        if args.plain:
            continue
        for cold in (False, True):
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(args.reps):
                    if cold:
                        flush.zero_()
                    testing.call(lib, fn, sig, t, outs, m, n)
                torch.cuda.synchronize()
            times = collections.defaultdict(list)
            for ev in prof.events():
                if ev.device_type == torch.autograd.DeviceType.CUDA and \
                        sig["name"] in ev.name:
                    times[ev.name].append(ev.device_time)
            parts = ", ".join(
                f"{k.split(sig['name'] + '_0_')[-1]} "
                f"{sorted(v)[len(v) // 2]:.1f} us"
                for k, v in sorted(times.items()))
            print(f"{case.split(':')[0]:<10} {m}x{n} "
                  f"{'cold' if cold else 'warm'} L2: {parts}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
