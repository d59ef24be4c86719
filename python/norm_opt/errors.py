#===- errors.py - The exceptions norm_opt raises --------------------------===#
"""Every error norm_opt raises is a NormOptError; each says which argument,
file or call it is about."""


class NormOptError(Exception):
    """Base class of norm_opt's errors."""


class NormOptNotFoundError(NormOptError, FileNotFoundError):
    """The norm-opt executable is not where the argument, $NORM_OPT or PATH
    say (the message lists where it looked)."""


class LibraryNotFoundError(NormOptError, FileNotFoundError):
    """A compiled library (or its signature) is missing or cannot be loaded."""


class CompileError(NormOptError):
    """`norm-opt compile` failed; `diagnostics` holds what it printed."""

    def __init__(self, message, command=None, returncode=None,
                 diagnostics=""):
        super().__init__(message)
        self.command = command
        self.returncode = returncode
        self.diagnostics = diagnostics


class SignatureError(NormOptError):
    """A signature file (JSON) or header does not describe the library."""


class ArgumentError(NormOptError, ValueError):
    """An argument of a compiled function is wrong (count, dtype, shape,
    strides, alignment, device); `argument` names it."""

    def __init__(self, message, argument=None):
        super().__init__(message)
        self.argument = argument


class NormRuntimeError(NormOptError, RuntimeError):
    """A compiled function returned a non-zero normrt_status; `status`,
    `status_name` and `message` (normrt_last_error()) say why."""

    def __init__(self, function, status, status_name, message):
        super().__init__(f"{function}: {status_name} ({status}): {message}")
        self.function = function
        self.status = status
        self.status_name = status_name
        self.message = message
