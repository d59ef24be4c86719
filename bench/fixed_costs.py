#!/usr/bin/env python3
"""Where the time of a small backward goes: graph replay, workspace, launch path.

Runs on the GPU machine over norm_opt.kernel_set's libraries. For
each case it times, with bench.py's protocol (one call captured in a CUDA
graph, replayed after a 256 MB flush, median):

  call        our call as bench.py times it
  preset-ws   the same with a workspace set before capture
              (normrt_set_workspace: no allocation nodes in the graph)
  copy        a device copy of the same bytes (torch), the bandwidth floor
              as a graph plus the graph's own fixed cost
  empty       a graph of one tiny kernel: the fixed cost of a replay

and, with --no-coop (run it in a second process with
NORMRT_NO_COOPERATIVE=1), the two-launch path. Checked: the outputs of
every timed variant equal the first call's bitwise.

  python3 bench/fixed_costs.py --dir .carry/gpu \
      --cases layer_bf16:512x1024,rms_bf16:4096x1024

--sweep NAME:N --rows M1,M2,...: ours and the copy of the same bytes at
each row count, each timed twice: after bench.py's flush (a 256 MB write,
which leaves the L2 full of dirty lines the timed work must write back)
and after the same flush followed by a read of the buffer (clean L2 lines);
then the least-squares line t = a + b M of each: `a` is the fixed cost per
call, `b` the streaming rate (b over the floor's per-row time is the SOL of
the steady state).

  python3 bench/fixed_costs.py --dir .carry/gpu --sweep layer_bf16:4096 \
      --rows 1024,2048,4096,8192,16384
"""

import argparse
import os
import sys

import torch

from bench import Timer  # bench.py's protocol
from norm_opt import testing

def bytes_moved(t, outs):
    """Bytes of every input and output of one call."""
    return sum(v.numel() * v.element_size()
               for v in list(t.values()) + list(outs.values()))


class CleanFlushTimer(Timer):
    """bench.py's protocol, but the flush ends with a read of its buffer:
    the timed work finds clean lines in L2 instead of dirty ones."""

    def flush(self):
        super().flush()
        self.cache.view(torch.int32).sum()


def fit_line(xs, ys):
    """Least squares y = a + b x: (a, b)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = (sum((x - mx) * (y - my) for x, y in zip(xs, ys)) /
         sum((x - mx) ** 2 for x in xs))
    return my - b * mx, b


def sweep(args, timer, gen):
    """Fixed cost and streaming rate of ours and of a copy (see --sweep)."""
    name, n = args.sweep.split(":")
    rows = [int(v) for v in args.rows.split(",")]
    clean = CleanFlushTimer(args.reps)
    bw = timer.copy_bandwidth()
    series = {"ours": [], "ours-clean": [], "copy": [], "copy-clean": []}
    floor_per_row = None
    for case, m, n_, lib, fn, sig, t, outs in testing.prepared_cases(
            args.dir, ",".join(f"{name}:{m}x{n}" for m in rows), gen):
        def ours():
            testing.call(lib, fn, sig, t, outs, m, n_)
        nbytes = bytes_moved(t, outs)
        src = torch.empty(nbytes // 2, dtype=torch.int8, device="cuda")
        dst = torch.empty_like(src)
        times = {"ours": timer.graph_time(ours),
                 "ours-clean": clean.graph_time(ours),
                 "copy": timer.graph_time(lambda: dst.copy_(src)),
                 "copy-clean": clean.graph_time(lambda: dst.copy_(src))}
        for k, v in times.items():
            series[k].append(v)
        floor = nbytes / bw * 1e6
        floor_per_row = floor / m
        print(f"{case}: floor {floor:.1f} us, " +
              ", ".join(f"{k} {v:.1f}" for k, v in times.items()), flush=True)
    print(f"\n{name} N={n}, copy bandwidth {bw / 1e12:.2f} TB/s; "
          f"t = a + b M over M = {args.rows}")
    print("| series | a (us per call) | b (us per 1024 rows) | steady-state SOL |")
    print("|---|---|---|---|")
    for k, ys in series.items():
        a, b = fit_line(rows, ys)
        print(f"| {k} | {a:.1f} | {b * 1024:.2f} | {floor_per_row / b:.2f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".carry/gpu")
    ap.add_argument("--cases")
    ap.add_argument("--sweep", help="NAME:N (see the module doc)")
    ap.add_argument("--rows", default="1024,2048,4096,8192,16384")
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    timer = Timer(args.reps)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(5)
    if args.sweep:
        return sweep(args, timer, gen)
    if not args.cases:
        ap.error("--cases or --sweep")
    path = ("two-launch" if os.environ.get("NORMRT_NO_COOPERATIVE")
            else "default")
    tiny = torch.zeros(1, device="cuda")
    empty = timer.graph_time(lambda: tiny.add_(1))
    print(f"path={path} empty graph: {empty:.1f} us", flush=True)
    for case, m, n, lib, fn, sig, t, outs in testing.prepared_cases(
            args.dir, args.cases, gen):
        testing.call(lib, fn, sig, t, outs, m, n)
        torch.cuda.synchronize()
        first = {k: v.clone() for k, v in outs.items()}

        def ours():
            testing.call(lib, fn, sig, t, outs, m, n)

        def same():
            for k in first:
                if not torch.equal(first[k].view(torch.int8) if
                                   first[k].dtype != torch.float32 else
                                   first[k], outs[k].view(torch.int8) if
                                   outs[k].dtype != torch.float32 else
                                   outs[k]):
                    raise SystemExit(f"{case}: {k} differs between runs")
            for v in outs.values():
                v.fill_(float("nan"))

        for v in outs.values():
            v.fill_(float("nan"))
        call_us = timer.graph_time(ours)
        same()
        # A workspace big enough for any plan of this shape, set before
        # capture on the capturing stream (graph_time's stream differs per
        # call, so set it for every stream it may use: the current one).
        ws = torch.empty(64 << 20, dtype=torch.int8, device="cuda")

        def preset():
            lib.set_workspace(torch.cuda.current_stream().cuda_stream,
                              ws.data_ptr(), ws.numel())
            testing.call(lib, fn, sig, t, outs, m, n)

        preset_us = timer.graph_time(preset)
        same()
        nbytes = bytes_moved(t, outs)
        src = torch.empty(nbytes // 2, dtype=torch.int8, device="cuda")
        dst = torch.empty_like(src)
        copy_us = timer.graph_time(lambda: dst.copy_(src))
        print(f"path={path} {case}: call {call_us:.1f} us, preset-ws "
              f"{preset_us:.1f} us, copy of the bytes {copy_us:.1f} us "
              f"({nbytes / 1e6:.2f} MB)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
