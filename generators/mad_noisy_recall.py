"""MAD noisy in-context recall: in-context recall with a fraction of the pairs replaced by pairs of noise ids, which
are never scored (Poli et al. 2024, athms/mad-lab `generate_noisy_in_context_recall_instance`;
data_cards/mad_noisy_recall.md).

Worked example (vocab 32, 16 noise ids: keys 0-7, values 8-15, noise 16-31)::

    built     3  9 20 17  3  9 25 16  3  9
    inputs    3  9 20 17  3  9 25 16  3
    targets   -  -  -  -  9  -  -  -  9     (noise pairs and first sights are not scored)

>>> import numpy as np
>>> task, cfg = MadNoisyRecall(), MadNoisyRecallConfig(seq_len=10)
>>> task.oracle(cfg, {"inputs": np.array([3, 9, 20, 17, 3, 9, 25, 16, 3])})["targets"].tolist()
[-100, -100, -100, -100, 9, -100, -100, -100, 9]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np

from ssmbench.api import TaskConfig

from ._mad import (
    MadTask,
    RecallVocab,
    check_recall,
    fill_recall,
    mad_policy,
    recall_oracle,
    recall_spec,
    sweep_presets,
)


@dataclass(frozen=True)
class MadNoisyRecallConfig(TaskConfig):
    seq_len: int = 128
    """Length of MAD's built sequence (even); the stored length is seq_len - 1 with multi_query, else seq_len."""
    vocab_size: int = 32
    """All ids, noise included: (vocab_size - noise_vocab_size) split into keys and values, then the noise ids."""
    noise_vocab_size: int = 16
    """Number of noise ids (the last ones before the copy prefix)."""
    frac_noise: float = 0.2
    """Probability that a pair is two noise ids (one pair is always a key-value pair)."""
    multi_query: bool = True
    """Score every value whose key was shown before (MAD's benchmark); false: one query after a copy prefix."""

    def __post_init__(self) -> None:
        check_recall(self.seq_len, self.vocab_size, self.multi_query, self.noise_vocab_size, self.frac_noise)


@final
class MadNoisyRecall(MadTask[MadNoisyRecallConfig]):
    """MAD noisy in-context recall: recall values of repeated keys among pairs of noise tokens"""

    name: ClassVar[str] = "mad_noisy_recall"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = MadNoisyRecallConfig
    presets: ClassVar[dict[str, MadNoisyRecallConfig]] = sweep_presets(
        MadNoisyRecallConfig,
        {"vocab_size": 32, "noise_vocab_size": 16, "seq_len": 128, "multi_query": True, "frac_noise": 0.2},
        {"vocab_size": [48, 80, 144], "seq_len": [256, 512, 1024], "frac_noise": [0.4, 0.6, 0.8]})
    policy = mad_policy(2)

    def spec(self, config: MadNoisyRecallConfig):
        return recall_spec(config.seq_len, config.vocab_size, config.multi_query, config.noise_vocab_size)

    def _fill(self, config: MadNoisyRecallConfig, keys: np.ndarray, out: dict[str, np.ndarray]) -> None:
        v = RecallVocab.of(config.vocab_size, config.noise_vocab_size, config.multi_query)
        fill_recall(keys, config.seq_len, v.n_keys, v.n_values, max(v.n_noise, 1), float(config.frac_noise),
                    config.multi_query, v.copy_prefix, out["inputs"], out["targets"])

    def oracle(self, config: MadNoisyRecallConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        vocab = RecallVocab.of(config.vocab_size, config.noise_vocab_size, config.multi_query)
        return {"targets": recall_oracle(sample["inputs"], vocab, config.multi_query)}
