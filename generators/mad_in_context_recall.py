"""MAD in-context recall: key-value pairs drawn per sequence; whenever a key comes back, say its value
(Poli et al. 2024, athms/mad-lab `generate_in_context_recall_instance`; data_cards/mad_in_context_recall.md).

Worked example (vocab 16, multi-query: keys 0-7, values 8-15; MAD stores its built sequence minus the last token and
the labels shifted left by one, so each value is predicted at its key)::

    built     3  9  5 12  3  9  5 12
    inputs    3  9  5 12  3  9  5           (the last value is cut)
    targets   -  -  -  -  9  - 12           (- is -100: a first sight of a key is not scored)

>>> import numpy as np
>>> task, cfg = MadInContextRecall(), MadInContextRecallConfig(seq_len=8)
>>> task.oracle(cfg, {"inputs": np.array([3, 9, 5, 12, 3, 9, 5])})["targets"].tolist()
[-100, -100, -100, -100, 9, -100, 12]
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
class MadInContextRecallConfig(TaskConfig):
    seq_len: int = 128
    """Length of MAD's built sequence (even); the stored length is seq_len - 1 with multi_query, else seq_len."""
    vocab_size: int = 16
    """Ids 0 .. vocab_size-1: half keys, half values (less the copy prefix without multi_query)."""
    multi_query: bool = True
    """Score every value whose key was shown before (MAD's benchmark); false: one query after a copy prefix."""

    def __post_init__(self) -> None:
        check_recall(self.seq_len, self.vocab_size, self.multi_query, 0, 0.0)


@final
class MadInContextRecall(MadTask[MadInContextRecallConfig]):
    """MAD in-context recall: recall the value of every key seen before in the sequence"""

    name: ClassVar[str] = "mad_in_context_recall"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = MadInContextRecallConfig
    presets: ClassVar[dict[str, MadInContextRecallConfig]] = sweep_presets(
        MadInContextRecallConfig, {"vocab_size": 16, "seq_len": 128, "multi_query": True},
        {"vocab_size": [32, 64, 128], "seq_len": [256, 512, 1024]})
    policy = mad_policy(0)

    def spec(self, config: MadInContextRecallConfig):
        return recall_spec(config.seq_len, config.vocab_size, config.multi_query, 0)

    def _fill(self, config: MadInContextRecallConfig, keys: np.ndarray, out: dict[str, np.ndarray]) -> None:
        v = RecallVocab.of(config.vocab_size, 0, config.multi_query)
        fill_recall(keys, config.seq_len, v.n_keys, v.n_values, 1, 0.0, config.multi_query, v.copy_prefix,
                    out["inputs"], out["targets"])

    def oracle(self, config: MadInContextRecallConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        vocab = RecallVocab.of(config.vocab_size, 0, config.multi_query)
        return {"targets": recall_oracle(sample["inputs"], vocab, config.multi_query)}
