"""Before a long run, estimate what it will write: disk size and time, from a small measured batch."""

from __future__ import annotations

import time
import zlib
from typing import Any

import numpy as np

from ..seeding import keys_for


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _human_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def estimate_build(task: Any, config: Any, plan: Any, workers: int, probe: int = 4) -> dict[str, Any]:
    """Generate `probe` samples (after compiling), time them and zlib-compress them to extrapolate."""
    total = sum(plan.sizes.values())
    keys = keys_for(plan.task, plan.version, plan.config, plan.seed, "train", 0, probe)
    task.generate(config, keys[:1])
    t0 = time.perf_counter()
    block = task.generate(config, keys)
    per_sample = (time.perf_counter() - t0) / probe
    raw = sum(a.nbytes for a in block.values()) / probe
    t1 = time.perf_counter()
    packed = sum(len(zlib.compress(np.ascontiguousarray(a).tobytes(), 4)) for a in block.values()) / probe
    per_sample += (time.perf_counter() - t1) / probe  # compression dominates writing
    seconds = per_sample * total / max(1, workers)
    disk = packed * total
    return {"seconds": seconds, "time_human": _human_seconds(seconds), "disk_bytes": int(disk),
            "disk_human": _human_bytes(disk), "raw_bytes": int(raw * total), "probe_samples": probe}
