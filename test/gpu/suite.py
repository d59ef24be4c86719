#!/usr/bin/env python3
#===- test/gpu/suite.py - every GPU check, one command -------------------===#
"""The GPU test suite: every GPU correctness check of the project, run one
after the other on a GPU machine, one pass/fail table at the end.

On a machine without a GPU it says so and runs nothing (exit 0). Kernels
are compiled on the GPU machine with `$NORM_OPT` (the wheel's bundled
norm-opt: scripts/dev.sh gpu-test installs the wheel and sets it), so the
only thing built here is the wheel. Each check runs in a process of its
own with a time limit; a check that fails, times out or cannot start is a
FAIL row, and the suite exits 1 if any row is one. A run that ran no check
fails too.

  python3 test/gpu/suite.py [--list] [--only a,b] [--quick] [--work DIR]
                            [--timeout-scale F]

--quick passes each check its own quick option where it has one (fewer
shapes or cases).

Self-checks (issue 45, "Every check can fail"): after the checks, each
harness runs again, small, with `--inject nan` (one result poisoned with
NaN after our kernel ran) and `--inject empty` (nothing compared), rows
named `<check>:inject-nan` / `<check>:inject-empty`. Each must fail: the
row passes only when the run exits non-zero and printed a FAIL line (a
crash or a time-out is no catch). They reuse their check's work
directory and build (built here when their check did not run). Rows
`random:mutant-<name>` run the random check against each of its wrong
references, which it must catch by tolerance (they pass), and
`random:mutant-error` a mutant run whose cases fail without a tolerance,
which must fail rather than count them as catches.

The checks are the scripts beside this one (test/gpu/);
what they share with the benchmarks (bench/) is in the package:
norm_opt.kernel_set (the kernel set and its manifest), norm_opt.testing
(launching it with torch tensors, inputs, the models' norm spellings) and
norm_opt.reference (the float64 reference and rel_l2). Each runs with
PYTHONPATH=python:test/lib-python, except the `installed` one (the wheel
check: the installed wheel only).
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class Check:
    """One check: an optional build step, then the check itself ({work}:
    the check's own work directory; {norm_opt}: $NORM_OPT)."""

    def __init__(self, name, run, build=None, quick=(), gpus=1, timeout=600,
                 what="", installed=False, expect_fail=False, base=None,
                 env=None):
        self.name, self.run, self.build = name, run, build
        self.quick, self.gpus, self.timeout, self.what = quick, gpus, timeout, what
        # Run against the installed wheel only: no source tree on the path,
        # no $NORM_OPT (what wheel_check.py checks first).
        self.installed = installed
        # A self-check: passes only when its run fails (non-zero, FAIL
        # printed); shares the work directory and build of check `base`.
        self.expect_fail, self.base, self.env = expect_fail, base, env or {}


CHECKS = [
    Check("routing", ["test/gpu/compile_routing_check.py"], timeout=900,
          what="torch.compile route: seven norm spellings (adaLN "
               "included), f32 and bf16, against eager"),
    Check("torch-ops", ["test/gpu/torch_ops_check.py"],
          what="norm_opt.torch ops against torch's op rules"),
    Check("masks", ["test/gpu/gpu_mask_check.py", "--dir", "{work}"],
          build=["test/gpu/gpu_mask_check.py", "--build", "{work}",
                 "--norm-opt", "{norm_opt}"],
          quick=["--quick"], what="masked norms against float64"),
    Check("channels-first",
          ["test/gpu/gpu_channels_first_check.py", "--dir", "{work}"],
          build=["test/gpu/gpu_channels_first_check.py", "--build", "{work}",
                 "--norm-opt", "{norm_opt}"],
          quick=["--quick"], what="channels-first kernels against float64"),
    Check("adaln", ["test/gpu/gpu_adaln_check.py", "--dir", "{work}"],
          build=["test/gpu/gpu_adaln_check.py", "--build", "{work}",
                 "--norm-opt", "{norm_opt}"],
          quick=["--quick"],
          what="adaLN batched rows (and the 193061 chain) against float64"),
    Check("group-norm", ["test/gpu/gpu_group_norm_check.py", "--dir",
                         "{work}"],
          build=["test/gpu/gpu_group_norm_check.py", "--build", "{work}",
                 "--norm-opt", "{norm_opt}"],
          quick=["--quick"],
          what="GroupNorm slabs (NCHW, channels last) against float64"),
    Check("graph", ["test/gpu/gpu_graph_check.py", "--dir", "{work}"],
          build=["test/gpu/gpu_graph_check.py", "--build", "{work}",
                 "--norm-opt", "{norm_opt}"],
          quick=["--quick"],
          what="whole graphs: outlined groups and two domains, float64"),
    Check("kernels", ["test/gpu/gpu_check.py", "--dir", "{work}"],
          build=["-m", "norm_opt.kernel_set", "--norm-opt", "{norm_opt}",
                 "--out", "{work}", "--riders", "test/gpu/Inputs"],
          quick=["--quick"], timeout=1800,
          what="the kernel sets against float64 and torch"),
    Check("random", ["test/gpu/gpu_random_check.py", "run", "--dir",
                     "{work}"],
          build=["test/gpu/gpu_random_check.py", "build", "--seed", "1",
                 "--programs", "300", "--cases-per-program", "7",
                 "--norm-opt", "{norm_opt}", "--out", "{work}"],
          timeout=1800, what="random programs and shapes against float64"),
    Check("multi-random", ["test/gpu/gpu_multi_random_check.py", "run",
                           "--dir", "{work}"],
          build=["test/gpu/gpu_multi_random_check.py", "build", "--seed",
                 "1", "--programs", "120", "--norm-opt", "{norm_opt}",
                 "--out", "{work}"],
          timeout=1200, what="random adaLN / GroupNorm programs (chains, "
                             "NCHW / channels last) against float64"),
    Check("capture", ["test/gpu/gpu_capture_test.py", "--dir", "{work}"],
          build=["-m", "norm_opt.kernel_set", "--norm-opt", "{norm_opt}",
                 "--out", "{work}", "--ns", "4096,8192,32768",
                 "--configs", "bf16,f32", "--kinds", "layer,rms"],
          timeout=1200, what="kernels inside CUDA graph captures"),
    Check("train", ["test/gpu/train_check.py", "--steps", "20"],
          timeout=1200,
          what="training steps, lockstep and free, against torch"),
    Check("wheel", ["test/gpu/wheel_check.py", "--steps", "20",
                    "--self-check"],
          timeout=1200, what="the installed wheel end to end",
          installed=True),
    Check("ddp", ["test/gpu/ddp_check.py"], gpus=2, timeout=1200,
          what="data and sequence parallel over NCCL"),
    Check("jax", ["test/gpu/jax_check.py", "--cmdbuf", "{work}"],
          quick=["--quick"], timeout=900,
          what="norm_opt.jax: jit, grad, vmap, shard_map, command buffers, "
               "Flax, against float64"),
    Check("jax-sharded", ["test/gpu/jax_check.py", "--shard-only"], gpus=2,
          timeout=600, what="norm_opt.jax: rows sharded over 2 GPUs"),
    Check("jax-shard-jit", ["test/gpu/jax_check.py", "--shard-jit"], gpus=2,
          timeout=900, what="norm_opt.jax: a sharded jit without shard_map "
                            "(custom_partitioning): per-device kernels"),
]

# Each self-check's run: its harness on a few cases (harness.py's INJECT).
INJECTED = {
    "routing": (["test/gpu/compile_routing_check.py"],
                {"NORM_ROUTING_CASES": "nn.LayerNorm"}),
    "torch-ops": (["test/gpu/torch_ops_check.py"], {}),
    "masks": (["test/gpu/gpu_mask_check.py", "--dir", "{work}", "--quick"],
              {}),
    "channels-first": (["test/gpu/gpu_channels_first_check.py", "--dir",
                        "{work}", "--quick"], {}),
    "graph": (["test/gpu/gpu_graph_check.py", "--dir", "{work}", "--quick"],
              {}),
    "adaln": (["test/gpu/gpu_adaln_check.py", "--dir", "{work}", "--tiny"],
              {}),
    "group-norm": (["test/gpu/gpu_group_norm_check.py", "--dir", "{work}",
                    "--tiny"], {}),
    "kernels": (["test/gpu/gpu_check.py", "--dir", "{work}", "--quick",
                 "--no-huge", "--libs", "librms_bf16.so"], {}),
    "random": (["test/gpu/gpu_random_check.py", "run", "--dir", "{work}",
                "--limit", "20"], {}),
    "multi-random": (["test/gpu/gpu_multi_random_check.py", "run", "--dir",
                      "{work}", "--limit", "20"], {}),
    "capture": (["test/gpu/gpu_capture_test.py", "--dir", "{work}",
                 "--scenarios", "default", "--cases", "rms_bf16_4096",
                 "--coop", "on", "--replays", "3"], {}),
    "train": (["test/gpu/train_check.py", "--steps", "2", "--modes",
               "eager", "--dtypes", "f32"], {}),
    "ddp": (["test/gpu/ddp_check.py", "--steps", "2"], {}),
    "jax": (["test/gpu/jax_check.py", "--tiny"], {}),
    "jax-shard-jit": (["test/gpu/jax_check.py", "--shard-jit", "--tiny"], {}),
}
INJECT_WHAT = {"nan": "a result poisoned with NaN", "empty": "nothing "
               "compared"}
CHECKS += [Check(f"{name}:inject-{inject}", run + ["--inject", inject],
                 build=base.build, gpus=base.gpus, timeout=600,
                 what=f"self-check, must fail: {INJECT_WHAT[inject]}",
                 expect_fail=True, base=name, env=env)
           for name, (run, env) in INJECTED.items()
           for base in CHECKS if base.name == name
           for inject in ("nan", "empty")]
# The random check's wrong references (its MUTANTS): each must be caught,
# by tolerance, on >= 95% of the cases it applies to (these rows pass);
# and a mutant run whose cases fail otherwise (a failed status) must fail,
# not count them as catches (that row must fail).
RANDOM_MUTANTS = ("no-dy-scale",  # gpu_random_check.MUTANTS' names "dx-no-projection-term", "no-residual",
                  "dw-uses-x-not-xhat")
RANDOM_RUN = ["test/gpu/gpu_random_check.py", "run", "--dir", "{work}",
              "--limit", "60"]
RANDOM_BUILD = next(c.build for c in CHECKS if c.name == "random")
CHECKS += [Check(f"random:mutant-{m}", RANDOM_RUN + ["--mutant", m],
                 build=RANDOM_BUILD, base="random", timeout=600,
                 what="self-check: a wrong reference caught by tolerance")
           for m in RANDOM_MUTANTS]
CHECKS.append(Check(
    "random:mutant-error", RANDOM_RUN + ["--mutant", RANDOM_MUTANTS[0],
                                         "--inject", "error"],
    build=RANDOM_BUILD, base="random", timeout=600, expect_fail=True,
    what="self-check, must fail: a mutant run whose cases fail otherwise"))


def gpu_count():
    """GPUs here (0 without a driver); $NORM_GPU_SUITE_GPUS overrides it
    (the suite's own CPU test)."""
    if os.environ.get("NORM_GPU_SUITE_GPUS"):
        return int(os.environ["NORM_GPU_SUITE_GPUS"])
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name",
                              "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return len([l for l in out.stdout.splitlines() if l.strip()]) \
        if out.returncode == 0 else 0


def scripts(check):
    """The scripts (paths from ROOT) a check and its build step run."""
    return [argv[0] for argv in (check.build, check.run)
            if argv and argv[0] != "-m"]


def fill(argv, work, norm_opt):
    return [a.format(work=work, norm_opt=norm_opt) for a in argv]


def run_step(argv, env, timeout, log, expect_fail=False):
    """(ok, seconds, why) of one script run, its output appended to log.
    expect_fail: ok when it exited non-zero and printed a FAIL line (a
    self-check caught its injected fault; a crash, signal or time-out is
    no catch)."""
    start = time.time()
    with open(log, "a") as f:
        f.write("$ " + " ".join(argv) + "\n")
        f.flush()
        begin = f.tell()
        try:
            rc = subprocess.run([sys.executable] + argv, cwd=ROOT, env=env,
                                stdout=f, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return False, time.time() - start, f"timed out after {timeout} s"
        except OSError as e:
            return False, time.time() - start, f"could not start: {e}"
    seconds = time.time() - start
    if not expect_fail:
        return rc == 0, seconds, "" if rc == 0 else f"exit {rc}"
    with open(log, errors="replace") as f:
        f.seek(begin)
        said_fail = "FAIL" in f.read()
    if rc > 0 and said_fail:
        return True, seconds, f"failed as it must (exit {rc})"
    return False, seconds, (f"exit {rc}: the injected fault was not caught"
                            if rc == 0 else f"exit {rc} without a FAIL line "
                            "(a crash, not a caught fault)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--only", help="comma-separated check names")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--work", default=os.path.join(ROOT, ".carry", "gpu-suite"))
    ap.add_argument("--timeout-scale", type=float, default=1.0)
    args = ap.parse_args(argv)
    checks = CHECKS
    if args.only:
        names = args.only.split(",")
        unknown = [n for n in names if n not in {c.name for c in CHECKS}]
        if unknown:
            print(f"FAIL: no check named {', '.join(unknown)} "
                  f"(--list shows them)")
            return 1
        checks = [c for c in CHECKS if c.name in names]
    missing = [p for c in checks for p in scripts(c)
               if not os.path.isfile(os.path.join(ROOT, p))]
    if missing:
        print(f"FAIL: no {', '.join(missing)} (the suite names a script "
              "that is not there)")
        return 1
    if args.list:
        width = max(len(c.name) for c in checks)
        for c in checks:
            print(f"{c.name:{width}} {c.what}" + (f" ({c.gpus} GPUs)"
                                             if c.gpus > 1 else ""))
        return 0
    gpus = gpu_count()
    if gpus == 0:
        print("no GPU here: the GPU suite is skipped (run it on a GPU "
              "machine: scripts/dev.sh gpu-test)")
        return 0
    norm_opt = os.environ.get("NORM_OPT", "")
    if not norm_opt or not os.access(norm_opt, os.X_OK):
        print("FAIL: $NORM_OPT is not an executable norm-opt (install the "
              "wheel; scripts/dev.sh gpu-test sets it)")
        return 1
    env = dict(os.environ)
    paths = [os.path.join(ROOT, "python"),
             os.path.join(ROOT, "test", "lib-python")]
    env["PYTHONPATH"] = os.pathsep.join(
        paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    os.makedirs(args.work, exist_ok=True)
    rows = []
    built = set()  # checks whose build step passed in this run
    for c in checks:
        if c.gpus > gpus:
            rows.append((c.name, "SKIP", 0.0, f"needs {c.gpus} GPUs"))
            continue
        work = os.path.join(args.work, c.base or c.name)
        log = os.path.join(args.work, f"{c.name.replace(':', '-')}.log")
        if os.path.exists(log):
            os.remove(log)
        timeout = int(c.timeout * args.timeout_scale)
        check_env = env
        if c.installed:
            check_env = {k: v for k, v in os.environ.items()
                         if k not in ("NORM_OPT", "NORM_OPT_LIBRARY_PATH",
                                      "PYTHONPATH")}
        if c.env:
            check_env = dict(check_env, **c.env)
        seconds, ok, why = 0.0, True, ""
        if c.build and (c.base or c.name) not in built:
            os.makedirs(work, exist_ok=True)
            ok, seconds, why = run_step(fill(c.build, work, norm_opt),
                                        check_env, timeout, log)
            why = f"build: {why}" if not ok else ""
            if ok:
                built.add(c.base or c.name)
        if ok:
            run = fill(c.run, work, norm_opt) + (
                list(c.quick) if args.quick and not c.expect_fail else [])
            ok, s, why = run_step(run, check_env, timeout, log,
                                  c.expect_fail)
            seconds += s
        rows.append((c.name, "PASS" if ok else "FAIL", seconds, why))
        print(f"{c.name}: {'PASS' if ok else 'FAIL'} ({seconds:.0f} s)"
              f"{': ' + why if why else ''}  [{log}]", flush=True)
    print()
    print("| check | result | seconds | why |")
    print("|---|---|---|---|")
    for name, result, seconds, why in rows:
        print(f"| {name} | {result} | {seconds:.0f} | {why} |")
    ran = [r for r in rows if r[1] != "SKIP"]
    failed = [r for r in ran if r[1] != "PASS"]
    if not ran:
        print("FAIL: no check ran")
        return 1
    print(f"{len(ran) - len(failed)} of {len(ran)} checks passed"
          + (f", {len(rows) - len(ran)} skipped" if len(rows) > len(ran)
             else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
