"""MAD memorization: one fixed key-to-value map for the whole dataset; after each key and an insert marker, say its
value (Poli et al. 2024, athms/mad-lab `generate_memorization_instance`; data_cards/mad_memorization.md).

Worked example (vocab 8: keys 0-2, values 3-6, insert marker 7; say the fixed map is 0->5, 1->3, 2->6)::

    inputs    1  7  0  7  1  7
    targets   -  3  -  5  -  3      (- is -100)

>>> import numpy as np
>>> task, cfg = MadMemorization(), MadMemorizationConfig(seq_len=6, vocab_size=8)
>>> table = task.fixed_arrays(cfg)["values"]
>>> row = task.oracle(cfg, {"inputs": np.array([1, 7, 0, 7, 1, 7])})["targets"]
>>> row.tolist() == [-100, table[1], -100, table[0], -100, table[1]]
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np
from numba import njit, prange

from ssmbench.api import TaskConfig
from ssmbench.errors import ConfigError
from ssmbench.seeding import fixed_key

from ._mad import IGNORE, MAX_SEQ_LEN, MadTask, check_int, check_vocab, mad_policy, sweep_presets, token_spec
from ._rng import randint_s


@dataclass(frozen=True)
class MadMemorizationConfig(TaskConfig):
    seq_len: int = 32
    """Tokens per sample (even): seq_len / 2 pairs of a key and the insert marker."""
    vocab_size: int = 256
    """Ids: (vocab_size - 1) // 2 keys, the rest up to vocab_size - 2 values, then the insert marker."""
    fixed_seed: int = 12345
    """Seed of the fixed key-to-value map (MAD's default config seed), independent of the dataset's root seed."""

    def __post_init__(self) -> None:
        check_int("fixed_seed", self.fixed_seed, 0)
        check_int("seq_len", self.seq_len, 2, MAX_SEQ_LEN)
        if self.seq_len % 2:
            raise ConfigError("seq_len", f"must be even (key, marker pairs), got {self.seq_len}")
        check_vocab(self.vocab_size, 1, 0, 2, "one key and one value")


def _split(config: MadMemorizationConfig) -> tuple[int, int]:
    ordinary = config.vocab_size - 1
    return ordinary // 2, ordinary - ordinary // 2


@njit(cache=True)
def _draw_map(key, n_keys, n_values, out):
    """A uniform injection of the keys into the values: shuffle the value ids, key k gets the k-th."""
    perm = np.arange(n_values)
    s = np.uint64(key)
    for i in range(n_values - 1, 0, -1):
        j, s = randint_s(s, i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    out[:] = perm[:n_keys] + n_keys


def fixed_map(config: MadMemorizationConfig) -> np.ndarray:
    """(n_keys,) int16: the value id of each key, a pure function of (vocab_size, fixed_seed)."""
    n_keys, n_values = _split(config)
    out = np.empty(n_keys, np.int64)
    key = fixed_key(MadMemorization.name, MadMemorization.version,
                    {"vocab_size": config.vocab_size, "fixed_seed": config.fixed_seed})
    _draw_map(np.uint64(key), n_keys, n_values, out)
    return out.astype(np.int16)


@njit(parallel=True, cache=True)
def _fill_memorization(keys, table, marker, inputs, targets):
    n_keys = table.shape[0]
    for r in prange(keys.shape[0]):
        s = keys[r]
        for p in range(0, inputs.shape[1], 2):
            k, s = randint_s(s, n_keys)
            inputs[r, p] = k
            inputs[r, p + 1] = marker
            targets[r, p] = IGNORE
            targets[r, p + 1] = table[k]


@final
class MadMemorization(MadTask[MadMemorizationConfig]):
    """MAD memorization: recall the value of each key from one fixed map shared by every sample"""

    name: ClassVar[str] = "mad_memorization"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = MadMemorizationConfig
    presets: ClassVar[dict[str, MadMemorizationConfig]] = sweep_presets(
        MadMemorizationConfig, {"vocab_size": 256, "seq_len": 32},
        {"vocab_size": [512, 1024, 2048, 4096, 8192]})
    policy = mad_policy(5)

    def spec(self, config: MadMemorizationConfig):
        n_keys, n_values = _split(config)
        roles = {"keys": [0, n_keys - 1], "values": [n_keys, n_keys + n_values - 1], "insert": config.vocab_size - 1}
        return token_spec(config.seq_len, config.vocab_size, "key, insert-marker pairs",
                          "the key's value from the fixed map, at each insert marker", roles)

    def _fill(self, config: MadMemorizationConfig, keys: np.ndarray, out: dict[str, np.ndarray]) -> None:
        _fill_memorization(keys, fixed_map(config), config.vocab_size - 1, out["inputs"], out["targets"])

    def oracle(self, config: MadMemorizationConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = np.asarray(sample["inputs"], np.int64)
        out = np.full(x.shape[0], IGNORE, np.int16)
        out[1::2] = fixed_map(config)[x[0::2]]
        return {"targets": out}

    def fixed_arrays(self, config: MadMemorizationConfig) -> dict[str, np.ndarray]:
        return {"values": fixed_map(config)}
