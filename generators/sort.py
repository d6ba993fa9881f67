"""SORT: after reading L values and L zeros, output them ordered by distance from the first (data_cards/sort.md).

Worked example (L = 4, T = 8)::

    t          0     1     2     3    4 .. 7
    value     0.5  -1.0   0.9   0.4   0 ...        (+ cos, sin over T = 8)
    |x-x0|    0.0   1.5   0.4   0.1
    output                             0.5  0.4  0.9  -1.0    (stable sort by distance; y[0] = x[0])

>>> from ssmbench.seeding import keys_for
>>> task, cfg = Sort(), SortConfig(L=4)
>>> out = task.generate(cfg, keys_for("sort", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = out["inputs"][0, :4, 0], out["targets"][0, :, 0]
>>> bool(y[0] == x[0]), sorted(y.tolist()) == sorted(x.tolist())
(True, True)

`order="value"` is the authors' earlier SORT (ag1988/dlr@27e7287: `seq.sort(-1)`), the values in ascending order:

>>> plain = SortConfig(L=4, order="value")
>>> out = task.generate(plain, keys_for("sort", task.version, plain.to_dict(), 0, "train", 0, 1))
>>> bool((out["targets"][0, :, 0] == np.sort(out["inputs"][0, :4, 0])).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, final

import numpy as np
from numba import njit, prange

from ssmbench.api import TaskConfig
from ssmbench.errors import ConfigError

from ._atomic import AtomicTask, atomic_policy, atomic_spec, check_length
from ._kernels import fill_noise_then_zeros, stable_order_by_distance


@dataclass(frozen=True)
class SortConfig(TaskConfig):
    L: int = 4096
    """Number of values to sort; the input has T = 2L positions (L values, then L zeros)."""
    order: str = "distance"
    """"distance": by increasing |x_i - x_0| (the paper's text and the authors' final code, the default); "value":
    ascending values (the authors' generator at ag1988/dlr@27e7287; data_cards/sort.md, Variants)."""
    added_defaults: ClassVar[dict[str, Any]] = {"order": "distance"}

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ConfigError("order", f"must be one of {', '.join(ORDERS)}, got {self.order!r}")
        check_length("sort", self.L, 1)


ORDERS = ("distance", "value")


@njit(parallel=True, cache=True)
def _fill_sort(keys, pos, by_value, x, y):
    n, L = y.shape[0], y.shape[1]
    for i in prange(n):
        v, _ = fill_noise_then_zeros(keys[i], x[i], L, pos)
        if by_value:
            y[i, :, 0] = np.sort(v)
            continue
        order = np.empty(L, dtype=np.int64)
        stable_order_by_distance(v, v[0], order)
        for t in range(L):
            y[i, t, 0] = v[order[t]]


@final
class Sort(AtomicTask[SortConfig]):
    """Output the input sorted by distance from its first element, after L appended zeros

    Input (2L, 3) as in REVERSE. Target (L, 1), aligned with the last L outputs: the L values ordered by
    increasing float64 |x_i - x_0|, ties in index order (a stable sort), so y[0] = x[0]; with `order="value"`,
    the values in ascending order.
    """

    name = "sort"
    version = "1"
    Config = SortConfig
    policy = atomic_policy(8)
    stream_exempt = ("order",)  # the target rule only: both orders sort the same inputs

    def spec(self, config: SortConfig):
        return atomic_spec(2 * config.L, 3, config.L, 1, shuffled=("targets",))

    def _fill(self, config: SortConfig, keys, pos, out) -> None:
        _fill_sort(keys, pos, config.order == "value", out["inputs"], out["targets"])

    def oracle(self, config: SortConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        v = np.asarray(sample["inputs"])[: config.L, 0]
        if config.order == "value":
            return {"targets": np.sort(v.astype(np.float64)).astype(np.float32)[:, None]}
        distance = np.abs(v.astype(np.float64) - np.float64(v[0]))
        return {"targets": v[np.argsort(distance, kind="stable")].astype(np.float32)[:, None]}
