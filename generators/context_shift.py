"""CONTEXT-SHIFT: shift a sequence by an offset encoded in its first two values (data_cards/context_shift.md).

x' = (cos(2*pi*s/L), sin(2*pi*s/L), x_0 .. x_{L-3}) with s uniform in {0 .. L-3}; the target is x' shifted right by
s with zero fill (the two-value prefix is shifted too). The offset is stored per sample as `shift`.

Worked example (L = 6, s = 2)::

    t        0        1        2    3    4    5
    x'     cos(a)   sin(a)    x0   x1   x2   x3      a = 2*pi*2/6   (+ cos, sin of 2*pi*t/6)
    y        0        0     cos(a) sin(a) x0   x1

>>> from ssmbench.seeding import keys_for
>>> task, cfg = ContextShift(), ContextShiftConfig(L=6)
>>> out = task.generate(cfg, keys_for("context_shift", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y, s = out["inputs"][0, :, 0], out["targets"][0, :, 0], int(out["shift"][0])
>>> 0 <= s <= 3 and bool((y[s:] == x[: 6 - s]).all() and (y[:s] == 0).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import final

import numpy as np
from numba import njit, prange

from ssmbench.api import Field, TaskConfig

from ._atomic import AtomicTask, atomic_policy, atomic_spec, check_length
from ._kernels import fill_ninf_normal
from ._rng import randint_s


@dataclass(frozen=True)
class ContextShiftConfig(TaskConfig):
    L: int = 4096
    """Input length, including the two-value (cos, sin) prefix that encodes the shift."""

    def __post_init__(self) -> None:
        check_length("context_shift", self.L, 4)


@njit(parallel=True, cache=True)
def _fill_context_shift(keys, pos, x, y, shifts):
    n, L = x.shape[0], x.shape[1]
    for i in prange(n):
        v = np.empty(L, dtype=np.float32)
        s = fill_ninf_normal(keys[i], v[2:])
        k, s = randint_s(s, L - 2)  # k in {0 .. L-3}
        angle = 2.0 * np.pi * np.float64(k) / np.float64(L)
        v[0] = np.cos(angle)
        v[1] = np.sin(angle)
        x[i, :, 0] = v
        x[i, :, 1:] = pos
        y[i, :k, 0] = 0.0
        y[i, k:, 0] = v[: L - k]
        shifts[i] = k


@final
class ContextShift(AtomicTask[ContextShiftConfig]):
    """Shift a sequence by an offset encoded in its first two values

    Input (L, 3): (cos, sin) of 2*pi*s/L, then L - 2 inf-normalised noise values; cos, sin channels. Target (L, 1):
    that sequence shifted right by s in {0 .. L-3} (the reference's range) with zero fill.
    """

    name = "context_shift"
    version = "1"
    Config = ContextShiftConfig
    policy = atomic_policy(9)

    def spec(self, config: ContextShiftConfig):
        extra = {"shift": Field("int32", (), "the shift s in {0 .. L-3}", codec="none")}
        return atomic_spec(config.L, 3, config.L, 1, extra=extra, shuffled=("targets",))

    def _fill(self, config: ContextShiftConfig, keys, pos, out) -> None:
        _fill_context_shift(keys, pos, out["inputs"], out["targets"], out["shift"])

    def oracle(self, config: ContextShiftConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        v = np.asarray(sample["inputs"])[:, 0]
        L = config.L
        # decode the shift from the prefix: s = round(atan2(sin, cos) * L / (2 pi)) mod L
        s = int(np.rint(np.arctan2(np.float64(v[1]), np.float64(v[0])) * L / (2 * np.pi))) % L
        return {"targets": np.concatenate([np.zeros(s, np.float32), v[: L - s]])[:, None], "shift": np.int32(s)}
