#!/usr/bin/env python3
#===- gen_option_tables.py - Option tables generated from Passes.td -------===#
#
# Part of norm-opt. The pass options are declared once, in ODS
# (include/norm/*/Passes.td); this script writes every other copy of them
# from `llvm-tblgen --dump-json` of those files:
#
#   python/norm_opt/_options.py   GPU_OPTIONS, the options of
#                                 convert-norm-to-gpu (norm_opt.compiler
#                                 builds PLAN_OPTIONS from it);
#   docs/compile.md               the GPU option table of `norm-opt compile`;
#   docs/passes.md                the option table of every pass.
#
# In the docs only the text between the marker lines
#
#   <!-- BEGIN GENERATED: NAME (...) -->
#   <!-- END GENERATED: NAME -->
#
# is written; everything around them stays hand-written.
#
# usage: scripts/gen_option_tables.py [--check] [--tblgen LLVM_TBLGEN]
#            [-I DIR]... [--json PASSES_TD_JSON]...
#
#   (no flag)  rewrite the files that are out of date
#   --check    write nothing; print a diff of each file that is out of date
#              and exit 1 if any is (test/norm-opt/option-tables.test, CI)
#   --tblgen   the llvm-tblgen to run (default: $LLVM_TBLGEN, else the
#              llvm-tblgen on PATH or the newest /usr/lib/llvm-*/bin one
#              whose ../include has MLIR's .td files); that ../include is
#              the include directory unless -I is given
#   --json     read these dumps (one per Passes.td) instead of running
#              llvm-tblgen
#===----------------------------------------------------------------------===#
import argparse
import ast
import difflib
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TD_FILES = ("include/norm/Transforms/Passes.td",
            "include/norm/Conversion/Passes.td")
GPU_PASS = "convert-norm-to-gpu"
GENERATOR = "scripts/gen_option_tables.py"

#===----------------------------------------------------------------------===#
# Reading Passes.td
#===----------------------------------------------------------------------===#


class Option:
    def __init__(self, record):
        if "ListOption" in record["!superclasses"]:
            sys.exit(f"{GENERATOR}: list options are not supported "
                     f"({record['argument']})")
        self.argument = record["argument"]
        self.cpp_type = record["type"]
        self.default = record["defaultValue"]
        self.description = record["description"]

    @property
    def keyword(self):
        return self.argument.replace("-", "_")

    def python_type(self):
        types = {"std::string": "str", "bool": "bool", "int": "int",
                 "int64_t": "int", "unsigned": "int", "uint64_t": "int"}
        if self.cpp_type not in types:
            sys.exit(f"{GENERATOR}: option {self.argument}: type "
                     f"{self.cpp_type} has no Python type here")
        return types[self.cpp_type]

    def python_default(self):
        kind = self.python_type()
        if kind == "str":
            return ast.literal_eval(self.default) if self.default else ""
        if kind == "bool":
            return {"true": True, "false": False, "": False}[self.default]
        return int(self.default or 0)

    def doc_type(self):
        return {"str": "string", "bool": "bool", "int": "integer"}[
            self.python_type()]

    def doc_default(self):
        value = self.python_default()
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return f"`{value}`" if value else "empty"
        return str(value)


class Pass:
    def __init__(self, records, name, td_file):
        record = records[name]
        self.argument = record["argument"]
        self.td_file = td_file
        self.line = int(record["!locs"][0].rsplit(":", 1)[1])
        self.options = [Option(records[ref["def"]])
                        for ref in record["options"]]


def mlir_include_of(tblgen):
    """The include directory of an LLVM install with MLIR, from its tools."""
    include = os.path.normpath(os.path.join(
        os.path.dirname(os.path.realpath(tblgen)), os.pardir, "include"))
    if os.path.isfile(os.path.join(include, "mlir", "Pass", "PassBase.td")):
        return include
    return None


