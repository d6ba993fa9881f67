"""Whole-or-nothing writes of the small files of a dataset or run folder (manifest, card, sidecars, metrics).

A file is written to a temporary name beside it, fsynced and renamed into place, so a reader sees the old content
or the new, never a part; a failure (a full disk, Ctrl-C) leaves no temporary behind.

>>> import tempfile
>>> from pathlib import Path
>>> with tempfile.TemporaryDirectory() as tmp:
...     atomic_write_json(Path(tmp) / "a" / "b.json", {"z": 1, "a": [1, 2]})
...     print((Path(tmp) / "a" / "b.json").read_text(), end="")
{
  "a": [
    1,
    2
  ],
  "z": 1
}
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_json", "json_bytes"]


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (a no-op where folders cannot be opened, as on Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (PermissionError, IsADirectoryError):
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary name in the same folder, fsync it, rename it into place, fsync the folder.

    On any failure (a full disk, Ctrl-C) the temporary is removed and `path` keeps its old content, if any.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp.{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def json_bytes(obj: Any) -> bytes:
    """The bytes `atomic_write_json` writes: indented by 2, keys sorted, one final newline."""
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def atomic_write_json(path: Path, obj: Any) -> None:
    """`obj` as JSON (`json_bytes`), written whole or not at all."""
    atomic_write_bytes(path, json_bytes(obj))
