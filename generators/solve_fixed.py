"""SOLVE-FIXED: SOLVE with one fixed orthogonal matrix A shared by every sample (data_cards/solve_fixed.md).

A is drawn once from `fixed_seed` (with L), independent of the root seed and the split, and stored as `fixed/A`
in every shard and as `fixed.npy`; only X (and so B) varies per sample.

Worked example (L = 8, N = 2)::

    t        0     1     2     3     4     5     6    7
    value   A00   A01   B0    A10   A11   B1    0    0     A identical in every sample
    output                                      X0   X1

>>> from ssmbench.seeding import keys_for
>>> task, cfg = SolveFixed(), SolveFixedConfig(L=8)
>>> x = task.generate(cfg, keys_for("solve_fixed", task.version, cfg.to_dict(), 0, "train", 0, 2))["inputs"]
>>> bool((x[0, [0, 1, 3, 4], 0] == x[1, [0, 1, 3, 4], 0]).all()), bool(x[0, 2, 0] != x[1, 2, 0])
(True, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import final

import numpy as np

from ssmbench.api import TaskConfig
from ssmbench.seeding import fixed_key

from ._atomic import AtomicTask, atomic_policy, atomic_spec, check_positive
from .solve import check_solve_length, fill_solve, haar_orthogonal, solve_oracle, solve_size


@dataclass(frozen=True)
class SolveFixedConfig(TaskConfig):
    L: int = 4096
    """Input length; N = isqrt(L + 1) - 1 unknowns (63 at 4096, 21 at 512)."""
    fixed_seed: int = 0
    """Seed of the fixed matrix A (with L); independent of the dataset's root seed."""

    def __post_init__(self) -> None:
        check_positive("fixed_seed", self.fixed_seed, 0)
        check_solve_length("solve_fixed", self.L)


def fixed_matrix(config: SolveFixedConfig) -> np.ndarray:
    """The fixed A (N, N) float32, a pure function of (L, fixed_seed)."""
    n = solve_size(config.L)
    a = np.empty((n, n), dtype=np.float64)
    key = fixed_key(SolveFixed.name, SolveFixed.version, {"L": config.L, "fixed_seed": config.fixed_seed})
    haar_orthogonal(np.uint64(key), n, a)
    return a.astype(np.float32)


@final
class SolveFixed(AtomicTask[SolveFixedConfig]):
    """Solve AX = B for X given the rows of [A | B], A one fixed orthogonal matrix

    As SOLVE, except that A is the same in every sample of every split; it is stored in the `fixed/A` group of
    each shard and in `fixed.npy`.
    """

    name = "solve_fixed"
    version = "1"
    Config = SolveFixedConfig
    policy = atomic_policy(4)

    def spec(self, config: SolveFixedConfig):
        return atomic_spec(config.L, 3, solve_size(config.L), 1)

    def _fill(self, config: SolveFixedConfig, keys, pos, out) -> None:
        fill_solve(keys, pos, fixed_matrix(config), out["inputs"], out["targets"])

    def oracle(self, config: SolveFixedConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return solve_oracle(sample, solve_size(config.L))

    def fixed_arrays(self, config: SolveFixedConfig) -> dict[str, np.ndarray]:
        return {"A": fixed_matrix(config)}
