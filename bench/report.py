#!/usr/bin/env python3
#===- bench/report.py - Benchmark table and plot from bench.json -----------===#
"""The table and the plot of bench/bench.py, from its JSON; no torch needed.

bench.py calls this at the end of a run on the GPU machine; here it turns
the JSON that came back (one file, or several from runs split by --dtypes
or --kinds, merged in order; the copy bandwidth of the first) into the
markdown table and the PNG:

  python3 bench/report.py OUT/bench.json [more.json ...]
      [--md FILE]            write the table (default: print it)
      [--png FILE]           the SOL plot (needs matplotlib; Debian's
                             python3-matplotlib for /usr/bin/python3)
      [--update-doc docs/benchmarks.md]
                             replace the text between the bench-table
                             markers of that file with the table

Every row: the floor, each provider's median time with its SOL (floor /
time), which peer is best and our speedup over it, the time of a copy of
the floor's bytes and ours over it (issue 28: over floor / 0.93 where the
copy is slower than that), the DRAM bytes of one call of ours over the
floor's (--dram: bench/dram_bytes.py's JSON), the rel-L2 errors of ours
and of the best peer. The geometric mean per dtype is over the best
peer of each static shape; the run-time N rows are reported as their ratio
to the static 5000x3000 row instead.
"""

import argparse
import json
import math
import sys

OURS = "norm-opt"
# The peers of ../shared/BENCHMARKS.md, in table order. jax-xla is timed by
# wall clock over back-to-back calls (no graph capture), so it is marked.
PEERS = ("torch-eager", "torch-compile", "liger", "jax-xla")
LABELS = {"norm-opt": "norm-opt", "torch-eager": "torch eager",
          "torch-compile": "torch.compile", "liger": "Liger",
          "jax-xla": "JAX/XLA (wall)"}
BEGIN = "<!-- bench-table:begin (bench/report.py --update-doc) -->"
END = "<!-- bench-table:end -->"


def load(paths):
    """Rows of one or more bench.json files; header fields of the first."""
    head, rows = None, []
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        if head is None:
            head = {k: v for k, v in d.items() if k != "rows"}
        rows += d["rows"]
    return head or {}, rows


def shape_label(r):
    label = f"{r['m']}x{r['n']}"
    return label + " (dyn N)" if r.get("fn") == "dynamic" else label


def best_peer(r):
    """(name, time) of the fastest peer that ran this row, or (None, None)."""
    peers = {k: v for k, v in r["times"].items() if k in PEERS}
    if not peers:
        return None, None
    name = min(peers, key=peers.get)
    return name, peers[name]


def fmt_t(r, name):
    t = r["times"].get(name)
    if t is None:
        return "-"
    return f"{t:.1f} ({r['floor'] / t:.2f})"


def copy_reference(r):
    """The reference time (issue 44): the copy of the floor's bytes, the
    faster of a memcpy node and an SM copy kernel (bench.py); None if not
    timed. Runs before v20 timed only the memcpy and compared with
    min(copy, floor / 0.93) (issue 28)."""
    return r.get("copy")


def err_str(errs):
    if not errs or "error" in errs:
        return "-"
    return "/".join(f"{v:.1e}" for v in errs.values())


def copy_cells(r):
    """copy us | ours / reference | DRAM bytes of ours / floor bytes."""
    ref, ours = copy_reference(r), r["times"].get(OURS)
    copy = f"{r['copy']:.1f}" if "copy" in r else "-"
    ratio = f"{ours / ref:.2f}" if ref and ours else "-"
    dram = f"{r['dram_ratio']:.2f}" if "dram_ratio" in r else "-"
    return f"{copy} | {ratio} | {dram}"


