"""Even pairs: is the number of 01 and 10 pairs even? (Chomsky hierarchy, regular; data_cards/even_pairs.md).

A sample is L uniform bits, then the query token 2; the one label, at the query, is the number of unequal adjacent
pairs (01 or 10) mod 2, as in `tasks/regular/even_pairs.py` of google-deepmind/neural_networks_chomsky_hierarchy
(class 0 even, 1 odd). It equals `first bit != last bit`, so a model need only remember the first bit.

Worked example (L = 7, the paper's docstring string 0101001: two 10s and three 01s, five pairs, odd)::

    position   0  1  2  3  4  5  6  7
    inputs     0  1  0  1  0  0  1  2       (2 is the query token)
    targets    -  -  -  -  -  -  -  1       (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = EvenPairs(), EvenPairsConfig(L=9)
>>> row = task.generate(cfg, keys_for("even_pairs", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> bits, label = row["inputs"][0][:-1].tolist(), int(row["targets"][0][-1])
>>> label == sum(a != b for a, b in zip(bits, bits[1:])) % 2 == int(bits[0] != bits[-1])
True
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

from ._recall import IGNORE_INDEX  # noqa: E402
from ._regular import StringConfig, check_final_layout, empty_tapes, final_label_spec, final_targets  # noqa: E402


@dataclass(frozen=True)
class EvenPairsConfig(StringConfig):
    """L: the number of bits."""


@njit(parallel=True, cache=True)
def _fill_even_pairs(keys, inputs, targets):
    n, t = inputs.shape
    L = t - 1
    for i in prange(n):
        state = rng_state(keys[i])
        changes = 0
        for p in range(L):
            inputs[i, p] = randint(state, 2)
            if p and inputs[i, p] != inputs[i, p - 1]:
                changes += 1
        inputs[i, L] = 2
        targets[i, :] = IGNORE_INDEX
        targets[i, L] = changes % 2


@typing.final
class EvenPairs(Task[EvenPairsConfig]):
    """Say whether a bit string has an odd number of unequal adjacent pairs (Chomsky hierarchy, regular: even_pairs)

    Input (L+1,) token ids: L uniform bits, then the query token 2; target (L+1,): at the query the number of 01
    and 10 pairs mod 2 (0 even, 1 odd), -100 elsewhere.
    """

    name: ClassVar[str] = "even_pairs"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = EvenPairsConfig
    presets: ClassVar[dict[str, EvenPairsConfig]] = {"40": EvenPairsConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 1}, preset_family="chomsky")

    def spec(self, config: EvenPairsConfig) -> Spec:
        return final_label_spec(config.L, ("0", "1"), ("even", "odd"), "token ids: L uniform bits",
                                "the number of unequal adjacent pairs (01, 10) mod 2")

    def generate(self, config: EvenPairsConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tapes(keys, config.L)
        if keys.shape[0]:
            _fill_even_pairs(keys, out["inputs"], out["targets"])
        return out

    def oracle(self, config: EvenPairsConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Count the unequal adjacent pairs of the string; the layout (query last, one label) is checked."""
        bits = check_final_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                  np.asarray(sample["targets"]).reshape(-1), 2, 2)
        return {"targets": final_targets(config.L, sum(a != b for a, b in zip(bits, bits[1:], strict=False)) % 2)}
