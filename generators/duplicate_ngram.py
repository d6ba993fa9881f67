"""Copy a string in which one n-gram was written over another: Jelassi et al. 2024, "Repeat After Me", task
`duplicate_ngram` (data_cards/duplicate_ngram.md).

A uniform string s (length uniform in [min_length, max_length]) gets two of its candidate n-grams drawn (distinct
positions, `random.sample`); every occurrence of the second is replaced by the first (`str.replace`), so s repeats an
n-gram, which makes copying by n-gram lookup ambiguous. The row is `$ s | s .` then `*` padding, scored as in
`string_copy`: `|` and the copy's letters, each labelled with the next token.

Worked example (n = 2, s = "cabdaef", new = "ab" at 1, old = "da" at 3: s becomes "cababef")::

    position   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16
    inputs     $  c  a  b  a  b  e  f  |  c  a  b  a  b  e  f  .
    targets    -  -  -  -  -  -  -  -  c  a  b  a  b  e  f  .  -      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = DuplicateNgram(), DuplicateNgramConfig(min_length=8, max_length=20)
>>> row = task.generate(cfg, keys_for("duplicate_ngram", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, n = row["inputs"][0].tolist(), int(row["length"][0])
>>> s = x[1:n + 1]
>>> x[n + 1] == 27 and x[n + 2: 2 * n + 2] == s and any(s[a:a + 3] == s[b:b + 3] for a in range(n) for b in range(a))
True
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._rng import randint, rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TaskConfig, TrainingPolicy  # noqa: E402
from ssmbench.errors import ConfigError  # noqa: E402

from ._copying import (Layout, NgramConfig, answer_labels, close_row, copy_spec, draw_keyed,  # noqa: E402
                       SCORING_KEYS, length_presets, parse_row, same_gram)


@dataclass(frozen=True)
class DuplicateNgramConfig(NgramConfig):
    """`$ s | s .` with s holding a written-over n-gram; the whole string is copied (`length_answer` stays 0)."""

    def __post_init__(self) -> None:
        if self.length_answer != 0:
            raise ConfigError("length_answer", f"must be 0 (the whole string is copied), got {self.length_answer!r}")
        super().__post_init__()

    @property
    def layout(self) -> Layout:
        return "duplicate"


@njit(cache=True)
def replace_gram(s, length, new, old, n, out):
    """out[:length] = s[:length] with every non-overlapping occurrence of the n-gram at `old`, scanning left to right
    in s, replaced by the n-gram at `new` (Python's `str.replace`)."""
    out[:length] = s[:length]
    t = 0
    while t <= length - n:
        if same_gram(s, t, old, n):
            out[t: t + n] = s[new: new + n]
            t += n
        else:
            t += 1


@njit(parallel=True, cache=True)
def _fill_duplicate(keys, low, high, n, vocab_size, inputs, targets, lengths):
    rows = inputs.shape[0]
    for i in prange(rows):
        state = rng_state(keys[i])
        s = np.empty(high, np.uint8)
        length, m = draw_keyed(state, s, low, high, n, 0, vocab_size)
        new = randint(state, m)
        old = randint(state, m - 1)
        old += old >= new  # two distinct candidates, in order (random.sample(list_ngrams, 2))
        x = inputs[i]
        x[0] = vocab_size
        replace_gram(s, length, new, old, n, x[1: length + 1])
        x[length + 1] = vocab_size + 1
        x[length + 2: 2 * length + 2] = x[1: length + 1]
        close_row(x, targets[i], length + 2, 2 * length + 2, vocab_size + 2, vocab_size + 3)
        lengths[i] = length


@typing.final
class DuplicateNgram(Task[DuplicateNgramConfig]):
    """Copy a string that repeats an n-gram: Jelassi et al.'s duplicate n-gram task

    Input (L,) ids `$ s | s .` padded with `*` (letters 0..V-1, then $ | . *), s with one n-gram written over another;
    target (L,): from `|` on, the next token of the copy and its `.`, -100 elsewhere; `length`: letters in s.
    """

    name: ClassVar[str] = "duplicate_ngram"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = DuplicateNgramConfig
    presets: ClassVar[dict[str, TaskConfig]] = length_presets(DuplicateNgramConfig)
    default_preset: ClassVar[str] = "train"
    default_n: ClassVar[int] = 16_000
    preset_option: ClassVar[typing.Literal["length", "size", "preset"]] = "preset"
    hf_task_category: ClassVar[str] = "token-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(preset_family="copying", groups={"copying": 3},
                                                      scoring_keys=SCORING_KEYS)

    def spec(self, config: DuplicateNgramConfig) -> Spec:
        return copy_spec(config, f"$ s | s . (a string repeating a {config.n_gram}-gram, then its copy)")

    def generate(self, config: DuplicateNgramConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        n = keys.shape[0]
        out = {"inputs": np.empty((n, config.L), np.uint8), "targets": np.empty((n, config.L), np.int16),
               "length": np.empty(n, np.int32)}
        if n:
            _fill_duplicate(keys, config.min_length, config.max_length, config.n_gram, config.vocab_size,
                            out["inputs"], out["targets"], out["length"])
        return out

    def oracle(self, config: DuplicateNgramConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Read the string between `$` and the first `|` and label its copy, as `string_copy` does."""
        x, (string,), start = parse_row(config, sample["inputs"], 1, self.name)
        return {"targets": answer_labels(config, x, start, string, self.name), "length": np.int32(len(string))}
