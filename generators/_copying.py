"""What the copying tasks share (`string_copy`, `prefix_ngram`, `suffix_ngram`, `duplicate_ngram`; Jelassi et al. 2024,
"Repeat After Me"; data_cards/string_copy.md): the token layout, the configs, the Spec and the Numba pieces.

Ids 0 .. V-1 are the letters, then BOS `$` = V, separator `|` = V+1, EOS `.` = V+2 and padding `*` = V+3, the order of
the authors' tokenizer (`get_tokenizer` in synthetic_exps/data_utils.py). A row holds one example, `$ ... .`, padded
with `*` to the config's L; the scored positions are those whose next token is part of the answer or its EOS (the
authors' loss mask, shifted to the position that predicts the token), with the label that next token.

>>> cfg = CopyConfig(min_length=5, max_length=20)
>>> cfg.L, cfg.vocab, (cfg.bos, cfg.sep, cfg.eos, cfg.pad)
(43, 30, (26, 27, 28, 29))
>>> NgramConfig(min_length=8, max_length=20, n_gram=3, length_answer=2).longest("prefix")
29
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._rng import randint, rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Field, Spec, TaskConfig  # noqa: E402
from ssmbench.errors import ConfigError, VerificationError  # noqa: E402

from ._recall import IGNORE_INDEX, MAX_LENGTH, check_int, token_spec  # noqa: E402

MAX_VOCAB = 252
"""Letters at most 252, so that the 4 special ids fit uint8."""
TEST_LENGTHS = (20, 40, 80, 160, 320)
"""Single-length presets for testing past the training lengths (ssmbench's choice of lengths; the authors' evaluation
scores each length of a range on its own, `evaluation` in synthetic_exps/test_utils.py)."""
SCORING_KEYS = ("min_length", "max_length", "pad_to")
"""The config keys a copying checkpoint may be scored at (`TrainingPolicy.scoring_keys`): strings longer than the
training ones, the paper's test past the training lengths."""
MAX_TRIES = 10
"""Draws of a string for an n-gram task until one has an n-gram that occurs once among the candidates (the
authors' `counter_max_ngram`); their generator raises after the 10th failure, ssmbench keeps the 10th string."""
Layout = Literal["copy", "prefix", "suffix", "duplicate"]


@dataclass(frozen=True)
class CopyConfig(TaskConfig):
    vocab_size: int = 26
    """Letters, ids 0 .. vocab_size-1 (the authors' `--vocab_size`, default 26, the lowercase alphabet)."""
    min_length: int = 5
    """Shortest string; each example's length is uniform in [min_length, max_length] (`--min_train_len`)."""
    max_length: int = 20
    """Longest string (`--max_train_len`; test longer strings with a larger value)."""
    length_answer: int = 0
    """0: the answer is the whole string; k > 0: its first k letters (`--length_answer`)."""
    pad_to: int = 0
    """Sequence length L: 0 is the longest example's length (no padding beyond it); a larger value pads every row with
    `*` to it, e.g. 220 as the authors' `--context_len`."""

    def __post_init__(self) -> None:
        check_int("vocab_size", self.vocab_size, 2, MAX_VOCAB)
        check_int("min_length", self.min_length, 1, MAX_LENGTH)
        check_int("max_length", self.max_length, 1, MAX_LENGTH)
        check_int("length_answer", self.length_answer, 0, MAX_LENGTH)
        check_int("pad_to", self.pad_to, 0, MAX_LENGTH)
        if self.min_length > self.max_length:
            raise ConfigError("min_length", f"{self.min_length} is above max_length {self.max_length}")
        self._check_fits()

    def _check_fits(self) -> None:
        longest = self.longest(self.layout)
        if longest > MAX_LENGTH:
            raise ConfigError("max_length", f"examples of {longest} tokens exceed {MAX_LENGTH}")
        if self.pad_to and self.pad_to < longest:
            raise ConfigError("pad_to", f"{self.pad_to} is shorter than the longest example ({longest} tokens)",
                              "raise pad_to, or set it to 0 (the longest example's length)")

    def answer_length(self, rest: int) -> int:
        """Letters answered when `rest` letters follow the key (the whole string for copying)."""
        return min(self.length_answer, rest) if self.length_answer else rest

    def longest(self, layout: Layout = "copy") -> int:
        """Tokens in the longest example: `$ s | answer .` for copying."""
        return self.max_length + self.answer_length(self.max_length) + 3

    @property
    def layout(self) -> Layout:
        return "copy"

    @property
    def L(self) -> int:
        """The row length: `pad_to`, or the longest example's."""
        return self.pad_to or self.longest(self.layout)

    @property
    def vocab(self) -> int:
        return self.vocab_size + 4

    bos = property(lambda self: self.vocab_size)
    sep = property(lambda self: self.vocab_size + 1)
    eos = property(lambda self: self.vocab_size + 2)
    pad = property(lambda self: self.vocab_size + 3)