def find_tblgen():
    """An llvm-tblgen of an LLVM install with MLIR: $LLVM_TBLGEN, else the
    one on PATH, else the newest /usr/lib/llvm-*/bin/llvm-tblgen."""
    if os.environ.get("LLVM_TBLGEN"):
        return os.environ["LLVM_TBLGEN"]
    candidates = [shutil.which("llvm-tblgen")]
    versions = glob.glob("/usr/lib/llvm-*/bin/llvm-tblgen")
    candidates += sorted(versions, reverse=True, key=lambda p: int(
        re.sub(r"\D", "", p.split("/")[3]) or 0))
    for candidate in candidates:
        if candidate and mlir_include_of(candidate):
            return candidate
    sys.exit(f"{GENERATOR}: no llvm-tblgen of an LLVM with MLIR found; pass "
             "--tblgen (and -I) or --json")


def dump_json(tblgen, includes, td_file):
    if not includes:
        includes = [mlir_include_of(tblgen) or sys.exit(
            f"{GENERATOR}: no mlir/Pass/PassBase.td beside {tblgen}; pass -I")]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "Passes.json")
        argv = [tblgen, "--dump-json", "-I", os.path.join(ROOT, "include")]
        for include in includes:
            argv += ["-I", include]
        argv += [os.path.join(ROOT, td_file), "-o", out]
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"{GENERATOR}: {' '.join(argv)} failed:\n"
                     f"{result.stderr}")
        with open(out) as f:
            return json.load(f)


def read_passes(dumps):
    """Every pass of the dumps, in the order of TD_FILES, then of the file."""
    passes = []
    for td_file, records in dumps:
        names = records.get("!instanceof", {}).get("Pass", [])
        in_file = [Pass(records, name, td_file) for name in names]
        passes += sorted(in_file, key=lambda p: p.line)
    return passes


#===----------------------------------------------------------------------===#
# Writing the tables
#===----------------------------------------------------------------------===#


def markdown(text):
    """An option description as a Markdown table cell (from docs/)."""
    text = text.replace("|", "\\|")
    return re.sub(r"\bdocs/([\w-]+\.md)\b", r"[\1](\1)", text)


def compile_table(gpu):
    lines = ["| flag | default | meaning |", "|---|---|---|"]
    for option in gpu.options:
        lines.append(f"| `--{option.argument}` | {option.doc_default()} | "
                     f"{markdown(option.description)} |")
    return lines


def passes_tables(passes):
    lines = []
    for p in passes:
        if not p.options:
            continue
        if lines:
            lines.append("")
        lines += [f"`--{p.argument}` ({p.td_file}):", "",
                  "| option | type | default | meaning |",
                  "|---|---|---|---|"]
        for option in p.options:
            lines.append(f"| `{option.argument}` | {option.doc_type()} | "
                         f"{option.doc_default()} | "
                         f"{markdown(option.description)} |")
    return lines


def python_literal(text):
    if '"' in text or "\\" in text:
        return repr(text)
    return '"' + text + '"'


def python_string(text, indent):
    """`text` as adjacent string literals, each line at most 79 columns."""
    width = 79 - indent - 2
    pieces, piece = [], ""
    for word in re.split(r"(?<= )", text):
        if piece and len(python_literal(piece + word)) > width:
            pieces.append(piece)
            piece = ""
        piece += word
    pieces.append(piece)
    return ("\n" + " " * indent).join(python_literal(p) for p in pieces)


def python_module(gpu):
    lines = [
        f"# Generated by {GENERATOR} from the options of",
        f"# {GPU_PASS} in {gpu.td_file}; do not edit.",
        '"""The GPU options of `norm-opt compile`, `--norm-lower-to-nvvm` and',
        f"`--{GPU_PASS}`, in their order in Passes.td. norm_opt.compiler",
        'builds PLAN_OPTIONS from them."""',
        "",
        "import collections",
        "",
        "GpuOption = collections.namedtuple(",
        '    "GpuOption", "argument keyword type default description")',
        "",
        "GPU_OPTIONS = (",
    ]
    for option in gpu.options:
        default = option.python_default()
        if isinstance(default, str):
            default = python_literal(default)
        head = (f"    GpuOption({python_literal(option.argument)}, "
                f"{python_literal(option.keyword)}, "
                f"{option.python_type()}, {default},")
        lines.append(head)
        lines.append("              " + python_string(option.description, 14)
                     + "),")
    lines.append(")")
    return "\n".join(lines) + "\n"


