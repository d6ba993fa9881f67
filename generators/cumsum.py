"""CUMSUM: output the running sum of the input scaled by 1/sqrt(i+1) (DLR paper section 3.1; data_cards/cumsum.md).

Worked example (L = 4)::

    t        0           1                  2                        3
    x        x0          x1                 x2                       x3
    y        x0/1   (x0+x1)/sqrt(2)   (x0+x1+x2)/sqrt(3)   (x0+x1+x2+x3)/sqrt(4)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = Cumsum(), CumsumConfig(L=4)
>>> out = task.generate(cfg, keys_for("cumsum", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = out["inputs"][0, :, 0].astype("float64"), out["targets"][0, :, 0]
>>> bool(abs(y[3] - x.sum() / 2) < 1e-6)
True
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
class CumsumConfig(TaskConfig):
    L: int = 4096
    """Sequence length (input and output)."""

    def __post_init__(self) -> None:
        check_length("cumsum", self.L, 1)


@njit(parallel=True, cache=True)
def _fill_cumsum(keys, pos, root, x, y):
    n, L = x.shape[0], x.shape[1]
    for i in prange(n):
        v, _ = fill_noise_then_zeros(keys[i], x[i], L, pos)
        acc = np.empty(L, dtype=np.float64)
        total = 0.0
        for t in range(L):
            total += np.float64(v[t])
            acc[t] = total
        for t in range(L):  # separate loop: the division vectorises
            y[i, t, 0] = acc[t] / root[t]


@final
class Cumsum(AtomicTask[CumsumConfig]):
    """Output the running sum of the input, scaled by 1/sqrt(i+1)

    Input (L, 3): inf-normalised Gaussian noise, cos, sin. Target (L, 1): float64 prefix sums of the stored
    float32 noise divided by sqrt(i+1), so each output is O(1).
    """

    name = "cumsum"
    version = "1"
    Config = CumsumConfig
    policy = atomic_policy(1)

    def spec(self, config: CumsumConfig):
        return atomic_spec(config.L, 3, config.L, 1, shuffled=("targets",))

    def _fill(self, config: CumsumConfig, keys, pos, out) -> None:
        root = np.sqrt(np.arange(1, config.L + 1, dtype=np.float64))  # sqrt(i + 1)
        _fill_cumsum(keys, pos, root, out["inputs"], out["targets"])

    def oracle(self, config: CumsumConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        v = np.asarray(sample["inputs"])[:, 0].astype(np.float64)
        y = np.cumsum(v) / np.sqrt(np.arange(1, v.shape[0] + 1, dtype=np.float64))
        return {"targets": y.astype(np.float32)[:, None]}
