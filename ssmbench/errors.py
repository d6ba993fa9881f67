"""Exception types raised by the library; the CLI maps each one to a one-line message and an exit code.

Library code raises these for user mistakes (bad options, wrong folders, corrupt files). Anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations


class SsmbenchError(Exception):
    """Base class of every user-facing error. `exit_code` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigError(SsmbenchError, ValueError):
    """An invalid configuration value; names the field, the value received and the bound."""

    exit_code = 2

    def __init__(self, field: str, problem: str, hint: str | None = None) -> None:
        super().__init__(f"{field}: {problem}", hint)
        self.field = field


class UnknownNameError(SsmbenchError, KeyError):
    """An unknown task, model or evaluator name, with close matches."""

    exit_code = 2

    def __init__(self, kind: str, name: str, choices: list[str]) -> None:
        import difflib

        close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
        msg = f"unknown {kind} {name!r}"
        if close:
            msg += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
        elif "." in name and ":" not in name:  # a dotted path: plug-ins are named module:Object
            module, _, obj = name.rpartition(".")
            msg += f"; a plug-in is named module:Object, e.g. '{module}:{obj}'"
        super().__init__(msg, f"run `ssmbench ls {kind}s` to list them")
        self.name = name

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.message


class DatasetError(SsmbenchError):
    """A dataset folder that cannot be used as asked (missing, belongs to another config, incomplete)."""

    exit_code = 2


class VerificationError(SsmbenchError):
    """A dataset whose bytes or structure disagree with its manifest."""

    exit_code = 3

    def __init__(self, message: str, problems: list[str] | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.problems = list(problems or [])


class DownloadError(SsmbenchError):
    """A download that failed after its retries."""

    exit_code = 1
