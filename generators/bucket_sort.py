"""Bucket sort: sort a string over the alphabet 0..4 (Chomsky hierarchy, context-sensitive; data_cards/bucket_sort.md).

A sample is L symbols uniform in 0..v-1 (v = 5 in the paper), then L query tokens v; the targets at the query
positions are the symbols sorted increasingly, as `tasks/cs/bucket_sort.py` of
google-deepmind/neural_networks_chomsky_hierarchy lays them out (`output_length` = L, every position scored).

Worked example (L = 8, the paper's docstring 10204112 -> 00111224)::

    position   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15
    inputs     1  0  2  0  4  1  1  2  5  5  5  5  5  5  5  5      (5 is the query token)
    targets    -  -  -  -  -  -  -  -  0  0  1  1  1  2  2  4      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = BucketSort(), BucketSortConfig(L=6)
>>> row = task.generate(cfg, keys_for("bucket_sort", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> len(x), x[6:] == [5] * 6, y[6:] == sorted(x[:6])
(12, True, True)
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._rng import randint, rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TrainingPolicy  # noqa: E402

from ._chomsky_tape import check_tape_layout, empty_tape, tape_spec, tape_targets  # noqa: E402
from ._recall import IGNORE_INDEX, check_int  # noqa: E402
from ._regular import StringConfig  # noqa: E402


@dataclass(frozen=True)
class BucketSortConfig(StringConfig):
    """L: the number of symbols (the answer has L too)."""

    vocab_size: int = 5
    """Symbols 0..vocab_size-1 (the paper uses 5)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("vocab_size", self.vocab_size, 2, 100)


@njit(parallel=True, cache=True)
def _fill_sort(keys, v, inputs, targets):
    n = inputs.shape[0]
    L = inputs.shape[1] // 2
    for i in prange(n):
        state = rng_state(keys[i])
        counts = np.zeros(v, np.int64)
        for p in range(L):
            s = randint(state, v)
            inputs[i, p] = s
            inputs[i, L + p] = v
            targets[i, p] = IGNORE_INDEX
            counts[s] += 1
        q = L
        for s in range(v):  # the buckets, in order
            for _ in range(counts[s]):
                targets[i, q] = s
                q += 1


@typing.final
class BucketSort(Task[BucketSortConfig]):
    """Sort a string of symbols 0..4 (Chomsky hierarchy, CS: bucket_sort)

    Input (2L,) token ids: L symbols uniform in 0..v-1, then L query tokens v; target (2L,): -100 at the symbols, the
    symbols sorted at the query positions.
    """

    name: ClassVar[str] = "bucket_sort"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = BucketSortConfig
    presets: ClassVar[dict[str, BucketSortConfig]] = {"40": BucketSortConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text2text-generation"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 11}, preset_family="chomsky")

    def spec(self, config: BucketSortConfig) -> Spec:
        symbols = tuple(map(str, range(config.vocab_size)))
        return tape_spec(config.L, config.L, symbols, symbols, f"token ids: L symbols uniform in "
                         f"0..{config.vocab_size - 1}", "the symbols sorted increasingly")

    def generate(self, config: BucketSortConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tape(keys, config.L, config.L)
        if keys.shape[0]:
            _fill_sort(keys, config.vocab_size, out["inputs"], out["targets"])
        return out

    def oracle(self, config: BucketSortConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Sort the string; the layout is checked."""
        v = config.vocab_size
        symbols, _ = check_tape_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                       np.asarray(sample["targets"]).reshape(-1), config.L, v, v)
        return {"targets": tape_targets(config.L, sorted(symbols))}
