"""Copy a string after a separator: the copy task of Jelassi et al. 2024, "Repeat After Me" (data_cards/string_copy.md).

A row is `$ s | s .` then `*` padding: s has a length uniform in [min_length, max_length] and uniform letters
(ids 0 .. V-1; `$ | . *` are V .. V+3). The model reads `$ s |` and must continue with s and `.`; the scored positions
are `|` and the copy's letters, each labelled with the next token (with `length_answer` k > 0 only the first k
letters are copied). Train at lengths 5-20 (the authors' default), test longer with `-o min_length=.. -o
max_length=..` or the single-length presets.

Worked example (V = 26, s = "cab", so L = 2 * 3 + 3 = 9 when max_length = 3)::

    position   0  1  2  3  4  5  6  7  8
    inputs     $  c  a  b  |  c  a  b  .      ids 26 2 0 1 27 2 0 1 28
    targets    -  -  -  -  c  a  b  .  -      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = StringCopy(), StringCopyConfig(min_length=5, max_length=20)
>>> row = task.generate(cfg, keys_for("string_copy", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y, n = row["inputs"][0].tolist(), row["targets"][0].tolist(), int(row["length"][0])
>>> x[0], x[n + 1], x[n + 2: 2 * n + 2] == x[1: n + 1], x[2 * n + 2], set(x[2 * n + 3:]) <= {29}
(26, 27, True, 28, True)
>>> [y[t] for t in range(n + 1, 2 * n + 2)] == x[n + 2: 2 * n + 3]
True
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._rng import rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TaskConfig, TrainingPolicy  # noqa: E402

from ._copying import (CopyConfig, answer_labels, close_row, copy_spec, draw_length, draw_letters,  # noqa: E402
                       SCORING_KEYS, length_presets, parse_row)


@dataclass(frozen=True)
class StringCopyConfig(CopyConfig):
    """`$ s | s .`: copy the whole string (or its first `length_answer` letters)."""


@njit(parallel=True, cache=True)
def _fill_copy(keys, low, high, vocab_size, length_answer, inputs, targets, lengths):
    n = inputs.shape[0]
    for i in prange(n):
        state = rng_state(keys[i])
        x = inputs[i]
        length = draw_length(state, low, high)
        x[0] = vocab_size
        draw_letters(state, x, 1, length, vocab_size)
        x[length + 1] = vocab_size + 1
        answer = min(length_answer, length) if length_answer > 0 else length
        x[length + 2: length + 2 + answer] = x[1: answer + 1]
        close_row(x, targets[i], length + 2, length + 2 + answer, vocab_size + 2, vocab_size + 3)
        lengths[i] = length


@typing.final
class StringCopy(Task[StringCopyConfig]):
    """Copy a string after a separator: Jelassi et al.'s copy task ("Repeat After Me")

    Input (L,) ids `$ s | s .` padded with `*` (letters 0..V-1, then $ | . *); target (L,): from `|` on, the next
    token of the copy and its `.`, -100 elsewhere; `length`: the letters in s.
    """

    name: ClassVar[str] = "string_copy"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = StringCopyConfig
    presets: ClassVar[dict[str, TaskConfig]] = length_presets(StringCopyConfig)
    default_preset: ClassVar[str] = "train"
    default_n: ClassVar[int] = 16_000
    preset_option: ClassVar[typing.Literal["length", "size", "preset"]] = "preset"
    hf_task_category: ClassVar[str] = "token-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(preset_family="copying", groups={"copying": 0},
                                                      scoring_keys=SCORING_KEYS)
    """A fresh stream every step; the quick section and paper rows "copying"."""

    def spec(self, config: StringCopyConfig) -> Spec:
        return copy_spec(config, "$ s | s . (the string, then its copy)")

    def generate(self, config: StringCopyConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        n = keys.shape[0]
        out = {"inputs": np.empty((n, config.L), np.uint8), "targets": np.empty((n, config.L), np.int16),
               "length": np.empty(n, np.int32)}
        if n:
            _fill_copy(keys, config.min_length, config.max_length, config.vocab_size, config.length_answer,
                       out["inputs"], out["targets"], out["length"])
        return out

    def oracle(self, config: StringCopyConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Read the string between `$` and the first `|` and write its copy's tokens as the labels."""
        x, (string,), start = parse_row(config, sample["inputs"], 1, self.name)
        answer = string[:config.answer_length(len(string))]
        return {"targets": answer_labels(config, x, start, answer, self.name), "length": np.int32(len(string))}
