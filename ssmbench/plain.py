"""Small plain-data helpers shared by the data side, the harness and the CLI (no numpy, torch or h5py).

One home each for: human-readable sizes and durations, strict JSON (tuples to lists, NaN / inf to null, NumPy and
torch scalars to Python numbers), a file's sha256 and did-you-mean hints.

Example:
    >>> human_bytes(1536), human_bytes(3 << 30), human_bytes(None)
    ('1.5 KiB', '3.0 GiB', '?')
    >>> human_seconds(42), human_seconds(150), human_seconds(7200)
    ('42 s', '2.5 min', '2.0 h')
    >>> json_plain({"a": (1, 2.0), "b": float("nan"), "c": [float("inf")]})
    {'a': [1, 2.0], 'b': None, 'c': [None]}
    >>> did_you_mean("stepz", ["steps", "seed"])
    "; did you mean 'steps'?"
"""

from __future__ import annotations

import difflib
import hashlib
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["human_bytes", "human_seconds", "json_plain", "json_default", "file_sha256", "did_you_mean"]


def human_bytes(n: float | None) -> str:
    """Binary units with one decimal ('1.5 KiB'); '?' for an unknown size."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover  (the loop returns at TiB)


def human_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def json_plain(obj: Any) -> Any:
    """A copy that strict JSON accepts: tuples as lists, NaN / inf as None, NumPy / torch scalars and arrays as Python
    values, anything else (paths, ...) as its string."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_plain(v) for v in obj]
    if obj is None or isinstance(obj, str | int | bool):
        return obj
    try:
        return json_plain(json_default(obj))
    except TypeError:
        return str(obj)


def json_default(obj: Any) -> Any:
    """`json.dumps(default=...)` for NumPy / torch values and paths; anything else is a TypeError."""
    if hasattr(obj, "item") and getattr(obj, "ndim", 0) == 0:
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")


def file_sha256(path: str | Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while data := f.read(chunk):
            h.update(data)
    return h.hexdigest()


def did_you_mean(name: str, choices: Iterable[str], fmt: str = "'{}'", cutoff: float = 0.6) -> str:
    """'; did you mean X?' for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=cutoff)
    return f"; did you mean {fmt.format(close[0])}?" if close else ""
