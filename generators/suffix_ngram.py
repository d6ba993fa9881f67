"""Suffix-key n-gram lookup: after a string, given one of its n-grams, continue with what followed it (Jelassi et al.
2024, "Repeat After Me", task `suffix_ngram`; data_cards/suffix_ngram.md).

A row is `$ s | g a .` then `*` padding: s is a uniform string (length uniform in [min_length, max_length]), g one of
its n-grams and a the letters after g's first occurrence in s (the first `length_answer` of them when set). The key
comes after the string, so a model that has not kept the string cannot look it up. The scored positions are the
key's last letter and a's letters, each labelled with the next token.

Worked example (n = 2, s = "cabbad", g = "ab": a = "bad")::

    position   0  1  2  3  4  5  6  7  8  9 10 11 12 13
    inputs     $  c  a  b  b  a  d  |  a  b  b  a  d  .
    targets    -  -  -  -  -  -  -  -  -  b  a  d  .  -      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = SuffixNgram(), SuffixNgramConfig(min_length=8, max_length=20)
>>> row = task.generate(cfg, keys_for("suffix_ngram", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, n, p = row["inputs"][0].tolist(), int(row["length"][0]), int(row["key_position"][0])
>>> s = x[1:n + 1]
>>> x[n + 1] == 27 and x[n + 2: n + 5] == s[p:p + 3] and x[n + 5: 2 * n + 2 - p] == s[p + 3:]
True
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ssmbench.api import Spec, Task, TaskConfig, TrainingPolicy

from ._copying import (
    SCORING_KEYS,
    Layout,
    NgramConfig,
    answer_labels,
    generate_lookup,
    length_presets,
    lookup_answer,
    lookup_spec,
    parse_row,
)


@dataclass(frozen=True)
class SuffixNgramConfig(NgramConfig):
    """`$ s | g a .`: the key n-gram after the string."""

    @property
    def layout(self) -> Layout:
        return "suffix"


@typing.final
class SuffixNgram(Task[SuffixNgramConfig]):
    """Continue with what followed an n-gram given after the string: Jelassi et al.'s suffix-key n-gram lookup

    Input (L,) ids `$ s | g a .` padded with `*` (letters 0..V-1, then $ | . *); target (L,): from g's last letter on,
    the next token of a and its `.`, -100 elsewhere; `length`: letters in s; `key_position`: g's first occurrence.
    """

    name: ClassVar[str] = "suffix_ngram"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = SuffixNgramConfig
    presets: ClassVar[dict[str, TaskConfig]] = length_presets(SuffixNgramConfig)
    default_preset: ClassVar[str] = "train"
    default_n: ClassVar[int] = 16_000
    preset_option: ClassVar[typing.Literal["length", "size", "preset"]] = "preset"
    hf_task_category: ClassVar[str] = "token-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(preset_family="copying", groups={"copying": 2},
                                                      scoring_keys=SCORING_KEYS)

    def spec(self, config: SuffixNgramConfig) -> Spec:
        return lookup_spec(config, f"$ s | g a . (the string, a {config.n_gram}-gram g of it, the letters after g)")

    def generate(self, config: SuffixNgramConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        return generate_lookup(config, keys, key_first=False)

    def oracle(self, config: SuffixNgramConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Read the key (the n letters after `|`), find it in the string and label what follows it."""
        x, (string,), after = parse_row(config, sample["inputs"], 1, self.name)
        key = x[after: after + config.n_gram]
        position, answer = lookup_answer(config, string, key, self.name)
        start = after + config.n_gram
        return {"targets": answer_labels(config, x, start, answer, self.name), "length": np.int32(len(string)),
                "key_position": np.int32(position)}
