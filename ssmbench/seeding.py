"""Per-sample keys: every sample is a pure function of (task, version, config, root seed, split, index).

Scheme "splitmix64-v1" (recorded in every manifest as `seeding.scheme`)::

    stream    = first 8 bytes (little-endian) of sha256(canonical_json({task, version, config}))
    key(s, i) = sm(sm(sm(sm(root_seed) ^ stream) ^ split_id[s]) ^ i)        with sm = one SplitMix64 step

Only the task config enters the stream: sample counts, shard sizes, worker counts and output paths do not, so each
split of a small build is a prefix of the same split of a larger one. NumPy only; the Numba generator that turns a
key into random numbers lives in `ssmbench.generators._rng`.

>>> hex(splitmix64(0))
'0xe220a8397b1dcdaf'
>>> int(sample_keys(1234, "train", 0, 3)[1]) == int(sample_keys(1234, "train", 1, 2)[0])
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

SEED_SCHEME = "splitmix64-v1"
SPLIT_IDS: Mapping[str, int] = {"train": 1, "val": 2, "test": 3, "candidates": 4, "fixed": 0xF1}
_MASK = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """One SplitMix64 step from state x (Python ints, wrap-around at 2**64)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def splitmix64_array(x: np.ndarray) -> np.ndarray:
    """Vectorised SplitMix64 step over a uint64 array (wrap-around arithmetic)."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def stream_id(task: str, version: str, config: Mapping[str, object], exempt: Iterable[str] = ()) -> int:
    """The uint64 stream of a (task, version, config): first 8 bytes of sha256 of its canonical JSON.

    `exempt` names config fields left out (the task's `stream_exempt`: they change only how targets are labelled,
    so datasets that differ only there share their samples' keys).
    """
    from .config import canonical_json

    kept = {k: v for k, v in dict(config).items() if k not in set(exempt)}
    digest = hashlib.sha256(canonical_json({"task": task, "version": version, "config": kept})).digest()
    return int.from_bytes(digest[:8], "little")


def split_base(root_seed: int, stream: int, split: str) -> int:
    """sm(sm(sm(root_seed) ^ stream) ^ split_id): the per-split base that the sample index is mixed into."""
    if split not in SPLIT_IDS:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(SPLIT_IDS)}")
    if not 0 <= root_seed <= _MASK:
        raise ValueError(f"root seed must be in [0, 2**64), got {root_seed}")
    return splitmix64(splitmix64(splitmix64(root_seed) ^ stream) ^ SPLIT_IDS[split])


def sample_keys(stream: int, split: str, start: int, stop: int, root_seed: int = 0) -> np.ndarray:
    """Keys of samples [start, stop) of `split`: (stop - start,) uint64."""
    base = np.uint64(split_base(root_seed, stream, split))
    idx = np.arange(start, stop, dtype=np.uint64)
    return splitmix64_array(idx ^ base)


def keys_for(task: str, version: str, config: Mapping[str, object], root_seed: int, split: str,
             start: int, stop: int, exempt: Iterable[str] = ()) -> np.ndarray:
    """Keys of samples [start, stop) of one split of one (task, version, config, root seed)."""
    return sample_keys(stream_id(task, version, config, exempt), split, start, stop, root_seed)


def fixed_key(task: str, version: str, config: Mapping[str, Any]) -> int:
    """Key of a fixed variant's shared object: root seed = config["fixed_seed"], split "fixed", index 0.

    `config` holds only the parameters the fixed object depends on (plus `fixed_seed`), so the object is the same
    for every root seed and split, and for configs that differ only in unrelated fields.
    """
    fixed_seed = int(config["fixed_seed"])
    return int(keys_for(task, version, config, fixed_seed, "fixed", 0, 1)[0])
