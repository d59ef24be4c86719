#!/usr/bin/env python3
#===- gpu_capture_test.py - compiled kernels inside CUDA graph captures ----===#
"""Checks the compiled kernels inside CUDA graph captures (issue 11, part 2).

Runs on the GPU machine over libraries built here (no MLIR needed there):

  python3 -m norm_opt.kernel_set --out .carry/capture \
      --ns 4096,8192,32768 --configs bf16,f32 --kinds layer,rms -j 2
  python3 test/gpu/gpu_capture_test.py --dir .carry/capture

(both with PYTHONPATH=python:test/lib-python, README.md).

Every (scenario, case, launch path) runs in a fresh process (this script,
with --scenario/--case), so that each starts with nothing loaded and nothing
allocated by the runtime. Scenarios:

  default      an eager call first, then torch.cuda.graph(g) with default
               arguments (a private capture stream the runtime never saw,
               global capture mode) around one call; 100 replays
  first-call   the same with no call before the capture: the module loads
               and the function is looked up inside the capture
  growth       eager calls on a stream with few rows, then captures on that
               stream with more rows (the workspace would have to grow)
               and with few rows again; the graphs replay alternately
  two-streams  one graph captured on the private stream, one on a second
               stream, same function; 100 rounds replaying both at once on
               two other streams
  legacy       a capture on a blocking stream; a call on the legacy stream
               inside it must fail with NORMRT_ERROR_CAPTURE and leave the
               capture intact, the call on the capture stream then works
  compile      torch.compile(mode="reduce-overhead", fullgraph=True) over a
               torch.library.custom_op (with register_fake) that calls the
               library; 100 calls after warm-up and recording

Each replay (or compiled call) gets fresh random inputs (never zero) and
outputs poisoned with NaN first; dx, dw (and db) must equal an eager call on
the same inputs bit for bit, and match a float64 reference (relative L2,
norm_opt.testing's tolerances) on the first and last replay. Every return
status is checked. Launch paths: the cooperative single launch and, with
NORMRT_NO_COOPERATIVE=1, the two-launch path. A table comes last, then
the worst error per dtype (the WORST line); the exit status is non-zero on
any failure, and for a run that compared nothing (a scenario with no
bitwise or no float64 comparison fails). --inject nan|empty: self-checks
that must fail (test/gpu/suite.py runs them).

Under compute-sanitizer, run one scenario in this process:

  compute-sanitizer --tool memcheck --error-exitcode 99 \
      python3 test/gpu/gpu_capture_test.py --dir .carry/capture \
      --scenario default --case rms_bf16_4096 --replays 3

or let the driver wrap every child: --sanitizer memcheck (with --replays 3).
"""

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import time
import traceback

from harness import INJECT, Worst, poison, tol

SCENARIOS = ["default", "first-call", "growth", "two-streams", "legacy",
             "compile"]
# name: (kind, config, N, rows). Cooperative single launch where every CTA
# fits; clusters for N = 32768 (f32, and bf16 LayerNorm with its row sums a
# row ahead), few rows among them.
CASES = {
    "rms_bf16_4096": ("rms", "bf16", 4096, 8192),
    "layer_bf16_8192": ("layer", "bf16", 8192, 4096),
    "rms_f32_32768": ("rms", "f32", 32768, 1024),
    "layer_f32_32768_few": ("layer", "f32", 32768, 16),
    "layer_bf16_32768": ("layer", "bf16", 32768, 1024),
}
NORMRT_ERROR_CAPTURE = 10


class Failure(Exception):
    pass


#===----------------------------------------------------------------------===#
# One scenario, in this process
#===----------------------------------------------------------------------===#

def load(directory, kind, config, n):
    """(ManifestLibrary, fn, sig) of function <kind>_<config>_<n> in the
    kernel set's manifest."""
    from norm_opt import kernel_set
    name = f"{kind}_{config}_{n}"
    for entry in kernel_set.manifest(directory)["libraries"]:
        if any(sig["name"] == name for sig in entry["functions"]):
            lib = kernel_set.ManifestLibrary(
                os.path.join(directory, entry["library"]), entry)
            fn, sig = lib.funcs[n]
            return lib, fn, sig
    raise Failure(f"no function {name} in {directory}/manifest.json; build "
                  "it with python3 -m norm_opt.kernel_set (see --help)")


