"""SELECT: copy the M marked values, in order, to the M appended positions (data_cards/select.md).

The first L + M positions carry inf-normalised noise; M of them are marked in a second channel; M zeros follow.
The target is the marked values in position order, aligned with the last M outputs (the appended zeros).
With `values="zeros"` (the authors' earlier generator, data_cards/select.md "Variants") only the M marked positions
carry values (M normals, inf-normalised among themselves) and the other L are zeros.

Worked example (L = 3, M = 2, T = L + 2M = 7; marks at 1 and 3)::

    t          0    1    2    3    4    5    6
    value     v0   v1   v2   v3   v4    0    0      (+ cos, sin over T = 7)
    marker     0    1    0    1    0    0    0
    output                                v1   v3    the last M of the T outputs

>>> from ssmbench.seeding import keys_for
>>> task, cfg = Select(), SelectConfig(L=3, M=2)
>>> out = task.generate(cfg, keys_for("select", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = out["inputs"][0], out["targets"][0]
>>> x.shape, y.shape, int(x[:, 1].sum()), bool((y[:, 0] == x[x[:, 1] == 1, 0]).all())
((7, 4), (2, 1), 2, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, final

import numpy as np
from numba import njit, prange

from ssmbench.api import Field, TaskConfig
from ssmbench.errors import ConfigError

from ._atomic import AtomicTask, atomic_policy, atomic_spec, check_bool, check_length, check_positive
from ._kernels import fill_ninf_normal, sorted_subset
from ._rng import randint_s

VALUES = ("noise", "zeros")
"""Values of `values`: noise at every one of the L + M positions (the paper's text, the default), or values only
at the M marked positions and zeros elsewhere (the authors' generator at ag1988/dlr@27e7287, commented out later)."""


def check_values(values: str) -> None:
    if values not in VALUES:
        raise ConfigError("values", f"must be one of {', '.join(VALUES)}, got {values!r}")


@dataclass(frozen=True)
class SelectConfig(TaskConfig):
    L: int = 4096
    """Number of noise positions beyond the M to be copied: L + M values, then M zeros (T = L + 2M)."""
    M: int = 32
    """Number of marked values to copy."""
    consecutive: bool = False
    """Mark one block of M consecutive positions, starting uniformly in {0..L} (not used in the paper)."""
    values: str = "noise"
    """"noise": every one of the L + M positions carries a value (the paper's text); "zeros": only the M marked
    positions do, the other L are 0 (the authors' earlier generator; data_cards/select.md, Variants)."""
    added_defaults: ClassVar[dict[str, Any]] = {"values": "noise"}

    def __post_init__(self) -> None:
        check_positive("M", self.M)
        check_bool("consecutive", self.consecutive)
        check_values(self.values)
        check_length("select", self.L, 1)


@njit(cache=True)
def draw_positions(s, n_values, m, consecutive, out):
    """out[:m] = the marked positions among n_values = L + M; returns the state."""
    if consecutive:
        start, s = randint_s(s, n_values - m + 1)
        for k in range(m):
            out[k] = start + k
        return s
    return sorted_subset(s, n_values, m, out)


@njit(parallel=True, cache=True)
def fill_select(keys, pos, fixed_positions, consecutive, zeros, x, y, positions):
    """Shared by SELECT and SELECT-FIXED: fixed_positions is empty for SELECT, the fixed set otherwise.

    zeros=False: L + M noise values, M of them marked. zeros=True: M values (inf-normalised among themselves)
    written at the M marked positions, zeros elsewhere. Values are drawn first, then the positions.
    """
    n, m = y.shape[0], y.shape[1]
    n_values = x.shape[1] - m
    for i in prange(n):
        v = np.empty(m if zeros else n_values, dtype=np.float32)
        s = fill_ninf_normal(keys[i], v)
        idx = np.empty(m, dtype=np.int64)
        if fixed_positions.shape[0] > 0:
            idx[:] = fixed_positions
        else:
            s = draw_positions(s, n_values, m, consecutive, idx)
        if zeros:
            x[i, :, 0] = 0.0
        else:
            x[i, :n_values, 0] = v
            x[i, n_values:, 0] = 0.0
        x[i, :, 1] = 0.0
        x[i, :, 2:] = pos
        for k in range(m):
            value = v[k] if zeros else v[idx[k]]
            x[i, idx[k], 0] = value
            x[i, idx[k], 1] = 1.0
            y[i, k, 0] = value
            positions[i, k] = idx[k]


def select_oracle(sample: Mapping[str, np.ndarray], M: int) -> dict[str, np.ndarray]:
    """Targets from stored inputs: the values at the marked positions, in position order."""
    x = np.asarray(sample["inputs"])
    marked = np.flatnonzero(x[:, 1] == 1.0)
    return {"targets": x[marked, 0].astype(np.float32)[:, None]}


@final
class Select(AtomicTask[SelectConfig]):
    """Copy the M marked values, in order, to the last M positions (random marks per sample)

    Input (L + 2M, 4): values (inf-normalised over the first L + M), marker, cos, sin. Target (M, 1): the marked
    values in position order, aligned with the last M outputs. `positions` stores the marks.
    """

    name = "select"
    version = "1"
    Config = SelectConfig
    policy = atomic_policy(7)

    def spec(self, config: SelectConfig):
        extra = {"positions": Field("int32", (config.M,), "the marked positions, ascending", shuffle=True)}
        return atomic_spec(config.L + 2 * config.M, 4, config.M, 1, extra=extra,
                           input_doc="value, marker, cos(2*pi*t/T), sin(2*pi*t/T)")

    def _fill(self, config: SelectConfig, keys, pos, out) -> None:
        fill_select(keys, pos, np.empty(0, np.int64), config.consecutive, config.values == "zeros", out["inputs"],
                    out["targets"], out["positions"])

    def oracle(self, config: SelectConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return select_oracle(sample, config.M)
