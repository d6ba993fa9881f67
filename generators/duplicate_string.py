"""Duplicate string: output a bit string twice (Chomsky hierarchy, context-sensitive; data_cards/duplicate_string.md).

A sample is L uniform bits, then 2L query tokens 2; the targets at the query positions are the string, then the
string again, as `tasks/cs/duplicate_string.py` of google-deepmind/neural_networks_chomsky_hierarchy lays them out
(`output_length` = 2L, every position scored).

Worked example (L = 3, the paper's docstring 101 -> 101 101)::

    position   0  1  2  3  4  5  6  7  8
    inputs     1  0  1  2  2  2  2  2  2      (2 is the query token)
    targets    -  -  -  1  0  1  1  0  1      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = DuplicateString(), DuplicateStringConfig(L=4)
>>> row = task.generate(cfg, keys_for("duplicate_string", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> len(x), x[4:] == [2] * 8, y[4:] == x[:4] * 2
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
from ._recall import IGNORE_INDEX  # noqa: E402
from ._regular import StringConfig  # noqa: E402


@dataclass(frozen=True)
class DuplicateStringConfig(StringConfig):
    """L: the number of bits (the answer has 2L)."""


@njit(parallel=True, cache=True)
def _fill_duplicate(keys, inputs, targets):
    n = inputs.shape[0]
    L = inputs.shape[1] // 3
    for i in prange(n):
        state = rng_state(keys[i])
        targets[i, :L] = IGNORE_INDEX
        inputs[i, L:] = 2
        for p in range(L):
            bit = randint(state, 2)
            inputs[i, p] = bit
            targets[i, L + p] = bit
            targets[i, 2 * L + p] = bit


@typing.final
class DuplicateString(Task[DuplicateStringConfig]):
    """Output a bit string twice (Chomsky hierarchy, CS: duplicate_string)

    Input (3L,) token ids: L uniform bits, then 2L query tokens 2; target (3L,): -100 at the bits, the string twice
    at the query positions.
    """

    name: ClassVar[str] = "duplicate_string"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = DuplicateStringConfig
    presets: ClassVar[dict[str, DuplicateStringConfig]] = {"40": DuplicateStringConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text2text-generation"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 8}, preset_family="chomsky")

    def spec(self, config: DuplicateStringConfig) -> Spec:
        return tape_spec(config.L, 2 * config.L, ("0", "1"), ("0", "1"), "token ids: L uniform bits",
                         "the bits, then the bits again")

    def generate(self, config: DuplicateStringConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tape(keys, config.L, 2 * config.L)
        if keys.shape[0]:
            _fill_duplicate(keys, out["inputs"], out["targets"])
        return out

    def oracle(self, config: DuplicateStringConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Write the string twice; the layout (L bits, 2L queries) is checked."""
        bits, _ = check_tape_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                    np.asarray(sample["targets"]).reshape(-1), config.L, 2, 2)
        return {"targets": tape_targets(config.L, bits + bits)}