def merge_dram(rows, paths):
    """bench/dram_bytes.py's JSON: each row's DRAM bytes / floor bytes."""
    for p in paths:
        with open(p) as f:
            for d in json.load(f):
                for r in rows:
                    if (r["kind"], r["dtype"], r["m"], r["n"]) == (
                            d["kind"], d["dtype"], d["m"], d["n"]) and \
                            r.get("fn", "static") == "static":
                        r["dram_ratio"] = (d["read"] + d["write"]) / \
                            d["floor_bytes"]


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def markdown(head, rows):
    bw = head.get("bandwidth")
    present = [p for p in PEERS if any(p in r["times"] for r in rows)]
    lines = [
        f"{head.get('device', 'GPU')}; copy bandwidth measured in the same "
        f"run: {bw / 1e12:.2f} TB/s." if bw else "",
        "Backward only, cold L2, median microseconds, (SOL) = floor / time. "
        "Every provider but JAX/XLA is a CUDA-graph replay; JAX/XLA is the "
        "wall-clock time of back-to-back calls (see the text). Errors: "
        "relative L2 vs float64 of dx/dw(/db). Registers / spill bytes of "
        "our main kernel from ptxas.", "",
        "| kind | dtype | M x N | floor us | norm-opt | "
        + " | ".join(LABELS[p] for p in present)
        + " | best peer | speedup | copy us | ours / copy | DRAM / floor | "
        "err norm-opt | err best peer | regs/spill |",
        "|" + "---|" * (13 + len(present))]
    speedups, fails, near_copy = {}, {}, {}
    for r in rows:
        p = r.get("ptxas") or {}
        main = p.get("main") or p.get("main_scalar") or {}
        regs = (f"{main.get('registers')}/{main.get('spill_stores', 0)}"
                if main else "-")
        best, bt = best_peer(r)
        ours = r["times"].get(OURS)
        sp = bt / ours if best and ours else None
        lines.append(
            f"| {r['kind']} | {r['dtype']} | {shape_label(r)} | "
            f"{r['floor']:.1f} | {fmt_t(r, OURS)} | "
            + " | ".join(fmt_t(r, q) for q in present)
            + f" | {best or '-'} | {f'{sp:.2f}' if sp else '-'} | "
            f"{copy_cells(r)} | "
            f"{err_str(r['errs'].get(OURS))} | "
            f"{err_str(r['errs'].get(best)) if best else '-'} | {regs} |")
        if sp and r.get("fn", "static") == "static":
            speedups.setdefault(r["dtype"], []).append(sp)
        ref = copy_reference(r)
        if ref and ours and r["floor"] >= 30 and r.get("fn") != "dynamic":
            near_copy.setdefault(r["dtype"], []).append(ours / ref)
        for name, e in r["errs"].items():
            if "error" in e:
                fails.setdefault(name, []).append(
                    f"{r['kind']} {r['dtype']} {shape_label(r)}")
    lines.append("")
    for dt, s in speedups.items():
        lines.append(
            f"Geometric-mean speedup over the best peer, {dt}: "
            f"{geomean(s):.2f}x ({len(s)} shape{'s' if len(s) != 1 else ''}"
            f"; behind the best peer on "
            f"{sum(v < 1 for v in s)}).")
    for dt, ratios in near_copy.items():
        worst = max(ratios)
        lines.append(
            f"Ours / the copy of the same bytes (floor >= 30 us), {dt}: "
            f"within 1.10x on {sum(v <= 1.10 for v in ratios)}, within "
            f"1.15x on {sum(v <= 1.15 for v in ratios)} of {len(ratios)}; "
            f"worst {worst:.2f}.")
    lines += runtime_n_lines(rows)
    for name, where in fails.items():
        lines.append(f"Did not run: {name} on {len(where)} "
                     f"row{'s' if len(where) != 1 else ''} "
                     f"({', '.join(where[:4])}{', ...' if len(where) > 4 else ''}).")
    return "\n".join(lines) + "\n"


