"""PEP 517 build backend: setuptools' own, with one addition to editable installs (`pip install -e .`).

setuptools installs an editable ssmbench as an import hook appended after Python's path finder (a hook, not a path
entry, because `generators/`, `evaluators/`, `reference_models/` and `data_cards/` install as `ssmbench.*`). A folder
named `ssmbench` without `__init__.py` on `sys.path` is then taken for a namespace package before the hook is
asked: with the clone in `~/code/ssmbench`, a script in `~/code` failed with "cannot import name 'open_dataset' from
'ssmbench' (unknown location)" (issue 37).

`build_editable` adds one module to the editable wheel, `_ssmbench_editable_guard`, imported by the wheel's `.pth`
right after setuptools' hook: a finder placed before the path finder that answers `import ssmbench` with the
installed package only where the path finder would make a namespace package of it. A real `ssmbench` package
earlier on `sys.path` (a checkout in the working folder) still wins, as before; regular wheels are unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (every other hook is setuptools')

GUARD = "_ssmbench_editable_guard"
GUARD_SOURCE = '''"""ssmbench's editable install: `import ssmbench` never becomes a namespace package of a folder named ssmbench
(the clone, seen from its parent folder) while the editable package is installed (.ci/ssmbench_build.py)."""

import sys
from importlib.machinery import PathFinder

import {finder} as _editable


class SsmbenchNamespaceGuard:
    """Before the path finder: the editable package where the path finder would make `ssmbench` a namespace."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname != "ssmbench" or path is not None:
            return None
        found = PathFinder.find_spec(fullname)
        if found is None or found.origin is not None or not found.submodule_search_locations:
            return None  # a real package or module (a checkout on sys.path) or nothing: the usual order decides
        for finder in sys.meta_path:
            if getattr(finder, "__module__", None) == _editable.__name__:
                return finder.find_spec(fullname, path, target)
        return None


if SsmbenchNamespaceGuard not in sys.meta_path:
    _at = next((i for i, f in enumerate(sys.meta_path) if f is PathFinder), len(sys.meta_path))
    sys.meta_path.insert(_at, SsmbenchNamespaceGuard)
'''


def build_editable(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                   metadata_directory: str | None = None) -> str:
    name: str = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    add_guard(Path(wheel_directory) / name)
    return name


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def add_guard(wheel: Path) -> bool:
    """Add the guard module to an editable wheel whose .pth installs setuptools' finder; False (wheel unchanged)
    for any other wheel (a path .pth of the compat or strict modes, a regular wheel)."""
    with zipfile.ZipFile(wheel) as zin:
        entries = {info.filename: (info, zin.read(info)) for info in zin.infolist()}
    pth = next((n for n in entries if n.startswith("__editable__.") and n.endswith(".pth")), None)
    found = re.search(rb"import (__editable___\w+_finder)", entries[pth][1]) if pth else None
    if pth is None or found is None:
        return False
    guard = GUARD_SOURCE.replace("{finder}", found.group(1).decode()).encode()
    pth_data = entries[pth][1].rstrip(b"\n") + f"\nimport {GUARD}\n".encode()
    record = next(n for n in entries if n.endswith(".dist-info/RECORD"))
    changed = {pth: pth_data, f"{GUARD}.py": guard}
    lines = [line for line in entries[record][1].decode().splitlines()
             if line and line.split(",")[0] not in changed]
    lines[-1:-1] = [_record_line(n, d) for n, d in changed.items()]  # RECORD's own line stays last
    changed[record] = ("\n".join(lines) + "\n").encode()
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        for n, (info, data) in entries.items():
            if n != record:
                zout.writestr(info, changed.get(n, data))
        zout.writestr(f"{GUARD}.py", guard)
        zout.writestr(entries[record][0], changed[record])
    tmp.replace(wheel)
    return True
