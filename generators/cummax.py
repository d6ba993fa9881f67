"""CUMMAX: output the running maximum of the input (DLR paper section 3.1; data_cards/cummax.md).

Worked example (L = 5)::

    t    0     1     2     3     4
    x   0.2  -1.0   0.7   0.1   1.0
    y   0.2   0.2   0.7   0.7   1.0

>>> from ssmbench.seeding import keys_for
>>> task, cfg = Cummax(), CummaxConfig(L=5)
>>> out = task.generate(cfg, keys_for("cummax", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = out["inputs"][0, :, 0], out["targets"][0, :, 0]
>>> import numpy as np
>>> bool((y == np.maximum.accumulate(x)).all()), float(np.abs(x).max())
(True, 1.0)
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
class CummaxConfig(TaskConfig):
    L: int = 4096
    """Sequence length (input and output)."""

    def __post_init__(self) -> None:
        check_length("cummax", self.L, 1)


@njit(parallel=True, cache=True)
def _fill_cummax(keys, pos, x, y):
    n, L = x.shape[0], x.shape[1]
    for i in prange(n):
        v, _ = fill_noise_then_zeros(keys[i], x[i], L, pos)
        best = v[0]
        for t in range(L):
            if v[t] > best:
                best = v[t]
            y[i, t, 0] = best


@final
class Cummax(AtomicTask[CummaxConfig]):
    """Output the running maximum of the input

    Input (L, 3): inf-normalised Gaussian noise, cos, sin. Target (L, 1): max of the noise up to position i.
    """

    name = "cummax"
    version = "1"
    Config = CummaxConfig
    policy = atomic_policy(2)

    def spec(self, config: CummaxConfig):
        return atomic_spec(config.L, 3, config.L, 1)

    def _fill(self, config: CummaxConfig, keys, pos, out) -> None:
        _fill_cummax(keys, pos, out["inputs"], out["targets"])

    def oracle(self, config: CummaxConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        v = np.asarray(sample["inputs"])[:, 0]
        return {"targets": np.maximum.accumulate(v).astype(np.float32)[:, None]}
