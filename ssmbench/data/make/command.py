"""The `generate` command as a folder records it: path-free, so cards and manifests can be published.

A manifest keeps `command.argv` so that anyone can rebuild the folder; the output folder, a config file's path,
and options that change where or how loudly a build runs (never its bytes) would leak the builder's user name
and directories into a published card. `portable_argv` drops them (a `--config FILE` becomes its `-o key=value`
pairs, so the command still says everything), and `local_paths` finds what would still leak, for `publish`.

>>> portable_argv(["generate", "shift", "--out", "/home/ada/data", "--length", "64", "--workers=2", "-q"])
['generate', 'shift', '--length', '64', '--workers=2']
>>> local_paths('regenerate: "ssmbench generate shift --out /home/ada/data" see https://host/x/y')
['/home/ada/data']
>>> local_paths("C:\\\\Users\\\\ada\\\\data and ~/data and ./rel/path")
['~/data', 'C:\\\\Users\\\\ada\\\\data']
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

DROP_WITH_VALUE = ("--out", "--shard-index", "--num-shards")
"""Options whose value is a location or a job-array slot: the bytes are the same without them."""
DROP_FLAGS = ("-q", "--quiet", "--json", "--overwrite")

_POSIX = re.compile(r"(?<![\w.:/~-])(?:~|/[\w.+@-]+)(?:/[\w.+@-]+)+")
_WINDOWS = re.compile(r"\b[A-Za-z]:\\[^\s\"']+")


def _config_pairs(path: str) -> list[str]:
    from ...config import load_config_file

    out: list[str] = []
    for key, value in load_config_file(path).items():
        out += ["-o", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    return out


def portable_argv(argv: Sequence[str]) -> list[str]:
    """`argv` without the output folder, job-array slot and output-format flags; `--config FILE` inlined."""
    out: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in DROP_WITH_VALUE:
            i += 1 if eq else 2
            continue
        if arg in DROP_FLAGS:
            i += 1
            continue
        if name == "--config":
            path = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            try:
                out += _config_pairs(path)
            except Exception:  # noqa: BLE001  (a file that is gone: keep nothing rather than its path)
                pass
            i += 1 if eq else 2
            continue
        out.append(arg)
        i += 1
    return out


def local_paths(text: str) -> list[str]:
    """Absolute (or home-relative) local paths in `text`; URLs and relative paths are not paths here."""
    return list(dict.fromkeys(m.group(0) for rx in (_POSIX, _WINDOWS) for m in rx.finditer(text)))
