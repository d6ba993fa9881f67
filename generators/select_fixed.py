"""SELECT-FIXED: SELECT with one fixed set of marked positions shared by every sample (data_cards/select_fixed.md).

The positions are drawn once from `fixed_seed` (with L, M and consecutive), independent of the root seed and the
split, and stored as `fixed/positions` in every shard and as `fixed.npy` in the dataset folder.

Worked example (L = 3, M = 2): every sample marks the same two positions, say 0 and 4::

    t          0    1    2    3    4    5    6
    value     v0   v1   v2   v3   v4    0    0
    marker     1    0    0    0    1    0    0      identical in every sample
    output                                v0   v4

>>> from ssmbench.seeding import keys_for
>>> task, cfg = SelectFixed(), SelectFixedConfig(L=3, M=2)
>>> keys = keys_for("select_fixed", task.version, cfg.to_dict(), 0, "train", 0, 3)
>>> x = task.generate(cfg, keys)["inputs"]
>>> bool((x[0, :, 1] == x[1, :, 1]).all() and (x[1, :, 1] == x[2, :, 1]).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, final

import numpy as np

from ssmbench.api import TaskConfig
from ssmbench.seeding import fixed_key

from ._atomic import AtomicTask, atomic_policy, atomic_spec, check_bool, check_length, check_positive
from .select import check_values, draw_positions, fill_select, select_oracle


@dataclass(frozen=True)
class SelectFixedConfig(TaskConfig):
    L: int = 4096
    """Number of noise positions beyond the M to be copied: L + M values, then M zeros (T = L + 2M)."""
    M: int = 32
    """Number of marked values to copy."""
    consecutive: bool = False
    """Mark one block of M consecutive positions (not used in the paper)."""
    fixed_seed: int = 0
    """Seed of the fixed position set (with L, M and consecutive); independent of the dataset's root seed."""
    values: str = "noise"
    """"noise": every one of the L + M positions carries a value (the paper's text); "zeros": only the M marked
    positions do, the other L are 0 (the authors' earlier generator; data_cards/select_fixed.md, Variants). The
    fixed positions do not depend on it."""
    added_defaults: ClassVar[dict[str, Any]] = {"values": "noise"}

    def __post_init__(self) -> None:
        check_positive("M", self.M)
        check_bool("consecutive", self.consecutive)
        check_values(self.values)
        check_positive("fixed_seed", self.fixed_seed, 0)
        check_length("select_fixed", self.L, 1)


def fixed_positions(config: SelectFixedConfig) -> np.ndarray:
    """The fixed marked positions (M,) int64, a pure function of (L, M, consecutive, fixed_seed)."""
    params = {"L": config.L, "M": config.M, "consecutive": config.consecutive, "fixed_seed": config.fixed_seed}
    out = np.empty(config.M, dtype=np.int64)
    draw_positions(np.uint64(fixed_key(SelectFixed.name, SelectFixed.version, params)), config.L + config.M,
                   config.M, config.consecutive, out)
    return out


@final
class SelectFixed(AtomicTask[SelectFixedConfig]):
    """Copy the M marked values, in order, to the last M positions (one fixed mark set)

    As SELECT, except that the marked positions are the same in every sample of every split; they are stored in
    the `fixed/positions` group of each shard and in `fixed.npy`.
    """

    name = "select_fixed"
    version = "1"
    Config = SelectFixedConfig
    policy = atomic_policy(3)

    def spec(self, config: SelectFixedConfig):
        return atomic_spec(config.L + 2 * config.M, 4, config.M, 1,
                           input_doc="value, marker (fixed positions), cos(2*pi*t/T), sin(2*pi*t/T)")

    def _fill(self, config: SelectFixedConfig, keys, pos, out) -> None:
        scratch = np.empty((keys.shape[0], config.M), dtype=np.int32)
        fill_select(keys, pos, fixed_positions(config), config.consecutive, config.values == "zeros", out["inputs"],
                    out["targets"], scratch)

    def oracle(self, config: SelectFixedConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return select_oracle(sample, config.M)

    def fixed_arrays(self, config: SelectFixedConfig) -> dict[str, np.ndarray]:
        return {"positions": fixed_positions(config).astype(np.int32)}