@dataclass(frozen=True)
class NgramConfig(CopyConfig):
    min_length: int = 6
    """Shortest string, at least n_gram + length_answer + 3 (so that two candidate n-grams exist)."""
    n_gram: int = 3
    """Letters of the key n-gram (the authors' `--n_gram`; their CopyDataset default 3)."""

    def __post_init__(self) -> None:
        check_int("n_gram", self.n_gram, 1, MAX_LENGTH)
        super().__post_init__()

    def _check_fits(self) -> None:
        need = self.n_gram + self.length_answer + 3
        if self.min_length < need:
            raise ConfigError("min_length", f"{self.min_length} leaves fewer than two candidate {self.n_gram}-grams"
                              f"; strings need at least n_gram + length_answer + 3 = {need} letters")
        super()._check_fits()

    def candidates(self, length: int) -> int:
        """m: the n-grams starting at 0 .. m-1 are the candidates of a string of `length` letters (the authors'
        `max_limit`: the key is never the string's last n letters, and leaves room for the answer)."""
        return length - self.n_gram - self.length_answer - 1 if self.length_answer else length - self.n_gram - 1

    def longest(self, layout: Layout = "copy") -> int:
        longest, n = self.max_length, self.n_gram
        if layout == "duplicate":
            return 2 * longest + 3
        answer = self.answer_length(longest - n)
        return n + longest + answer + (4 if layout == "prefix" else 3)


def length_presets(config_class: type[CopyConfig]) -> dict[str, Any]:
    """"train": strings of 5 (or the n-gram tasks' minimum) to 20 letters, the authors' README command; "<N>": every
    string N letters long, for testing past the training lengths."""
    train = config_class(max_length=20)
    train = dataclasses.replace(train, min_length=max(5, train.min_length))
    return {"train": train, **{str(n): config_class(min_length=n, max_length=n) for n in TEST_LENGTHS}}


def parse_row(config: CopyConfig, inputs: Any, runs: int, task: str) -> tuple[list[int], list[list[int]], int]:
    """(the row as ints, its first `runs` letter runs after `$`, each closed by `|`, the position after the last `|`);
    VerificationError naming `task` when the row does not start that way."""
    x = [int(t) for t in np.asarray(inputs).reshape(-1)]
    found, start = [], 1
    for _ in range(runs):
        end = start
        while end < len(x) and x[end] < config.vocab_size:
            end += 1
        if x[0] != config.bos or end == len(x) or x[end] != config.sep:
            raise VerificationError(f"{task} sample is malformed",
                                    [f"expected $ then {runs} letter run(s) each closed by |, got ids {x[:12]}..."])
        found.append(x[start:end])
        start = end + 1
    return x, found, start


def answer_labels(config: CopyConfig, x: Sequence[int], start: int, answer: Sequence[int], task: str) -> np.ndarray:
    """The targets of a row whose answer, computed from its question, is `answer` from position `start`: the row must
    hold it there, then `.` and padding; each position before an answer token or the `.` is labelled with it."""
    tail = [*answer, config.eos]
    want = [*tail, *[config.pad] * (config.L - start - len(tail))]
    if list(x[start:]) != want:
        raise VerificationError(f"{task} sample is malformed",
                                [f"from position {start} the row holds ids {list(x[start:start + 8])}..., the "
                                 f"answer computed from its question is {list(answer[:8])}... then . and *"])
    targets = np.full(config.L, IGNORE_INDEX, np.int16)
    targets[start - 1: start + len(answer)] = tail
    return targets


def copy_spec(config: CopyConfig, input_doc: str, extra: dict[str, Field] | None = None) -> Spec:
    """The Spec of a copying task: token ids with the answer's next tokens as labels, and each string's length."""
    fields = {"length": Field("int32", (), "letters in the string (the example's length)", shuffle=True)}
    fields.update(extra or {})
    return token_spec(
        config.L, config.vocab, "uint8", "int16",
        f"ids: letters 0..{config.vocab_size - 1}, $={config.bos} |={config.sep} .={config.eos} *={config.pad}; "
        f"{input_doc}, padded with * to {config.L}",
        "at each position whose next token is an answer letter or the closing '.', that next token; -100 elsewhere",
        extra=fields)


@njit(cache=True)
def draw_letters(state, out, start, length, vocab_size):
    """out[start : start+length] = uniform letters."""
    for k in range(length):
        out[start + k] = randint(state, vocab_size)


@njit(cache=True)
def draw_length(state, low, high):
    return low + randint(state, high - low + 1)


@njit(cache=True)
def same_gram(s, a, b, n):
    for k in range(n):
        if s[a + k] != s[b + k]:
            return False
    return True


@njit(cache=True)
def has_unique_gram(s, m, n):
    """Whether one of the n-grams starting at 0 .. m-1 occurs once among them (`list_ngrams.count(ng) == 1`)."""
    for i in range(m):
        alone = True
        for j in range(m):
            if j != i and same_gram(s, i, j, n):
                alone = False
                break
        if alone:
            return True
    return False


