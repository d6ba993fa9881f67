"""SHIFT: output the input delayed by `num_shifts` evenly spaced lags (DLR paper section 3.1; data_cards/shift.md).

Worked example (L = 8, num_shifts = 2; lags s_j = floor(j * L / H) = 0, 4)::

    t          0    1    2    3    4    5    6    7
    x         x0   x1   x2   x3   x4   x5   x6   x7    inf-normalised noise (+ cos, sin channels)
    y[:, 0]   x0   x1   x2   x3   x4   x5   x6   x7    lag 0
    y[:, 1]    0    0    0    0   x0   x1   x2   x3    lag 4

>>> from ssmbench.seeding import keys_for
>>> task, cfg = Shift(), ShiftConfig(L=8, num_shifts=2)
>>> out = task.generate(cfg, keys_for("shift", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = out["inputs"][0], out["targets"][0]
>>> x.shape, y.shape
((8, 3), (8, 2))
>>> bool((y[:, 0] == x[:, 0]).all() and (y[4:, 1] == x[:4, 0]).all() and (y[:4, 1] == 0).all())
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
class ShiftConfig(TaskConfig):
    L: int = 4096
    """Sequence length (input and output)."""
    num_shifts: int = 8
    """Number of lags H (the paper's C = 8); lag j is floor(j * L / H)."""

    def __post_init__(self) -> None:
        if not isinstance(self.num_shifts, int) or self.num_shifts < 2:
            from ssmbench.errors import ConfigError

            raise ConfigError("num_shifts", f"must be an integer >= 2, got {self.num_shifts!r}")
        check_length("shift", self.L, self.num_shifts, f"L >= num_shifts = {self.num_shifts}")


def shift_amounts(config: ShiftConfig) -> np.ndarray:
    """s_j = floor(j * L / H) in integer arithmetic, j = 0 .. H-1."""
    return np.array([j * config.L // config.num_shifts for j in range(config.num_shifts)], dtype=np.int64)


@njit(parallel=True, cache=True)
def _fill_shift(keys, pos, shifts, x, y):
    n, L = x.shape[0], x.shape[1]
    for i in prange(n):
        v, _ = fill_noise_then_zeros(keys[i], x[i], L, pos)
        for j in range(shifts.shape[0]):
            s = shifts[j]
            y[i, :s, j] = 0.0
            y[i, s:, j] = v[: L - s]


def _paper_family(config: ShiftConfig) -> str:
    """Table 5's rows at L = 4096 and 512, Table 2's ("long_shift": H = 32, batch 4) at every other length."""
    return "atomic" if config.L == 4096 else "atomic512" if config.L == 512 else "long_shift"


@final
class Shift(AtomicTask[ShiftConfig]):
    """Output the input delayed by num_shifts evenly spaced lags, one output channel per lag

    Input (L, 3): inf-normalised Gaussian noise, cos, sin. Target (L, num_shifts): column j is the noise shifted
    right by floor(j * L / num_shifts) with zero fill.
    """

    name = "shift"
    version = "1"
    Config = ShiftConfig
    policy = atomic_policy(0, paper_family=_paper_family)

    def spec(self, config: ShiftConfig):
        return atomic_spec(config.L, 3, config.L, config.num_shifts)

    def _fill(self, config: ShiftConfig, keys, pos, out) -> None:
        _fill_shift(keys, pos, shift_amounts(config), out["inputs"], out["targets"])

    def oracle(self, config: ShiftConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        v = np.asarray(sample["inputs"])[:, 0]
        cols = [np.concatenate([np.zeros(s, np.float32), v[: config.L - s]]) for s in shift_amounts(config)]
        return {"targets": np.stack(cols, axis=1).astype(np.float32)}