class Problem:
    """Static inputs and outputs of one function call (graphs keep their
    pointers), refilled and poisoned in place."""

    def __init__(self, lib, fn, sig, rows, seed):
        import torch
        from norm_opt.testing import DT
        self.torch = torch
        self.lib, self.fn, self.sig = lib, fn, sig
        self.kind, self.n, self.rows = sig["kind"], sig["n"], rows
        self.xdt, self.wdt = DT[sig["x"]], DT[sig["w"]]
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)
        self.t = self.fresh()
        self.outs = self.empty_outputs()

    def fresh(self):
        from norm_opt.testing import make_inputs
        return make_inputs(self.kind, self.xdt, self.wdt, self.rows, self.n,
                           self.gen, "cuda")

    def empty_outputs(self):
        torch = self.torch
        outs = {}
        for r in self.sig["results"]:
            if r == "dx":
                outs[r] = torch.empty(self.rows, self.n, dtype=self.xdt,
                                      device="cuda")
            else:
                outs[r] = torch.empty(self.n, dtype=self.wdt, device="cuda")
        for o in outs.values():
            o.fill_(math.nan)
        return outs

    def refill(self):
        for key, value in self.fresh().items():
            self.t[key].copy_(value)

    def poison(self):
        for o in self.outs.values():
            o.fill_(math.nan)

    def call(self, stream, outs=None):
        """The library call on `stream` (a CUstream as int); its status."""
        outs = self.outs if outs is None else outs
        ptrs = [self.t[a].data_ptr() for a in self.sig["args"]]
        ptrs += [outs[r].data_ptr() for r in self.sig["results"]]
        strides = [self.n] * len(self.sig["strides"])
        return self.fn(*ptrs, self.rows, self.n, *strides, stream)

    def check(self, rc, what):
        if rc != 0:
            name = self.lib.status_string(rc)
            raise Failure(f"{what}: {self.sig['name']} returned {name}: "
                          f"{self.lib.error()}")

    def eager(self):
        """Fresh poisoned outputs computed by a call on the current stream."""
        outs = self.empty_outputs()
        self.check(self.call(self.torch.cuda.current_stream().cuda_stream,
                             outs), "eager call")
        return outs


def bits(t):
    import torch
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[
        t.element_size()])


class Checker:
    def __init__(self, inject=None):
        self.compared = 0    # bitwise comparisons with an eager call
        self.referenced = 0  # results compared with float64
        self.worst = Worst("gpu_capture_test")
        self.inject = inject

    def bitwise(self, got, want, what):
        import torch
        if self.inject == "empty":  # self-check: compares nothing
            return
        for r in want:
            if not torch.equal(bits(got[r]), bits(want[r])):
                bad = (bits(got[r]) != bits(want[r])).sum().item()
                raise Failure(f"{what}: {r} differs from the eager call in "
                              f"{bad} of {want[r].numel()} elements")
        self.compared += 1

    def reference(self, problem, got, what):
        from norm_opt.reference import rel_l2
        from norm_opt.testing import float64_backward
        if self.inject == "empty":
            return
        if self.inject == "nan":  # after the kernel and the bitwise check
            poison(next(iter(got.values())))
        ref = float64_backward(problem.kind, problem.t, problem.rows,
                               problem.n)
        for r, out in got.items():
            err = self.worst.add(out.dtype, rel_l2(out, ref[r]))
            self.referenced += 1
            if not err <= tol(out.dtype):
                raise Failure(f"{what}: {r} relative L2 error {err:.3g} not "
                              f"within {tol(out.dtype):.1g} (float64 "
                              "reference)")


def replay_and_compare(graph, problem, replays, checker, what):
    """Fresh inputs, poisoned outputs, one replay, then the eager call on
    the same inputs; bitwise equal, and right on the first and last."""
    import torch
    for i in range(replays):
        problem.refill()
        problem.poison()
        graph.replay()
        want = problem.eager()
        torch.cuda.synchronize()
        checker.bitwise(problem.outs, want, f"{what}, replay {i}")
        if i == 0 or i == replays - 1:
            checker.reference(problem, problem.outs, f"{what}, replay {i}")


def capture(problem, graph, stream=None, calls=None):
    """torch.cuda.graph around one call (default arguments unless `stream`);
    `calls` lists extra (stream -> expected status) calls to make first."""
    import torch
    kwargs = {} if stream is None else {"stream": stream}
    with torch.cuda.graph(graph, **kwargs):
        for call_stream, expected, why in calls or []:
            rc = problem.call(call_stream)
            if rc != expected:
                raise Failure(f"{why}: status {rc}, expected {expected} "
                              f"({problem.lib.error()})")
        problem.check(problem.call(torch.cuda.current_stream().cuda_stream),
                      "call inside the capture")
    # A capture runs nothing: the outputs are still poisoned.
    for r, o in problem.outs.items():
        if not o.isnan().all().item():
            raise Failure(f"the capture itself wrote {r}")


