"""Two-pass generation for tasks that drop duplicates (ListOps): candidates, survivors, final shards.

1. Candidate c is a pure function of (task, version, config, root seed, c), drawn on split "candidates" and written
   to candidate shards under `.build/candidates/` (in parallel, resumable, job-array friendly like any shard).
2. Finalize hashes every candidate with the task's `dedup_hashes` and picks survivors with its `select_survivors`
   (the rules are the task's: ListOps keeps the lowest candidate index of every group sharing an expression or an
   operator template), extends the candidate stream deterministically if too few survive, and assigns survivors in
   candidate order to train, then val, then test; the task's `dedup_report` goes into the manifest.
3. Final shards are written by copying surviving rows (I/O only); `candidate_index` records their origin.
Survivors depend only on candidate keys, so the dataset is the same for any parallelism or job-array split.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..folder.splits import SPLIT_ORDER
from .shards import ShardSpec, shard_done


def candidate_margin(total: int) -> int:
    """The over-provisioning of the candidate stream: max(64, 1 %)."""
    return max(64, math.ceil(0.01 * total))


def candidate_shards(count: int, spp: int) -> list[ShardSpec]:
    """Candidate shards covering [0, count): fixed-size blocks, so extending the stream only appends shards."""
    n_shards = -(-count // spp)
    return [ShardSpec("candidates", j, 0, j * spp, min(count, (j + 1) * spp)) for j in range(n_shards)]


def build_root(path: Path) -> Path:
    return path / ".build"


def read_candidates(path: Path, shards: list[ShardSpec], fields: list[str]) -> dict[str, np.ndarray]:
    """The named fields of the given candidate shards, concatenated."""
    import h5py

    parts: dict[str, list[np.ndarray]] = {k: [] for k in fields}
    for shard in shards:
        with h5py.File(build_root(path) / shard.relpath, "r", locking=False) as h5:
            for k in fields:  # a candidate shard may hold more rows than asked (see shards.covers)
                parts[k].append(h5[k][:shard.stop - shard.start])
    return {k: np.concatenate(v) for k, v in parts.items()}


def hashes_of(task: Any, config: Any, path: Path, shards: list[ShardSpec],
              cache: dict[ShardSpec, np.ndarray] | None = None) -> np.ndarray:
    """(n_candidates, k) uint64 hashes from the task's `dedup_hashes`, computed shard by shard (bounded memory);
    `cache` keeps each shard's hashes across the rounds of a growing candidate stream."""
    fields = list(task.dedup_fields) or [k for k in task.spec(config).fields if k != "candidate_index"]
    cache = {} if cache is None else cache
    out = []
    for shard in shards:
        if shard not in cache:
            cache[shard] = task.dedup_hashes(config, read_candidates(path, [shard], fields))
        out.append(cache[shard])
    return np.concatenate(out) if out else np.zeros((0, 4), np.uint64)


MAX_CANDIDATE_FACTOR = 10
"""Give up when this many candidates per needed sample (plus margin) leave too few distinct ones."""


def survivors_by_split(task: Any, config: Any, path: Path, plan: Any, run_candidates: Any) -> tuple[dict, dict]:
    """Survivor candidate indices per split, generating more candidates if too few survive; and the report.

    The stream grows by the margin at a time; every round's new shards, and the old last shard if it was
    short, are written before hashing, and hashes are read back only for the rows each shard spec names.
    """
    total = sum(plan.sizes.values())
    count = total + candidate_margin(total)
    cache: dict[ShardSpec, np.ndarray] = {}
    while True:
        shards = candidate_shards(count, plan.samples_per_shard)
        run_candidates([s for s in shards if shard_done(build_root(path), s) is None])
        hashes = hashes_of(task, config, path, shards, cache)
        kept = task.select_survivors(config, hashes, total)
        if kept.size >= total:
            break
        if count >= MAX_CANDIDATE_FACTOR * (total + candidate_margin(total)):
            from ...errors import ConfigError

            raise ConfigError("--n", f"{plan.task} with this config gives only {kept.size} distinct samples among "
                                     f"{count} candidates, fewer than the {total} asked for",
                              "ask for fewer samples, or widen the config (longer or deeper expressions)")
        count += candidate_margin(total)
    report = task.dedup_report(config, hashes, {s: plan.sizes[s] for s in SPLIT_ORDER})
    bounds = np.cumsum([0] + [plan.sizes[s] for s in SPLIT_ORDER])
    by_split = {s: kept[bounds[i]:bounds[i + 1]] for i, s in enumerate(SPLIT_ORDER)}
    report["candidates_generated"] = int(count)
    return by_split, report


def copy_rows(path: Path, spp: int, candidate_ids: np.ndarray, fields: list[str]) -> dict[str, np.ndarray]:
    """Rows of the given candidates (any order), read from their candidate shards."""
    import h5py

    out: dict[str, list[np.ndarray]] = {k: [] for k in fields}
    order_shard = candidate_ids // spp
    for j in np.unique(order_shard):
        idx = candidate_ids[order_shard == j] - j * spp
        shard = ShardSpec("candidates", int(j), 0, 0, 0)
        with h5py.File(build_root(path) / shard.relpath, "r", locking=False) as h5:
            lo, hi = int(idx.min()), int(idx.max()) + 1  # survivors are nearly contiguous: one slice read
            for k in fields:
                out[k].append(h5[k][lo:hi][idx - lo])
    # candidate_ids are ascending within a split, so shard-by-shard concatenation keeps their order
    return {k: np.concatenate(v) for k, v in out.items()}
