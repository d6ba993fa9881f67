"""MAD selective copying: tokens scattered among blanks; after the copy marker, emit them in order
(Poli et al. 2024, athms/mad-lab `generate_selective_copying_instance`; data_cards/mad_selective_copying.md).

Worked example (vocab 8: ids 0-5, blank 6, copy marker 7; 3 tokens, seq_len 10, so 3 blanks among them; MAD
never puts a blank between the last token and the marker)::

    inputs    6  4  6  6  2  0  7  6  6  6
    targets   -  -  -  -  -  -  -  4  2  0      (- is -100)

>>> import numpy as np
>>> task, cfg = MadSelectiveCopying(), MadSelectiveCopyingConfig(seq_len=10, vocab_size=8, num_tokens_to_copy=3)
>>> task.oracle(cfg, {"inputs": np.array([6, 4, 6, 6, 2, 0, 7, 6, 6, 6])})["targets"].tolist()[-3:]
[4, 2, 0]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np
from numba import njit, prange

from ssmbench.api import TaskConfig
from ssmbench.errors import ConfigError

from ._mad import IGNORE, MAX_SEQ_LEN, MadTask, check_int, check_vocab, mad_policy, sweep_presets, token_spec
from ._rng import randint_s


@dataclass(frozen=True)
class MadSelectiveCopyingConfig(TaskConfig):
    seq_len: int = 256
    """Tokens per sample: the tokens and seq_len - 2 n - 1 blanks, the copy marker, n answer blanks."""
    vocab_size: int = 16
    """Ids 0 .. vocab_size - 3 are copied; vocab_size - 2 is the blank, vocab_size - 1 the copy marker."""
    num_tokens_to_copy: int = 16
    """n, the number of tokens to copy."""

    def __post_init__(self) -> None:
        check_int("num_tokens_to_copy", self.num_tokens_to_copy, 1)
        check_int("seq_len", self.seq_len, 4, MAX_SEQ_LEN)
        if self.seq_len <= 2 * self.num_tokens_to_copy + 1:
            raise ConfigError("seq_len", f"seq_len={self.seq_len} must exceed 2 * num_tokens_to_copy + 1 = "
                              f"{2 * self.num_tokens_to_copy + 1} (MAD's bound)")
        check_vocab(self.vocab_size, 2, 0, 1, "the copied tokens")


@njit(parallel=True, cache=True)
def _fill_selective_copying(keys, n, n_tokens, inputs, targets):
    seq_len = inputs.shape[1]
    blanks = seq_len - 2 * n - 1
    blank, marker = n_tokens, n_tokens + 1
    for r in prange(keys.shape[0]):
        s = keys[r]
        tokens = np.empty(n, np.int64)
        for i in range(n):
            tokens[i], s = randint_s(s, n_tokens)
        before = np.zeros(n, np.int64)  # blanks inserted before token i (MAD's np.insert at randint(0, n))
        for _ in range(blanks):
            g, s = randint_s(s, n)
            before[g] += 1
        p = 0
        for i in range(n):
            for _ in range(before[i]):
                inputs[r, p] = blank
                p += 1
            inputs[r, p] = tokens[i]
            p += 1
        inputs[r, p] = marker
        inputs[r, p + 1:] = blank
        targets[r, : p + 1] = IGNORE
        targets[r, p + 1:] = tokens


@final
class MadSelectiveCopying(MadTask[MadSelectiveCopyingConfig]):
    """MAD selective copying: copy the tokens scattered among blanks, in order, after a copy marker"""

    name: ClassVar[str] = "mad_selective_copying"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = MadSelectiveCopyingConfig
    presets: ClassVar[dict[str, MadSelectiveCopyingConfig]] = sweep_presets(
        MadSelectiveCopyingConfig, {"vocab_size": 16, "seq_len": 256, "num_tokens_to_copy": 16},
        {"vocab_size": [32, 64, 128], "seq_len": [512, 1024], "num_tokens_to_copy": [32, 64, 96]})
    policy = mad_policy(3)

    def spec(self, config: MadSelectiveCopyingConfig):
        v = config.vocab_size
        return token_spec(config.seq_len, v, "tokens among blanks, the copy marker, then blanks",
                          "the n tokens in order, at the last n positions",
                          {"tokens": [0, v - 3], "blank": v - 2, "copy_marker": v - 1})

    def _fill(self, config: MadSelectiveCopyingConfig, keys: np.ndarray, out: dict[str, np.ndarray]) -> None:
        _fill_selective_copying(keys, config.num_tokens_to_copy, config.vocab_size - 2, out["inputs"],
                                out["targets"])

    def oracle(self, config: MadSelectiveCopyingConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = np.asarray(sample["inputs"], np.int64)
        n, blank = config.num_tokens_to_copy, config.vocab_size - 2
        marker = int(np.flatnonzero(x == config.vocab_size - 1)[0])
        copied = x[:marker][x[:marker] != blank]
        out = np.full(x.shape[0], IGNORE, np.int16)
        out[-n:] = copied
        return {"targets": out}
