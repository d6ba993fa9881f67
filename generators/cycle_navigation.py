"""Cycle navigation: where does a walk of -1/0/+1 steps end on a cycle? (Chomsky hierarchy, regular;
data_cards/cycle_navigation.md).

A sample is L uniform actions in {0, 1, 2}, meaning steps -1, 0, +1 (the paper's code moves by `action - 1`), then
the query token 3; the one label, at the query, is the final position (sum of the steps) mod `cycle_length` (5 in
the paper), starting from 0, as in `tasks/regular/cycle_navigation.py` of
google-deepmind/neural_networks_chomsky_hierarchy.

Worked example (L = 5, cycle 5: steps +1 -1 0 -1 -1 end at -2, class 3)::

    position   0  1  2  3  4  5
    inputs     2  0  1  0  0  3       (3 is the query token)
    targets    -  -  -  -  -  3       (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = CycleNavigation(), CycleNavigationConfig(L=12)
>>> row = task.generate(cfg, keys_for("cycle_navigation", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> actions, label = row["inputs"][0][:-1].tolist(), int(row["targets"][0][-1])
>>> label == sum(a - 1 for a in actions) % 5
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

from ._recall import IGNORE_INDEX, check_int  # noqa: E402
from ._regular import StringConfig, check_final_layout, empty_tapes, final_label_spec, final_targets  # noqa: E402


@dataclass(frozen=True)
class CycleNavigationConfig(StringConfig):
    """L: the number of actions."""

    cycle_length: int = 5
    """Positions on the cycle = classes (the paper's `_cycle_length`, 5)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("cycle_length", self.cycle_length, 2, 127)


@njit(parallel=True, cache=True)
def _fill_cycle(keys, cycle, inputs, targets):
    n, t = inputs.shape
    L = t - 1
    for i in prange(n):
        state = rng_state(keys[i])
        where = 0
        for p in range(L):
            action = randint(state, 3)
            inputs[i, p] = action
            where = (where + action + cycle - 1) % cycle
        inputs[i, L] = 3
        targets[i, :] = IGNORE_INDEX
        targets[i, L] = where


@typing.final
class CycleNavigation(Task[CycleNavigationConfig]):
    """Find where a walk of -1/0/+1 steps ends on a cycle of 5 (Chomsky hierarchy, regular: cycle_navigation)

    Input (L+1,) token ids: L uniform actions (0 = step -1, 1 = stay, 2 = step +1), then the query token 3; target
    (L+1,): at the query the final position mod cycle_length, -100 elsewhere.
    """

    name: ClassVar[str] = "cycle_navigation"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = CycleNavigationConfig
    presets: ClassVar[dict[str, CycleNavigationConfig]] = {"40": CycleNavigationConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 2}, preset_family="chomsky")

    def spec(self, config: CycleNavigationConfig) -> Spec:
        return final_label_spec(config.L, ("-1", "0", "+1"), [str(c) for c in range(config.cycle_length)],
                                "token ids: L uniform actions (0 = step -1, 1 = stay, 2 = step +1)",
                                f"the final position on the cycle of {config.cycle_length}, from 0")

    def generate(self, config: CycleNavigationConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tapes(keys, config.L)
        if keys.shape[0]:
            _fill_cycle(keys, config.cycle_length, out["inputs"], out["targets"])
        return out

    def oracle(self, config: CycleNavigationConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Walk the actions from 0; the layout (query last, one label) is checked."""
        actions = check_final_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                     np.asarray(sample["targets"]).reshape(-1), 3, config.cycle_length)
        return {"targets": final_targets(config.L, sum(a - 1 for a in actions) % config.cycle_length)}
