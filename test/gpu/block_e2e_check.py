#!/usr/bin/env python3
"""Runs test/gpu/build_block_e2e.sh's program (a whole block backward lowered
by one pipeline: norm groups by --convert-norm-to-gpu-launch on the GPU,
matmuls and the add by upstream passes on the host) on the GPU machine and
checks every result against float64.

For each row count and seed the program draws fresh random inputs, calls
the block backward twice (the results must be bitwise equal), and writes
inputs and results; this script recomputes the block in float64 (torch, on
the CPU) from those inputs and compares: the largest |error| over the
largest |reference| of each result, bound 1e-4 (f32 throughout; the host
matmuls sum 512 products in f32).

  PYTHONPATH=python python3 test/gpu/block_e2e_check.py --dir .carry/block_e2e
      [--rows 1,37,300,4096]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from norm_opt import reference as float64

SHAPES = {"g": (-1, 512), "w_down": (512, 256), "x": (-1, 256), "rstd": (-1,),
          "weight": (256,), "g_residual": (-1, 256), "w_up": (256, 128),
          "q": (-1, 128), "q_mean": (-1,), "q_rstd": (-1,), "q_weight": (128,),
          "dqx": (-1, 128), "dweight": (256,), "dqw": (128,), "dqb": (128,)}


def load(d, name, rows):
    shape = tuple(rows if s == -1 else s for s in SHAPES[name])
    a = np.fromfile(os.path.join(d, name + ".f32"), dtype="<f4")
    return torch.from_numpy(a.reshape(shape)).double()


def reference(t):
    """The block in float64: the matmuls here, the two norm backwards
    norm_opt.reference's."""
    dy = t["g"] @ t["w_down"]
    rms = float64.backward("rms", t["x"], dy, t["rstd"], weight=t["weight"],
                           results=("dx", "dw"))
    dq = (rms["dx"] + t["g_residual"]) @ t["w_up"]
    layer = float64.backward("layer", t["q"], dq, t["q_rstd"], t["q_mean"],
                             t["q_weight"])
    return {"dqx": layer["dx"], "dweight": rms["dw"], "dqw": layer["dw"],
            "dqb": layer["db"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".carry/block_e2e")
    ap.add_argument("--rows", default="1,37,300,4096")
    ap.add_argument("--seeds", default="1,2")
    a = ap.parse_args()
    exe = os.path.join(a.dir, "block_e2e")
    failures, lines = 0, []
    for rows in map(int, a.rows.split(",")):
        for seed in map(int, a.seeds.split(",")):
            with tempfile.TemporaryDirectory() as d:
                r = subprocess.run([exe, str(rows), str(seed), d],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    failures += 1
                    lines.append(f"FAIL rows={rows} seed={seed}: exit "
                                 f"{r.returncode}\n{r.stdout}{r.stderr}")
                    continue
                bitwise = "bitwise_over_2_calls=yes" in r.stdout
                t = {k: load(d, k, rows) for k in SHAPES}
            ref = reference(t)
            errs = {k: ((t[k] - v).abs().max() /
                        v.abs().max().clamp_min(1e-30)).item()
                    for k, v in ref.items()}
            ok = bitwise and all(e <= 1e-4 for e in errs.values()) and all(
                torch.isfinite(t[k]).all() for k in ref)
            failures += not ok
            lines.append(f"{'PASS' if ok else 'FAIL'} rows={rows:5} seed={seed} "
                         + " ".join(f"{k}={e:.2e}" for k, e in errs.items())
                         + f" bitwise={'yes' if bitwise else 'NO'}")
    print("\n".join(lines))
    total = len(lines)
    print(f"{total - failures} of {total} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
