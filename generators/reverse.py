"""REVERSE: after reading L values and L zeros, output the values in reverse order (data_cards/reverse.md).

Worked example (L = 3, T = 2L = 6)::

    t          0    1    2    3    4    5
    value     x0   x1   x2    0    0    0      (+ cos, sin over T = 6)
    output     .    .    .   x2   x1   x0      the last L of the T outputs

>>> from ssmbench.seeding import keys_for
>>> task, cfg = Reverse(), ReverseConfig(L=3)
>>> out = task.generate(cfg, keys_for("reverse", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = out["inputs"][0], out["targets"][0]
>>> x.shape, y.shape, bool((y[:, 0] == x[2::-1, 0]).all()), bool((x[3:, 0] == 0).all())
((6, 3), (3, 1), True, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import final

import numpy as np
from numba import njit, prange

from ssmbench.api import TaskConfig

from ._atomic import AtomicTask, atomic_policy, atomic_spec, check_length
from ._kernels import fill_noise_then_zeros


@dataclass(frozen=True)
class ReverseConfig(TaskConfig):
    L: int = 4096
    """Number of values to reverse; the input has T = 2L positions (L values, then L zeros)."""

    def __post_init__(self) -> None:
        check_length("reverse", self.L, 1)


@njit(parallel=True, cache=True)
def _fill_reverse(keys, pos, x, y):
    n, L = y.shape[0], y.shape[1]
    for i in prange(n):
        v, _ = fill_noise_then_zeros(keys[i], x[i], L, pos)
        for t in range(L):
            y[i, t, 0] = v[L - 1 - t]


@final
class Reverse(AtomicTask[ReverseConfig]):
    """Output the input sequence reversed, after L appended zeros

    Input (2L, 3): inf-normalised noise on the first L positions, zeros after, then cos and sin over T = 2L.
    Target (L, 1), aligned with the last L outputs: the noise in reverse order.
    """

    name = "reverse"
    version = "1"
    Config = ReverseConfig
    policy = atomic_policy(5)

    def spec(self, config: ReverseConfig):
        return atomic_spec(2 * config.L, 3, config.L, 1, shuffled=("targets",))

    def _fill(self, config: ReverseConfig, keys, pos, out) -> None:
        _fill_reverse(keys, pos, out["inputs"], out["targets"])

    def oracle(self, config: ReverseConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        v = np.asarray(sample["inputs"])[: config.L, 0]
        return {"targets": v[::-1].astype(np.float32)[:, None]}
