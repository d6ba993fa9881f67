"""One rule for every path read from outside: a manifest's shard and file paths, catalogue names, dataset names.

Anything a remote manifest, a catalogue or a folder's own manifest names is used as a path under a dataset folder
(or a data root), so it must stay there. A path is accepted only when it is

* relative, with `/` as its only separator: no leading `/`, no drive (`C:`), no backslash, no NUL;
* made of plain components: none empty (`a//b`, a trailing `/`), none `.` or `..`;

and, where a file is opened (`inside`), when the path it resolves to, following symlinks, is still inside the folder:
a shard that is a symlink to a file elsewhere is refused like `../x.h5`. A *name* (a dataset or catalogue name,
which becomes one folder) is one such component that does not start with `.` either.

Refusals are `UnsafePathError`, one line, exit 3 as `ssmbench verify`'s (a `DatasetError` and a
`VerificationError`, so either `except` catches it).

>>> check_relative("train/shard-00000-of-00001.h5", "shard path")
'train/shard-00000-of-00001.h5'
>>> [unsafe_reason(p) for p in ("../x.h5", "/etc/passwd", "C:x", "a\\\\b", "a//b", "./a")]  # doctest: +NORMALIZE_WHITESPACE
["has a '..' component", 'is absolute', 'is a drive path', 'has a backslash', 'has an empty component',
 "has a '.' component"]
>>> check_name("../../escaped", "catalogue name")
Traceback (most recent call last):
...
ssmbench.data.folder.safe_paths.UnsafePathError: catalogue name '../../escaped' is not a plain folder name (it has a '..' component)
"""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import DatasetError, VerificationError

__all__ = ["UnsafePathError", "unsafe_reason", "check_relative", "check_name", "inside"]

_DRIVE = re.compile(r"^[A-Za-z]:")


class UnsafePathError(DatasetError, VerificationError):
    """A path read from outside that would lead out of its folder: refused, exit 3."""

    exit_code = 3


def unsafe_reason(rel: object) -> str | None:
    """Why `rel` is not a safe relative path (a phrase: "is absolute", "has a '..' component", ...), or None."""
    if not isinstance(rel, str):
        return f"is a {type(rel).__name__}, not a path"
    if not rel:
        return "is empty"
    if "\x00" in rel:
        return "has a NUL byte"
    if "\\" in rel:
        return "has a backslash"
    if rel.startswith("/"):
        return "is absolute"
    if _DRIVE.match(rel):
        return "is a drive path"
    parts = rel.split("/")
    if ".." in parts:
        return "has a '..' component"
    if "" in parts:
        return "has an empty component"
    if "." in parts:
        return "has a '.' component"
    return None


def check_relative(rel: object, what: str) -> str:
    """`rel` when it is a safe relative path (see the module docstring); an UnsafePathError naming `what` if not."""
    reason = unsafe_reason(rel)
    if reason is not None:
        raise UnsafePathError(f"{what} {rel!r} {reason}: only relative paths inside the dataset folder are accepted",
                              hint="the source is damaged or hostile: nothing was written outside the folder")
    assert isinstance(rel, str)
    return rel


def check_name(name: object, what: str) -> str:
    """`name` when it is one plain folder name: a safe relative path of one component, not starting with '.'."""
    reason = unsafe_reason(name)
    if reason is None and isinstance(name, str):
        reason = "it has a '/'" if "/" in name else "it starts with '.'" if name.startswith(".") else None
    elif reason is not None:
        reason = f"it {reason}"
    if reason is not None:
        raise UnsafePathError(f"{what} {name!r} is not a plain folder name ({reason})",
                              hint="names are one folder name like shift-4096: no '/', '\\', '..' or leading '.'")
    assert isinstance(name, str)
    return name


def inside(root: Path, rel: object, what: str) -> Path:
    """`root / rel`, after `check_relative`, when the path it resolves to (symlinks followed, whether or not it
    exists yet) is inside `root`'s own resolved path; an UnsafePathError naming where it leads if not."""
    path = Path(root) / check_relative(rel, what)
    real_root = Path(root).resolve()
    real = path.resolve()
    if real != real_root and real_root not in real.parents:
        raise UnsafePathError(f"{root}: {what} {rel!r} leads out of the dataset folder (a symlink to {real})",
                              hint="replace the link with the file itself, or re-download or regenerate the dataset")
    return path
