#===- __init__.py - norm_opt: norm-opt from Python ------------------------===#
"""norm_opt: compile LayerNorm/RMSNorm backward kernels with norm-opt and
call them from Python (standard library + ctypes), and, with torch,
norm_opt.torch: custom ops and drop-in LayerNorm / RMSNorm modules.
docs/embedding.md is the guide."""

from .compiler import compile, compile_command, find_norm_opt, locate_norm_opt
from .errors import (ArgumentError, CompileError, LibraryNotFoundError,
                     NormOptError, NormOptNotFoundError, NormRuntimeError,
                     SignatureError)
from .library import Function, Library
from .signature import FunctionSignature, TensorSpec, parse_header, parse_json

__version__ = "0.1.0"

from ._cli import info  # noqa: E402 (needs __version__)

__all__ = [
    "ArgumentError", "CompileError", "Function", "FunctionSignature",
    "Library", "LibraryNotFoundError", "NormOptError",
    "NormOptNotFoundError", "NormRuntimeError", "SignatureError",
    "TensorSpec", "compile", "compile_command", "find_norm_opt", "info",
    "locate_norm_opt",
    "parse_header", "parse_json",
]
