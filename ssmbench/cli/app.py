"""The `ssmbench` click group, shared helpers and `main`, which maps library errors to one-line messages.

Results go to stdout (human-readable, or one JSON object with --json); progress bars and logs go to stderr.
Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error, 3 verification mismatch or damaged data,
75 stopped at `eval --time-limit` (resumable), 130 Ctrl-C or SIGTERM.
Heavy imports (numba, h5py, torch) happen inside the commands, so `--help` and `ls` start instantly.
"""

from __future__ import annotations

import errno
import json
import logging
import sys
import traceback
from typing import Any

import click

from .. import __version__
from ..errors import ConfigError, SsmbenchError
from ..plain import json_plain

CONTEXT = {"auto_envvar_prefix": "SSMBENCH", "show_default": True, "help_option_names": ["-h", "--help"],
           "max_content_width": 110}
_state = {"verbose": False}
OS_ERROR_HINTS = {
    errno.EACCES: "choose a writable location (--out), or fix the permissions",
    errno.EPERM: "choose a writable location (--out), or fix the permissions",
    errno.EROFS: "the file system is read-only: choose another location (--out)",
    errno.ENOTDIR: "a part of the path is a file, not a folder: choose another path",
    errno.EISDIR: "the path is a folder: name a file",
    errno.ENOSPC: "the disk is full: free some space or choose another location (--out)",
    errno.EDQUOT: "the disk quota is exceeded: free some space or choose another location (--out)",
    errno.ENAMETOOLONG: "choose a shorter path",
}
"""Operating-system errors that are the environment's, not a bug: one line and a hint, exit 1."""


def emit(obj: dict[str, Any], as_json: bool, human: str) -> None:
    """Print a result: one strict-JSON object (NaN and infinities as null) with --json, else the human line."""
    click.echo(json.dumps(json_plain(obj), sort_keys=True, default=str, allow_nan=False) if as_json else human)


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, prog_name="ssmbench")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging, and tracebacks for errors.")
def cli(verbose: bool) -> None:
    """ssmbench: deterministic long-range sequence benchmark datasets and an evaluation harness.

    \b
    Examples:
      ssmbench ls
      ssmbench describe shift
      ssmbench generate shift --length 512 --n 1000 --out data/
      ssmbench verify data/shift-512
    """
    _state["verbose"] = verbose
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s" if verbose else "%(levelname)s: %(message)s")


def main(argv: list[str] | None = None) -> None:
    """Console entry point: map library errors to one-line messages and exit codes."""
    try:
        cli.main(args=argv, prog_name="ssmbench", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("interrupted", err=True)
        sys.exit(130)
    except SsmbenchError as exc:
        if _state["verbose"]:
            traceback.print_exc()
        kind = "error" if not isinstance(exc, ConfigError) else "invalid option"
        click.echo(f"{kind}: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno not in OS_ERROR_HINTS:
            _internal_error()
        if _state["verbose"]:
            traceback.print_exc()
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"error: {exc.strerror or exc}{where}", err=True)
        click.echo(f"hint: {OS_ERROR_HINTS[exc.errno]}", err=True)
        sys.exit(1)
    except Exception:
        _internal_error()
    _leave_process_group()
    sys.exit(0)


def _leave_process_group() -> None:
    """After a successful command under torchrun, destroy torch.distributed's process group. Left to the interpreter's
    exit, gloo's worker threads can abort a rank ("terminate called without an active exception": seen in about 1 of
    12 two-rank CPU runs on a busy 2-core machine), which torchrun reports as a failed run. Only on success: after an
    error another rank may still be inside a collective, and torchrun ends the ranks anyway."""
    dist = sys.modules.get("torch.distributed")  # never imports torch for commands that did not
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _internal_error() -> None:
    """A bug: print the traceback of the exception being handled, ask for a report, exit 1."""
    traceback.print_exc()
    click.echo(f"ssmbench {__version__} hit an internal error; please report it with the traceback above "
               "and the output of `ssmbench --version`.", err=True)
    sys.exit(1)
