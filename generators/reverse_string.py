"""Reverse string: output a bit string backwards (Chomsky hierarchy, deterministic context-free;
data_cards/reverse_string.md).

A sample is L uniform bits, then L query tokens 2; the targets at the query positions are the bits in reverse
order, as `tasks/dcf/reverse_string.py` of google-deepmind/neural_networks_chomsky_hierarchy lays them out
(`output_length` = L, every position scored).

Worked example (L = 6, the paper's docstring string 011010 -> 010110)::

    position   0  1  2  3  4  5  6  7  8  9 10 11
    inputs     0  1  1  0  1  0  2  2  2  2  2  2      (2 is the query token)
    targets    -  -  -  -  -  -  0  1  0  1  1  0      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = ReverseString(), ReverseStringConfig(L=5)
>>> row = task.generate(cfg, keys_for("reverse_string", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> x[5:], y[:5], y[5:] == x[:5][::-1]
([2, 2, 2, 2, 2], [-100, -100, -100, -100, -100], True)
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
class ReverseStringConfig(StringConfig):
    """L: the number of bits (the answer has L bits too)."""


@njit(parallel=True, cache=True)
def _fill_reverse(keys, inputs, targets):
    n = inputs.shape[0]
    L = inputs.shape[1] // 2
    for i in prange(n):
        state = rng_state(keys[i])
        for p in range(L):
            bit = randint(state, 2)
            inputs[i, p] = bit
            inputs[i, L + p] = 2
            targets[i, p] = IGNORE_INDEX
            targets[i, 2 * L - 1 - p] = bit


@typing.final
class ReverseString(Task[ReverseStringConfig]):
    """Output a bit string in reverse order (Chomsky hierarchy, DCF: reverse_string)

    Input (2L,) token ids: L uniform bits, then L query tokens 2; target (2L,): -100 at the bits, the reversed
    string at the query positions.
    """

    name: ClassVar[str] = "reverse_string"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = ReverseStringConfig
    presets: ClassVar[dict[str, ReverseStringConfig]] = {"40": ReverseStringConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text2text-generation"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 4}, preset_family="chomsky")

    def spec(self, config: ReverseStringConfig) -> Spec:
        return tape_spec(config.L, config.L, ("0", "1"), ("0", "1"), "token ids: L uniform bits",
                         "the bits in reverse order")

    def generate(self, config: ReverseStringConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tape(keys, config.L, config.L)
        if keys.shape[0]:
            _fill_reverse(keys, out["inputs"], out["targets"])
        return out

    def oracle(self, config: ReverseStringConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Read the string backwards; the layout (L bits, L queries) is checked."""
        bits, _ = check_tape_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                    np.asarray(sample["targets"]).reshape(-1), config.L, 2, 2)
        return {"targets": tape_targets(config.L, bits[::-1])}
