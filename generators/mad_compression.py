"""MAD compression: a random token sequence closed by a compression marker; the target at every position is the
input itself (Poli et al. 2024, athms/mad-lab `generate_compression_instance`; data_cards/mad_compression.md).

MAD scores this task with an autoencoder backbone: the encoder's state at the marker, decoded by an MLP from
positional embeddings alone, must reproduce the whole sequence. Stored as MAD stores it; the task's policy asks the
harness for that readout (`model.pool = "bottleneck"`, ssmbench/harness/models/bottleneck.py; see the data card).

Worked example (vocab 8: ids 0-6, marker 7)::

    inputs    3  0  6  6  2  7
    targets   3  0  6  6  2  7

>>> import numpy as np
>>> task, cfg = MadCompression(), MadCompressionConfig(seq_len=6, vocab_size=8)
>>> task.oracle(cfg, {"inputs": np.array([3, 0, 6, 6, 2, 7])})["targets"].tolist()
[3, 0, 6, 6, 2, 7]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np
from numba import njit, prange

from ssmbench.api import TaskConfig

from ._mad import MAX_SEQ_LEN, MadTask, check_int, check_vocab, mad_policy, sweep_presets, token_spec
from ._rng import randint_s


@dataclass(frozen=True)
class MadCompressionConfig(TaskConfig):
    seq_len: int = 32
    """Tokens per sample: seq_len - 1 random ids, then the compression marker."""
    vocab_size: int = 16
    """Ids 0 .. vocab_size - 2 are drawn uniformly; vocab_size - 1 is the marker."""

    def __post_init__(self) -> None:
        check_int("seq_len", self.seq_len, 2, MAX_SEQ_LEN)
        check_vocab(self.vocab_size, 1, 0, 1, "the random tokens")


@njit(parallel=True, cache=True)
def _fill_compression(keys, n_tokens, inputs, targets):
    last = inputs.shape[1] - 1
    for r in prange(keys.shape[0]):
        s = keys[r]
        for p in range(last):
            t, s = randint_s(s, n_tokens)
            inputs[r, p] = t
        inputs[r, last] = n_tokens
        targets[r, :] = inputs[r, :]


@final
class MadCompression(MadTask[MadCompressionConfig]):
    """MAD compression: reproduce a random token sequence closed by a compression marker (an autoencoder task)"""

    name: ClassVar[str] = "mad_compression"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = MadCompressionConfig
    presets: ClassVar[dict[str, MadCompressionConfig]] = sweep_presets(
        MadCompressionConfig, {"vocab_size": 16, "seq_len": 32},
        {"vocab_size": [32, 64, 128], "seq_len": [64, 128, 256]})
    policy = mad_policy(4, model_keys={"model.pool": "bottleneck"})  # MAD scores it through its autoencoder

    def spec(self, config: MadCompressionConfig):
        return token_spec(config.seq_len, config.vocab_size, "random ids, then the compression marker",
                          "the input id at every position (all scored)",
                          {"tokens": [0, config.vocab_size - 2], "compression_marker": config.vocab_size - 1})

    def _fill(self, config: MadCompressionConfig, keys: np.ndarray, out: dict[str, np.ndarray]) -> None:
        _fill_compression(keys, config.vocab_size - 1, out["inputs"], out["targets"])

    def oracle(self, config: MadCompressionConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"targets": np.asarray(sample["inputs"]).astype(np.int16)}
