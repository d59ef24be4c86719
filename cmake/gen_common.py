#===- gen_common.py - What the build's generators share ------------------===#
#
# Part of norm-opt. Imported by cmake/gen_pass_options.py and
# cmake/gen_plan_fields.py (which run with cmake/ on sys.path).
#===----------------------------------------------------------------------===#


def write_if_changed(path, text):
    """Writes `text` to `path` unless it already holds it, so that what
    includes the file is not rebuilt for nothing."""
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(text)
