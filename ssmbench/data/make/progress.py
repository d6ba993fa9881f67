"""How far a build has got, and whether what is left fits on the disk: for the free-space check before a build
and for the messages after Ctrl-C or a full disk.

"Done" here is the cheap test (a sidecar describing the shard and a file of the recorded size, no checksum):
good enough to count and to size, never to decide that a shard may be skipped (`shards.shard_done` does that).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .ownership import sweep_temporaries
from .shards import ShardSpec, covers


def finalized(folder: Path, plan: Any) -> bool:
    """Whether `folder` holds the manifest of this very build (another run finished it)."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("build_identity") == plan.identity()


def looks_done(root: Path, shard: ShardSpec) -> dict[str, Any] | None:
    """The sidecar record if the shard looks finished (its file has the recorded size; no checksum)."""
    try:
        record = json.loads((root / shard.sidecar).read_text())
        size = (root / shard.relpath).stat().st_size
    except (OSError, ValueError):
        return None
    if isinstance(record, dict) and covers(record, shard) and record.get("num_bytes") == size:
        return record
    return None


def shards_present(folder: Path, plan: Any) -> int:
    """How many of the plan's shards are finished (all of them once the folder is finalized)."""
    if finalized(folder, plan):
        return len(plan.shards)
    return sum(looks_done(folder, s) is not None for s in plan.shards)


def remaining(folder: Path, plan: Any) -> float:
    """The fraction of the plan's samples not yet in finished shards (1.0 for a new folder)."""
    total = sum(plan.sizes.values())
    if not total or finalized(folder, plan):
        return 0.0
    return sum(s.stop - s.start for s in plan.shards if looks_done(folder, s) is None) / total


def raw_bytes_left(folder: Path, plan: Any, task: Any, config: Any) -> int:
    """An upper bound, up to HDF5 overhead, of the bytes still to write: uncompressed samples (twice for a
    de-duplicated task, whose candidates stay until finalize), per-shard metadata and fixed arrays."""
    spec = task.spec(config)
    fixed = sum(a.nbytes for a in task.fixed_arrays(config).values())
    per_sample = spec.bytes_per_sample() * (2.02 if task.deduplicate else 1.0) * 1.1
    total = per_sample * sum(plan.sizes.values()) + len(plan.shards) * ((64 << 10) + fixed)
    return int(total * remaining(folder, plan)) + (1 << 20)


def check_space(folder: Path, plan: Any, task: Any, config: Any, workers: int, estimates: dict[str, Any]) -> None:
    """Refuse to start (`space.DiskFullError`) when the file system cannot hold what is left to write.

    The raw size settles most cases; only when that does not fit is the written-probe estimate
    (`estimate.estimate_build`, kept in `estimates`) computed and compared instead.
    """
    from .space import check_free_space, free_bytes

    if remaining(folder, plan) <= 0 or free_bytes(folder) >= raw_bytes_left(folder, plan, task, config):
        return
    if "peak_bytes" not in estimates:
        from .estimate import estimate_build

        estimates.update(estimate_build(task, config, plan, workers, say=None))
    check_free_space(folder, int(estimates["peak_bytes"] * remaining(folder, plan)))


PROBE_N = 64
"""Samples of the small plan whose written probe gives the stored bytes per sample for `check_fits_before_planning`."""


def check_fits_before_planning(folder: Path, task: Any, config: Any, total: int, seed: int = 0,
                               codec: str | None = None, *, plan_build: Callable[..., Any]) -> None:
    """Refuse (`space.DiskFullError`) a build of `total` samples whose shards cannot fit the free space of
    `folder`'s file system, before its shard plan is made (planning millions of shards takes minutes).

    The raw size (the spec's bytes per sample x samples; twice for a de-duplicated task, whose candidates stay
    until finalize) settles it when it fits. Otherwise the stored bytes per sample of a probe shard written with the
    build's own settings (`estimate.estimate_build` of a PROBE_N-sample plan: the codec compresses) decide, less
    what finished shards already in `folder` hold (a resumed build needs only the rest). `check_space` checks the
    plan itself again later, finished shards and metadata counted exactly.
    """
    from .space import check_free_space, check_writable, free_bytes

    factor = 2.02 if task.deduplicate else 1.0
    free = free_bytes(folder)
    if task.spec(config).bytes_per_sample() * total * factor <= free:
        return
    check_writable(folder)  # a read-only or virtual file system reports 0 B free: say that instead
    from .estimate import estimate_build

    probe = plan_build(task.name, config, n=PROBE_N, seed=seed, codec=codec)
    per_sample = float(estimate_build(task, config, probe, workers=1, say=None)["per_sample_bytes"])
    done = sum(f.stat().st_size for f in folder.glob("*/shard-*.h5")) if folder.is_dir() else 0
    check_free_space(folder, int(per_sample * total * factor) - done)  # the message of a planned build's check


def space_needed(folder: Path, plan: Any, estimates: Mapping[str, Any]) -> tuple[int, bool]:
    """(bytes, is_upper_bound): about how many more bytes the build needs, from the estimate if there is one,
    else from the bytes per sample of the shards written so far, else the raw upper bound."""
    left = remaining(folder, plan)
    if "peak_bytes" in estimates:
        return int(estimates["peak_bytes"] * left), False
    written = [r for r in (looks_done(folder, s) for s in plan.shards) if r is not None]
    samples = sum(r["stop"] - r["start"] for r in written)
    if samples:
        return int(sum(r["num_bytes"] for r in written) / samples * sum(plan.sizes.values()) * left), False
    from ...registry import get_task
    from ...task_config import from_plain

    task = get_task(plan.task)
    return raw_bytes_left(folder, plan, task, from_plain(task, plan.config)), True


def sweep(folder: Path) -> None:
    """After Ctrl-C or a full disk: remove the temporaries no live run owns (those of killed workers too)."""
    if folder.is_dir():
        sweep_temporaries(folder)
