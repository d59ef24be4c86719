#===- setup.py - the platform tag of a wheel that bundles norm-opt --------===#
# pyproject.toml holds the metadata. A package with norm_opt/_native (staged
# by scripts/dev.sh wheel) carries a native executable: its wheel is tagged
# py3-none-manylinux_<glibc>_<arch> for the glibc it was built against (it
# runs on that glibc or newer), not as pure Python.
import os
import platform

from setuptools import setup

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: sdists and plain installs only
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.isfile(os.path.join(HERE, "norm_opt", "_native", "bin",
                                      "norm-opt"))


def platform_tag():
    tag = os.environ.get("NORM_OPT_WHEEL_PLATFORM")
    if tag:
        return tag
    libc, version = platform.libc_ver()
    if libc != "glibc":
        raise SystemExit(f"setup.py: a glibc platform is needed, got {libc!r}")
    major, minor = version.split(".")[:2]
    return f"manylinux_{major}_{minor}_{platform.machine()}"


cmdclass = {}
if bdist_wheel is not None and BUNDLED:
    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return "py3", "none", platform_tag()

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass)