@njit(cache=True)
def draw_keyed_string(state, s, length, m, n, vocab_size):
    """Draw s[:length] until an n-gram of the candidates occurs once among them, at most MAX_TRIES times
    (`generate_str_unique_ngram`); the last draw stays when none has one."""
    for _ in range(MAX_TRIES):
        draw_letters(state, s, 0, length, vocab_size)
        if has_unique_gram(s, m, n):
            return


@njit(cache=True)
def first_occurrence(s, idx, n):
    """The first position p <= idx where the n-gram at idx occurs (`num1.index(ngram)`)."""
    for p in range(idx + 1):
        if same_gram(s, p, idx, n):
            return p
    return idx


@njit(cache=True)
def close_row(x, y, answer_start, eos_at, eos, pad):
    """Write EOS and padding, and label every position whose next token is an answer token or the EOS."""
    x[eos_at] = eos
    x[eos_at + 1:] = pad
    y[:] = IGNORE_INDEX
    for t in range(answer_start - 1, eos_at):
        y[t] = x[t + 1]


@njit(cache=True)
def draw_keyed(state, s, low, high, n, length_answer, vocab_size):
    """(length, m): a string length, then s[:length] with a once-occurring candidate n-gram (where the draws allow),
    the first m n-grams being the candidates."""
    length = draw_length(state, low, high)
    m = length - n - length_answer - 1 if length_answer > 0 else length - n - 1
    draw_keyed_string(state, s, length, m, n, vocab_size)
    return length, m


@njit(cache=True)
def draw_lookup(state, s, low, high, n, length_answer, vocab_size):
    """(length, position of the key, answer length) of an n-gram lookup: the key is a candidate n-gram drawn uniformly
    from all but the last candidate (`np.random.randint(0, len(list_ngrams) - 1)`), found at its first occurrence."""
    length, m = draw_keyed(state, s, low, high, n, length_answer, vocab_size)
    position = first_occurrence(s, randint(state, m - 1), n)
    rest = length - position - n
    return length, position, (min(length_answer, rest) if length_answer > 0 else rest)


def lookup_answer(config: NgramConfig, string: Sequence[int], key: Sequence[int], task: str) -> tuple[int, list[int]]:
    """(position, answer): where the key n-gram first occurs in the string, and the letters after it (the first
    `length_answer` of them when set)."""
    n = config.n_gram
    found = [p for p in range(len(string) - n + 1) if list(string[p:p + n]) == list(key)]
    if len(key) != n or not found:
        raise VerificationError(f"{task} sample is malformed", [f"the key {list(key)} is not a {n}-gram of the string"])
    rest = list(string[found[0] + n:])
    return found[0], rest[:config.answer_length(len(rest))]


@njit(parallel=True, cache=True)
def _fill_lookup(keys, low, high, n, length_answer, vocab_size, key_first, inputs, targets, lengths, positions):
    """Rows `$ g | s | a .` (key_first, prefix_ngram) or `$ s | g a .` (suffix_ngram), from the same draws."""
    for i in prange(inputs.shape[0]):
        state = rng_state(keys[i])
        s = np.empty(high, np.uint8)
        length, p, answer = draw_lookup(state, s, low, high, n, length_answer, vocab_size)
        x = inputs[i]
        x[0] = vocab_size
        if key_first:
            x[1: n + 1] = s[p: p + n]
            x[n + 1] = vocab_size + 1
            x[n + 2: n + 2 + length] = s[:length]
            x[n + 2 + length] = vocab_size + 1
            start = n + 3 + length
        else:
            x[1: length + 1] = s[:length]
            x[length + 1] = vocab_size + 1
            x[length + 2: length + 2 + n] = s[p: p + n]
            start = length + 2 + n
        x[start: start + answer] = s[p + n: p + n + answer]
        close_row(x, targets[i], start, start + answer, vocab_size + 2, vocab_size + 3)
        lengths[i] = length
        positions[i] = p


def lookup_spec(config: NgramConfig, input_doc: str) -> Spec:
    """The Spec of an n-gram lookup task: `copy_spec` plus where the key first occurs in the string."""
    return copy_spec(config, input_doc, {"key_position": Field("int32", (), "position in s of the key's first "
                                                                            "occurrence", shuffle=True)})


def generate_lookup(config: NgramConfig, keys: Any, key_first: bool) -> dict[str, np.ndarray]:
    """The rows of `prefix_ngram` (key_first) or `suffix_ngram` for one uint64 key each."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
    n = keys.shape[0]
    out = {"inputs": np.empty((n, config.L), np.uint8), "targets": np.empty((n, config.L), np.int16),
           "length": np.empty(n, np.int32), "key_position": np.empty(n, np.int32)}
    if n:
        _fill_lookup(keys, config.min_length, config.max_length, config.n_gram, config.length_answer,
                     config.vocab_size, key_first, out["inputs"], out["targets"], out["length"], out["key_position"])
    return out
