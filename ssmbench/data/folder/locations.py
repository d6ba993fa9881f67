"""Where dataset folders live: the data root (`--out`, else `$SSMBENCH_DATA`, else ./data), and near names.

>>> data_root("/scratch/data")
PosixPath('/scratch/data')
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_root", "near_names"]


def data_root(out: str | Path | None = None) -> Path:
    """--out, else $SSMBENCH_DATA, else ./data."""
    return Path(out or os.environ.get("SSMBENCH_DATA") or "data")


def near_names(missing: Path) -> str:
    """"; did you mean ...?" naming dataset folders beside `missing` with a similar name, or ""."""
    import difflib

    parent = missing.parent
    try:
        names = [p.name for p in parent.iterdir() if (p / "manifest.json").is_file()] if parent.is_dir() else []
    except OSError:
        return ""
    close = difflib.get_close_matches(missing.name, names, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(str(parent / n) for n in close)}?" if close else ""