def scenario_default(args, lib, fn, sig, rows, checker, first_call=False):
    import torch
    p = Problem(lib, fn, sig, rows, seed=1)
    if not first_call:
        checker.bitwise(p.eager(), p.eager(), "two eager calls")
    g = torch.cuda.CUDAGraph()
    capture(p, g)
    replay_and_compare(g, p, args.replays, checker, "graph")


def scenario_growth(args, lib, fn, sig, rows, checker):
    import torch
    few = max(1, rows // 8)
    stream = torch.cuda.Stream()
    small = Problem(lib, fn, sig, few, seed=2)
    stream.wait_stream(torch.cuda.current_stream())  # the inputs are ready
    with torch.cuda.stream(stream):
        small.eager()  # the stream's own workspace: sized for few rows
    torch.cuda.synchronize()
    big = Problem(lib, fn, sig, rows, seed=3)
    g_big, g_small = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    capture(big, g_big, stream=stream)
    capture(small, g_small, stream=stream)
    for i in range(args.replays):
        replay_and_compare(g_big, big, 1, checker, f"big graph, round {i}")
        replay_and_compare(g_small, small, 1, checker,
                           f"small graph, round {i}")
    # The stream's own buffers still work after the captures.
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = small.eager()
    torch.cuda.synchronize()
    checker.bitwise(out, small.eager(), "eager on the capture stream after")


def scenario_two_streams(args, lib, fn, sig, rows, checker):
    import torch
    pa = Problem(lib, fn, sig, rows, seed=4)
    pb = Problem(lib, fn, sig, rows, seed=5)
    ga, gb = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    capture(pa, ga)                               # the private stream
    capture(pb, gb, stream=torch.cuda.Stream())   # a second stream
    sa, sb = torch.cuda.Stream(), torch.cuda.Stream()
    main = torch.cuda.current_stream()
    for i in range(args.replays):
        for p in (pa, pb):
            p.refill()
            p.poison()
        ready = main.record_event()
        sa.wait_event(ready)
        sb.wait_event(ready)
        with torch.cuda.stream(sa):
            ga.replay()
        with torch.cuda.stream(sb):
            gb.replay()
        main.wait_stream(sa)
        main.wait_stream(sb)
        want_a, want_b = pa.eager(), pb.eager()
        torch.cuda.synchronize()
        checker.bitwise(pa.outs, want_a, f"graph A, round {i}")
        checker.bitwise(pb.outs, want_b, f"graph B, round {i}")
        if i == 0 or i == args.replays - 1:
            checker.reference(pa, pa.outs, f"graph A, round {i}")
            checker.reference(pb, pb.outs, f"graph B, round {i}")


def scenario_legacy(args, lib, fn, sig, rows, checker):
    import torch
    p = Problem(lib, fn, sig, rows, seed=6)  # also makes torch's context
    p.eager()
    torch.cuda.synchronize()
    # A blocking stream (torch's are non-blocking): while it captures, the
    # legacy stream must not be used. In the current (torch's) context.
    cuda = ctypes.CDLL("libcuda.so.1")
    handle = ctypes.c_void_p()
    rc = cuda.cuStreamCreate(ctypes.byref(handle), 0)
    if rc != 0:
        raise Failure(f"cuStreamCreate(flags 0) failed: CUresult {rc}")
    blocking = torch.cuda.ExternalStream(handle.value)
    g = torch.cuda.CUDAGraph()
    capture(p, g, stream=blocking,
            calls=[(0, NORMRT_ERROR_CAPTURE,
                    "a call on the legacy stream during the capture")])
    if "legacy default stream" not in p.lib.error():
        raise Failure(f"unexpected message: {p.lib.error()}")
    replay_and_compare(g, p, args.replays, checker, "graph")


def scenario_compile(args, lib, fn, sig, rows, checker):
    import torch
    from torch import Tensor
    p = Problem(lib, fn, sig, rows, seed=7)
    n = p.n

    def run(inputs):
        outs = p.empty_outputs()
        ptrs = [inputs[a].data_ptr() for a in sig["args"]]
        ptrs += [outs[r].data_ptr() for r in sig["results"]]
        rc = fn(*ptrs, inputs["dy"].shape[0], n,
                *([n] * len(sig["strides"])),
                torch.cuda.current_stream().cuda_stream)
        p.check(rc, "custom op")
        return tuple(outs[r] for r in sig["results"])

    op_name = f"normcapture::{sig['name']}"
    if p.kind == "layer":
        @torch.library.custom_op(op_name, mutates_args=())
        def norm_grad(dy: Tensor, x: Tensor, mean: Tensor, rstd: Tensor,
                      w: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            return run(dict(dy=dy, x=x, mean=mean, rstd=rstd, w=w, b=b))

        @norm_grad.register_fake
        def _(dy, x, mean, rstd, w, b):
            return (torch.empty_like(dy), torch.empty_like(w),
                    torch.empty_like(b))
    else:
        @torch.library.custom_op(op_name, mutates_args=())
        def norm_grad(dy: Tensor, x: Tensor, rstd: Tensor,
                      w: Tensor) -> tuple[Tensor, Tensor]:
            return run(dict(dy=dy, x=x, rstd=rstd, w=w))

        @norm_grad.register_fake
        def _(dy, x, rstd, w):
            return torch.empty_like(dy), torch.empty_like(w)

    def step(*inputs):
        return norm_grad(*inputs)

    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    from torch._dynamo.utils import counters
    # Warm-up and recording first, then replays.
    for i in range(args.replays + 2):
        p.refill()
        inputs = [p.t[a] for a in sig["args"]]
        got = {r: o.clone() for r, o in zip(sig["results"],
                                            compiled(*inputs))}
        want = p.eager()
        torch.cuda.synchronize()
        checker.bitwise(got, want, f"compiled call {i}")
        if i == 0 or i == args.replays + 1:
            checker.reference(p, got, f"compiled call {i}")
    skips = sum(counters["inductor"].get(k, 0)
                for k in counters["inductor"] if "cudagraph_skip" in k)
    if skips:
        raise Failure(f"torch.compile skipped CUDA graphs ({skips}): "
                      f"{dict(counters['inductor'])}")


def run_in_process(args):
    """One scenario; prints RESULT {json} last."""
    import torch
    kind, config, n, rows = CASES[args.case]
    if args.rows:
        rows = args.rows
    result = {"scenario": args.scenario, "case": args.case,
              "path": "two-launch" if os.environ.get("NORMRT_NO_COOPERATIVE")
              else "cooperative", "ok": False, "compared": 0,
              "referenced": 0, "worst_rel_l2": None, "worst": {},
              "error": ""}
    checker = Checker(args.inject)
    start = time.time()
    try:
        if not torch.cuda.is_available():
            raise Failure("no CUDA device")
        lib, fn, sig = load(args.dir, kind, config, n)
        scenario = {
            "default": scenario_default,
            "first-call": lambda *a: scenario_default(*a, first_call=True),
            "growth": scenario_growth,
            "two-streams": scenario_two_streams,
            "legacy": scenario_legacy,
            "compile": scenario_compile,
        }[args.scenario]
        scenario(args, lib, fn, sig, rows, checker)
        torch.cuda.synchronize()
        if not (checker.compared > 0 and checker.referenced > 0):
            raise Failure(f"compared nothing ({checker.compared} bitwise, "
                          f"{checker.referenced} against float64)")
        result["ok"] = True
    except Exception as e:  # every failure is reported, none is fatal here
        result["error"] = f"{type(e).__name__}: {e}"
        if not isinstance(e, Failure):
            traceback.print_exc()
    result["compared"] = checker.compared
    result["referenced"] = checker.referenced
    result["worst"] = checker.worst.errors
    result["worst_rel_l2"] = max(checker.worst.errors.values(),
                                 default=None, key=lambda e: (e != e, e))
    result["seconds"] = round(time.time() - start, 1)
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


#===----------------------------------------------------------------------===#
# The driver: every scenario in a fresh process
#===----------------------------------------------------------------------===#

def run_all(args):
    scenarios = args.scenarios.split(",") if args.scenarios else SCENARIOS
    cases = args.cases.split(",") if args.cases else list(CASES)
    paths = {"both": ["cooperative", "two-launch"], "on": ["cooperative"],
             "off": ["two-launch"]}[args.coop]
    results = []
    for scenario in scenarios:
        for case in cases:
            for path in paths:
                cmd = [sys.executable, os.path.abspath(__file__),
                       "--dir", args.dir, "--scenario", scenario,
                       "--case", case, "--replays", str(args.replays)]
                if args.inject:
                    cmd += ["--inject", args.inject]
                if args.rows:
                    cmd += ["--rows", str(args.rows)]
                if args.sanitizer:
                    cmd = ["compute-sanitizer", "--tool", args.sanitizer,
                           "--error-exitcode", "99"] + cmd
                env = dict(os.environ)
                env.pop("NORMRT_NO_COOPERATIVE", None)
                if path == "two-launch":
                    env["NORMRT_NO_COOPERATIVE"] = "1"
                try:
                    r = subprocess.run(cmd, env=env, capture_output=True,
                                       text=True, timeout=args.timeout)
                    out, rc = r.stdout + r.stderr, r.returncode
                except subprocess.TimeoutExpired as e:
                    out, rc = f"timed out after {args.timeout} s", -1
                    out += (e.stdout or b"").decode(errors="replace") \
                        if isinstance(e.stdout, bytes) else (e.stdout or "")
                res = None
                for line in out.splitlines():
                    if line.startswith("RESULT "):
                        res = json.loads(line[len("RESULT "):])
                if res is None:
                    res = {"scenario": scenario, "case": case, "path": path,
                           "ok": False, "compared": 0, "worst_rel_l2": None,
                           "error": "no result (crash?)", "seconds": 0}
                if res["ok"] and not res.get("compared", 0) > 0:
                    res["ok"] = False
                    res["error"] = "compared nothing"
                if rc != 0 and res["ok"]:
                    res["ok"] = False
                    res["error"] = f"exit status {rc}" + (
                        " (compute-sanitizer reported errors)"
                        if rc == 99 else "")
                if not res["ok"]:
                    tail = "\n".join(out.splitlines()[-25:])
                    print(f"--- {scenario} {case} {path}: FAILED\n{tail}\n",
                          flush=True)
                else:
                    print(f"{scenario} {case} {path}: ok "
                          f"({res['compared']} compared)", flush=True)
                results.append(res)

    print()
    header = (f"{'scenario':<12} {'case':<20} {'path':<12} {'result':<6} "
              f"{'compared':>8} {'rel L2':>9} {'s':>6}  error")
    print(header)
    print("-" * len(header))
    for r in results:
        err = r["worst_rel_l2"]
        print(f"{r['scenario']:<12} {r['case']:<20} {r['path']:<12} "
              f"{'ok' if r['ok'] else 'FAIL':<6} {r['compared']:>8} "
              f"{(f'{err:.2e}' if err is not None else '-'):>9} "
              f"{r.get('seconds', 0):>6}  {r['error'][:90]}")
    failed = sum(not r["ok"] for r in results)
    print(f"\n{len(results) - failed} of {len(results)} passed"
          + (f", {failed} FAILED" if failed else ""))
    worst = Worst("gpu_capture_test")
    for r in results:
        for dtype, err in (r.get("worst") or {}).items():
            worst.add(dtype, err)
    worst.print()
    if not results:
        print("FAIL: no scenario ran")
    return 1 if failed or not results else 0


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dir", default=".carry/capture",
                    help="libraries and manifest.json from "
                         "python3 -m norm_opt.kernel_set")
    ap.add_argument("--scenario", choices=SCENARIOS,
                    help="run this one scenario in this process")
    ap.add_argument("--case", choices=list(CASES), default="rms_bf16_4096")
    ap.add_argument("--scenarios", help="driver: comma-separated subset")
    ap.add_argument("--cases", help="driver: comma-separated subset")
    ap.add_argument("--coop", choices=["both", "on", "off"], default="both",
                    help="driver: launch paths (off: NORMRT_NO_COOPERATIVE=1)")
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--rows", type=int, default=0,
                    help="override the case's rows (e.g. small under a "
                         "sanitizer)")
    ap.add_argument("--sanitizer", default="",
                    help="driver: run each child under compute-sanitizer "
                         "--tool TOOL (memcheck, racecheck, synccheck, "
                         "initcheck)")
    ap.add_argument("--timeout", type=int, default=300,
                    help="driver: seconds per child")
    ap.add_argument("--inject", choices=sorted(INJECT), default=None,
                    help="self-check, the run must then fail: nan poisons "
                         "a result before its float64 comparison; empty "
                         "compares nothing")
    args = ap.parse_args()
    if args.replays < 1:
        ap.error("--replays must be >= 1")
    if args.scenario:
        return run_in_process(args)
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
