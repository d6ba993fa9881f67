"""Odds first: output the bits at odd positions, then those at even ones (Chomsky hierarchy, context-sensitive;
data_cards/odds_first.md).

A sample is L uniform bits, then L query tokens 2; the targets at the query positions are `s[1::2] + s[::2]` (0-based
positions), which is what `tasks/cs/odds_first.py` of google-deepmind/neural_networks_chomsky_hierarchy computes
(`output_length` = L, every position scored). Its docstring example shows the other order; the card says why the code
is followed.

Worked example (L = 8, the paper's docstring string 00110101)::

    position   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15
    inputs     0  0  1  1  0  1  0  1  2  2  2  2  2  2  2  2      (2 is the query token)
    targets    -  -  -  -  -  -  -  -  0  1  1  1  0  1  0  0      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = OddsFirst(), OddsFirstConfig(L=7)
>>> row = task.generate(cfg, keys_for("odds_first", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> len(x), y[7:] == x[1:7:2] + x[0:7:2]
(14, True)
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
class OddsFirstConfig(StringConfig):
    """L: the number of bits (the answer has L too)."""


@njit(parallel=True, cache=True)
def _fill_odds_first(keys, inputs, targets):
    n = inputs.shape[0]
    L = inputs.shape[1] // 2
    odd = L // 2  # bits at odd positions come first
    for i in prange(n):
        state = rng_state(keys[i])
        for p in range(L):
            bit = randint(state, 2)
            inputs[i, p] = bit
            inputs[i, L + p] = 2
            targets[i, p] = IGNORE_INDEX
            targets[i, L + (p // 2 if p % 2 else odd + p // 2)] = bit


@typing.final
class OddsFirst(Task[OddsFirstConfig]):
    """Output a bit string's odd-position bits, then its even-position bits (Chomsky hierarchy, CS: odds_first)

    Input (2L,) token ids: L uniform bits, then L query tokens 2; target (2L,): -100 at the bits, then
    s[1::2] + s[::2] at the query positions.
    """

    name: ClassVar[str] = "odds_first"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = OddsFirstConfig
    presets: ClassVar[dict[str, OddsFirstConfig]] = {"40": OddsFirstConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text2text-generation"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 10}, preset_family="chomsky")

    def spec(self, config: OddsFirstConfig) -> Spec:
        return tape_spec(config.L, config.L, ("0", "1"), ("0", "1"), "token ids: L uniform bits",
                         "the bits at odd positions (0-based), then those at even positions")

    def generate(self, config: OddsFirstConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tape(keys, config.L, config.L)
        if keys.shape[0]:
            _fill_odds_first(keys, out["inputs"], out["targets"])
        return out

    def oracle(self, config: OddsFirstConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Slice the string (odd positions, then even ones); the layout is checked."""
        bits, _ = check_tape_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                    np.asarray(sample["targets"]).reshape(-1), config.L, 2, 2)
        return {"targets": tape_targets(config.L, bits[1::2] + bits[::2])}
