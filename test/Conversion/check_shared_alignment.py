#!/usr/bin/env python3
"""Shared-memory alignment checks on PTX (no GPU needed).

A vector access to shared memory traps (`misaligned address`) unless its
address is a multiple of its width. In the PTX that `norm-opt compile`
writes, per kernel:
  - a `.shared` array without a size is the dynamic shared memory and must
    be `.extern ... []`: a non-extern `.shared .b8 x;` is a 1-byte static
    variable, which ptxas may place before the static arrays, so that the
    "dynamic" region overlaps them and the arrays after it lose their
    alignment (issue 11: 16-byte read at 0x404);
  - every ld/st.shared and cp.async into shared memory of W bytes whose
    address names a variable, [var] or [var+offset], uses a variable
    declared with .align >= W and an offset that is a multiple of W.
Prints one line per problem and "SHARED ALIGNMENT OK: <n> accesses" when
there is none; fails when it checked no access (a PTX without a named
shared access, or a file that is not PTX, shows nothing), and when no file
was given.

  check_shared_alignment.py FILE.ptx...
"""

import re
import sys

DECL = re.compile(r"^\s*(\.extern\s+)?\.shared\s+\.align\s+(\d+)\s+\.(\w+)\s+"
                  r"(\w+)(\[(\d*)\])?\s*;", re.M)
ACCESS = re.compile(r"^\s*(ld|st)\.shared((?:\.\w+)*)\s+([^;]*);", re.M)
CP_ASYNC = re.compile(r"cp\.async\.\w+\.shared\.global\s+\[([^\]]+)\],\s*"
                      r"\[[^\]]+\],\s*(\d+)")
TYPE_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2,
              "f16": 2, "bf16": 2, "b32": 4, "u32": 4, "s32": 4, "f32": 4,
              "b64": 8, "u64": 8, "s64": 8, "f64": 8, "b128": 16}


def access_bytes(suffixes):
    parts = [p for p in suffixes.split(".") if p]
    lanes = 1
    size = 0
    for p in parts:
        if p in ("v2", "v4", "v8"):
            lanes = int(p[1:])
        elif p in TYPE_BYTES:
            size = TYPE_BYTES[p]
    return lanes * size


def address_of(operands, op):
    # ld: "dst, [addr]"; st: "[addr], src".
    m = re.search(r"\[([^\]]+)\]", operands)
    return m.group(1).strip() if m else None


def split_address(addr):
    m = re.fullmatch(r"([A-Za-z_$][\w$]*)(?:\s*\+\s*(-?\d+))?", addr)
    if not m or m.group(1).startswith("%"):
        return None, None
    return m.group(1), int(m.group(2) or 0)


def check(ptx):
    """(problems, number of accesses checked) for one PTX text."""
    problems, checked = [], 0
    aligns = {}
    for ext, align, _, name, brackets, size in DECL.findall(ptx):
        aligns[name] = int(align)
        if not ext and not brackets:
            problems.append(f"{name}: an unsized, non-extern .shared variable "
                            f"(dynamic shared memory must be .extern [])")
        if ext and int(align) < 16:
            problems.append(f"{name}: dynamic shared memory aligned to "
                            f"{align} bytes, not 16")
    accesses = [(m.group(1) + ".shared" + m.group(2),
                 access_bytes(m.group(2)), address_of(m.group(3), m.group(1)))
                for m in ACCESS.finditer(ptx)]
    accesses += [("cp.async", int(m.group(2)), m.group(1).strip())
                 for m in CP_ASYNC.finditer(ptx)]
    for what, width, addr in accesses:
        if addr is None or width <= 1:
            continue
        name, offset = split_address(addr)
        if name is None:
            continue  # through a register: checked where the layout is made
        checked += 1
        align = aligns.get(name)
        if align is None:
            problems.append(f"{what} [{addr}]: {name} is not declared")
        elif align < width or offset % width:
            problems.append(f"{what} [{addr}]: {width}-byte access, {name} "
                            f"is aligned to {align} and the offset is "
                            f"{offset}")
    return problems, checked


def main():
    failed, total = False, 0
    for path in sys.argv[1:]:
        problems, checked = check(open(path).read())
        total += checked
        for p in problems:
            print(f"FAIL {path}: {p}")
        failed |= bool(problems)
    if not total:  # nothing was checked: passing would show nothing
        print(f"FAIL: no shared access checked in {len(sys.argv) - 1} "
              "file(s)")
        failed = True
    if failed:
        return 1
    print(f"SHARED ALIGNMENT OK: {total} accesses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
