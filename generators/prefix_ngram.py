"""Prefix-key n-gram lookup: given an n-gram, then a string, output what follows the n-gram in the string (Jelassi et
al. 2024, "Repeat After Me", task `prefix_ngram`; data_cards/prefix_ngram.md).

A row is `$ g | s | a .` then `*` padding: s is a uniform string (length uniform in [min_length, max_length]), g one of
its n-grams and a the letters after g's first occurrence in s (the first `length_answer` of them when set). The key
comes first, so a model can hold it while it reads the string. The scored positions are the second `|` and a's
letters, each labelled with the next token.

Worked example (n = 2, s = "cabbad", g = "ab": a = "bad")::

    position   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14
    inputs     $  a  b  |  c  a  b  b  a  d  |  b  a  d  .
    targets    -  -  -  -  -  -  -  -  -  -  b  a  d  .  -      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = PrefixNgram(), PrefixNgramConfig(min_length=8, max_length=20)
>>> row = task.generate(cfg, keys_for("prefix_ngram", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, n, p = row["inputs"][0].tolist(), int(row["length"][0]), int(row["key_position"][0])
>>> s, g = x[5:5 + n], x[1:4]
>>> s[p:p + 3] == g and x[4] == x[5 + n] == 27 and x[6 + n: 6 + 2 * n - p - 3] == s[p + 3:]
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
class PrefixNgramConfig(NgramConfig):
    """`$ g | s | a .`: the key n-gram before the string."""

    @property
    def layout(self) -> Layout:
        return "prefix"


@typing.final
class PrefixNgram(Task[PrefixNgramConfig]):
    """Output what follows an n-gram given before the string: Jelassi et al.'s prefix-key n-gram lookup

    Input (L,) ids `$ g | s | a .` padded with `*` (letters 0..V-1, then $ | . *); target (L,): from the second `|`
    on, the next token of a and its `.`, -100 elsewhere; `length`: letters in s; `key_position`: g's first occurrence.
    """

    name: ClassVar[str] = "prefix_ngram"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = PrefixNgramConfig
    presets: ClassVar[dict[str, TaskConfig]] = length_presets(PrefixNgramConfig)
    default_preset: ClassVar[str] = "train"
    default_n: ClassVar[int] = 16_000
    preset_option: ClassVar[typing.Literal["length", "size", "preset"]] = "preset"
    hf_task_category: ClassVar[str] = "token-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(preset_family="copying", groups={"copying": 1},
                                                      scoring_keys=SCORING_KEYS)

    def spec(self, config: PrefixNgramConfig) -> Spec:
        return lookup_spec(config, f"$ g | s | a . (a {config.n_gram}-gram g of s, then the letters after it)")

    def generate(self, config: PrefixNgramConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        return generate_lookup(config, keys, key_first=True)

    def oracle(self, config: PrefixNgramConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Find the key (the letters between `$` and the first `|`) in the string and label what follows it."""
        x, (key, string), start = parse_row(config, sample["inputs"], 2, self.name)
        position, answer = lookup_answer(config, string, key, self.name)
        return {"targets": answer_labels(config, x, start, answer, self.name), "length": np.int32(len(string)),
                "key_position": np.int32(position)}
