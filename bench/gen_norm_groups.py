#!/usr/bin/env python3
"""Emit a function with many independent norm backward groups.

Used to show that --norm-fuse-mixed-reductions is linear in the size of the
function:

  python3 bench/gen_norm_groups.py 200 \
    | build/bin/norm-opt --norm-decompose --norm-fuse-mixed-reductions \
        -mlir-timing -o /dev/null

Groups alternate LayerNorm / RMSNorm and bf16 / f32 so the function holds
every step kind; each group reads its own x and dy.
"""
import sys


def main():
    groups = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    m, n = 64, 256
    args, results, body, ret = [], [], [], []
    for g in range(groups):
        dt = "bf16" if g % 2 == 0 else "f32"
        x = f"tensor<{m}x{n}x{dt}>"
        stats = f"tensor<{m}xf32>"
        w = f"tensor<{n}xf32>"
        args += [f"%dy{g}: {x}", f"%x{g}: {x}", f"%mean{g}: {stats}",
                 f"%rstd{g}: {stats}", f"%w{g}: {w}"]
        if g % 4 < 2:
            body.append(
                f"  %dx{g}, %dw{g}, %db{g} = norm.layer_norm_grad %dy{g}, %x{g}, "
                f"%mean{g}, %rstd{g} weight(%w{g} : {w}) bias(%w{g} : {w}) "
                f": {x}, {stats} -> {x}, {w}, {w}")
            results += [x, w, w]
            ret += [f"%dx{g}", f"%dw{g}", f"%db{g}"]
        else:
            body.append(
                f"  %dx{g}, %dw{g} = norm.rms_norm_grad %dy{g}, %x{g}, %rstd{g} "
                f"weight(%w{g} : {w}) : {x}, {stats} -> {x}, {w}")
            results += [x, w]
            ret += [f"%dx{g}", f"%dw{g}"]
    print(f"func.func @many_groups({', '.join(args)}) -> ({', '.join(results)}) {{")
    print("\n".join(body))
    print(f"  return {', '.join(ret)} : {', '.join(results)}")
    print("}")


if __name__ == "__main__":
    main()
