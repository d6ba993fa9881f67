"""Parity check: is the number of 1s in a bit string odd? (Chomsky hierarchy, regular; data_cards/parity_check.md).

A sample is L uniform bits, then the query token 2; the one label, at the query, is (number of 1s) mod 2, as in
`tasks/regular/parity_check.py` of google-deepmind/neural_networks_chomsky_hierarchy (class 0 even, 1 odd).

Worked example (L = 7, the paper's docstring string 1010100: three 1s, odd)::

    position   0  1  2  3  4  5  6  7
    inputs     1  0  1  0  1  0  0  2       (2 is the query token)
    targets    -  -  -  -  -  -  -  1       (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = ParityCheck(), ParityCheckConfig(L=7)
>>> row = task.generate(cfg, keys_for("parity_check", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0], row["targets"][0]
>>> int(x[-1]), int(y[-1]) == int(x[:-1].sum()) % 2, int((y != -100).sum())
(2, True, 1)
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
class ParityCheckConfig(StringConfig):
    """L: the number of bits."""


@njit(parallel=True, cache=True)
def _fill_parity(keys, inputs, targets):
    n, t = inputs.shape
    L = t - 1
    for i in prange(n):
        state = rng_state(keys[i])
        ones = 0
        for p in range(L):
            bit = randint(state, 2)
            inputs[i, p] = bit
            ones += bit
        inputs[i, L] = 2
        targets[i, :] = IGNORE_INDEX
        targets[i, L] = ones % 2


@typing.final
class ParityCheck(Task[ParityCheckConfig]):
    """Say whether a bit string has an odd number of 1s (Chomsky hierarchy, regular: parity_check)

    Input (L+1,) token ids: L uniform bits, then the query token 2; target (L+1,): at the query the parity (0 even,
    1 odd), -100 elsewhere.
    """

    name: ClassVar[str] = "parity_check"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = ParityCheckConfig
    presets: ClassVar[dict[str, ParityCheckConfig]] = {"40": ParityCheckConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 0, "state_tracking": 0},
                                                      preset_family="chomsky")

    def spec(self, config: ParityCheckConfig) -> Spec:
        return final_label_spec(config.L, ("0", "1"), ("even", "odd"), "token ids: L uniform bits",
                                "the number of 1s mod 2")

    def generate(self, config: ParityCheckConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tapes(keys, config.L)
        if keys.shape[0]:
            _fill_parity(keys, out["inputs"], out["targets"])
        return out

    def oracle(self, config: ParityCheckConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Count the 1s of the string; the layout (query last, one label) is checked."""
        bits = check_final_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                  np.asarray(sample["targets"]).reshape(-1), 2, 2)
        return {"targets": final_targets(config.L, sum(bits) % 2)}