def replace_region(path, text, name, body):
    begin = f"<!-- BEGIN GENERATED: {name} ("
    end = f"<!-- END GENERATED: {name} -->"
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith(begin)]
    ends = [i for i, line in enumerate(lines) if line == end]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        sys.exit(f"{GENERATOR}: {path}: expected one '{begin}...' line and "
                 f"then one '{end}' line")
    marker = (f"{begin}by {GENERATOR} from Passes.td: edit the option "
              "descriptions there) -->")
    return "\n".join(lines[:starts[0]] + [marker, ""] + body + [""] +
                     lines[ends[0]:])


#===----------------------------------------------------------------------===#
# Main
#===----------------------------------------------------------------------===#


def outputs(passes):
    """(path, generated text) of every generated file."""
    gpu = [p for p in passes if p.argument == GPU_PASS]
    if len(gpu) != 1:
        sys.exit(f"{GENERATOR}: no pass {GPU_PASS} in {', '.join(TD_FILES)}")
    gpu = gpu[0]
    result = [("python/norm_opt/_options.py", python_module(gpu))]
    for path, regions in (
            ("docs/compile.md", [(f"{GPU_PASS} options", compile_table(gpu))]),
            ("docs/passes.md", [("pass options", passes_tables(passes))])):
        with open(os.path.join(ROOT, path)) as f:
            text = f.read()
        for name, body in regions:
            text = replace_region(path, text, name, body)
        result.append((path, text))
    return result


def main():
    parser = argparse.ArgumentParser(
        description="Write the option tables of python/norm_opt/_options.py, "
        "docs/compile.md and docs/passes.md from Passes.td.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; diff and fail when out of date")
    parser.add_argument("--tblgen", help="the llvm-tblgen to run")
    parser.add_argument("-I", dest="includes", action="append", default=[],
                        help="include directory of MLIR's .td files")
    parser.add_argument("--json", action="append", default=[],
                        help="a --dump-json of one Passes.td (repeat)")
    args = parser.parse_args()

    if args.json:
        dumps = []
        for path in args.json:
            with open(path) as f:
                records = json.load(f)
            # The file a dump is of: the entry of TD_FILES whose directory
            # (Transforms, Conversion) is a directory of the dump's path, as
            # in the build tree (build/include/norm/Conversion/Passes.json).
            parts = os.path.abspath(path).split(os.sep)[:-1]
            td_file = [t for t in TD_FILES if t.split("/")[-2] in parts]
            if len(td_file) != 1:
                sys.exit(f"{GENERATOR}: --json {path}: not in a directory "
                         "named after one of " + ", ".join(TD_FILES))
            dumps.append((td_file[0], records))
        dumps.sort(key=lambda d: TD_FILES.index(d[0]))
    else:
        tblgen = args.tblgen or find_tblgen()
        dumps = [(td, dump_json(tblgen, args.includes, td))
                 for td in TD_FILES]

    stale = []
    for path, text in outputs(read_passes(dumps)):
        full = os.path.join(ROOT, path)
        try:
            with open(full) as f:
                old = f.read()
        except FileNotFoundError:
            old = ""
        if old == text:
            continue
        stale.append(path)
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True),
                f"a/{path}", f"b/{path}"))
        else:
            with open(full, "w") as f:
                f.write(text)
            print(f"{GENERATOR}: wrote {path}")
    if args.check and stale:
        sys.stdout.flush()
        print(f"{GENERATOR}: out of date with Passes.td: {', '.join(stale)}; "
              f"run {GENERATOR} (python3) and commit the result",
              file=sys.stderr)
        return 1
    if args.check:
        print(f"{GENERATOR}: option tables up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
