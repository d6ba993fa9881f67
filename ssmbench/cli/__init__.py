"""The `ssmbench` command line: thin click commands over typed library functions, one module per verb family.

Results go to stdout (human-readable, or one JSON object with --json); progress bars and logs go to stderr.
Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error, 3 verification mismatch, 130 Ctrl-C.
Heavy imports (numba, h5py, torch) happen inside the commands, so `--help` and `ls` start instantly.
"""

from __future__ import annotations

from . import data_commands as data_commands  # noqa: F401  (registers the commands on the group)
from . import distribution_commands as distribution_commands  # noqa: F401
from . import eval_commands as eval_commands  # noqa: F401
from .app import cli as cli
from .app import main as main