def short(head, rows):
    """One line a row (ours, the best peer, the speedup, SOL) and the
    summary lines of the markdown: what a log's tail can hold."""
    abbrev = {"torch-eager": "eager", "torch-compile": "compile",
              "liger": "liger", "jax-xla": "jax"}
    lines = [f"{'kind':<5} {'dt':<4} {'M x N':<15} {'floor':>6} "
             f"{'ours':>7} {'SOL':>4} {'best peer':>15} {'x':>4}"]
    for r in rows:
        best, bt = best_peer(r)
        ours = r["times"].get(OURS)
        label = shape_label(r).replace(" (dyn N)", ":dyn")
        lines.append(
            f"{r['kind']:<5} {r['dtype']:<4} {label:<15} {r['floor']:6.1f} "
            + (f"{ours:7.1f} {r['floor'] / ours:4.2f} " if ours
               else f"{'-':>7} {'-':>4} ")
            + (f"{bt:7.1f} {abbrev[best]:<7} " if best else f"{'-':>15} ")
            + (f"{bt / ours:4.2f}" if best and ours else f"{'-':>4}"))
    table = markdown(head, rows)
    lines += [""] + table[table.index("\n\n", table.index("|---")) + 2:
                          ].strip().splitlines()
    return "\n".join(lines) + "\n"


def runtime_n_lines(rows):
    """Each odd or dynamic-N row of ours against the static 5000x3000."""
    out = []
    static = {(r["kind"], r["dtype"], r["m"]): r["times"].get(OURS)
              for r in rows if r["n"] == 3000 and r.get("fn", "static") == "static"}
    for r in rows:
        base = static.get((r["kind"], r["dtype"], r["m"]))
        t = r["times"].get(OURS)
        if (r["n"] in (2999, 3000) and base and t
                and not (r["n"] == 3000 and r.get("fn", "static") == "static")):
            out.append(f"Run-time N, {r['kind']} {r['dtype']} "
                       f"{shape_label(r)}: {t / base:.2f}x the static "
                       f"{r['m']}x3000 ({t:.1f} vs {base:.1f} us).")
    return out


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"report: no matplotlib, {path} not written", file=sys.stderr)
        return False
    names = [OURS] + [p for p in PEERS if any(p in r["times"] for r in rows)]
    groups = [(k, d) for d in ("bf16", "f16", "f32") for k in ("layer", "rms")
              if any(r["kind"] == k and r["dtype"] == d for r in rows)]
    fig, axes = plt.subplots(len(groups), 1,
                             figsize=(14, 3.4 * len(groups)), squeeze=False)
    width = 0.8 / len(names)
    for ax, (k, d) in zip(axes[:, 0], groups):
        sel = [r for r in rows if r["kind"] == k and r["dtype"] == d]
        xs = range(len(sel))
        for i, name in enumerate(names):
            sol = [r["floor"] / r["times"][name] if name in r["times"] else 0
                   for r in sel]
            ax.bar([x + (i - (len(names) - 1) / 2) * width for x in xs], sol,
                   width, label=LABELS.get(name, name))
        ax.axhline(0.9, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([shape_label(r) for r in sel], rotation=30,
                           fontsize=7)
        ax.set_ylabel("SOL (floor / time)")
        ax.set_title(f"{k} norm backward, {d}")
        ax.set_ylim(0, 1.2)  # room for the legend
        ax.legend(fontsize=7, loc="upper left", ncol=len(names))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def update_doc(path, table):
    with open(path) as f:
        text = f.read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        raise SystemExit(f"report: {path} has no {BEGIN!r} ... {END!r}")
    with open(path, "w") as f:
        f.write(text[:a + len(BEGIN)] + "\n\n" + table + "\n" + text[b:])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="+")
    ap.add_argument("--md")
    ap.add_argument("--png")
    ap.add_argument("--update-doc")
    ap.add_argument("--dram", action="append", default=[],
                    help="bench/dram_bytes.py's JSON: a DRAM / floor column")
    ap.add_argument("--short", action="store_true",
                    help="print the one-line-a-row summary")
    args = ap.parse_args(argv)
    head, rows = load(args.json)
    merge_dram(rows, args.dram)
    table = markdown(head, rows)
    if args.md:
        with open(args.md, "w") as f:
            f.write(table)
    if args.update_doc:
        update_doc(args.update_doc, table)
    if args.png:
        plot(rows, args.png)
    if args.short:
        print(short(head, rows))
    elif not args.md and not args.update_doc:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
