"""What the MAD tasks share (Poli et al. 2024, athms/mad-lab `mad/data/instances.py`): `MadTask`, their base, the
token Spec, config checks, the presets built from MAD's task YAMLs, and the Numba draws they all use.

Every MAD task stores `inputs` (S,) int16 vocabulary ids and `targets` (S,) int16: the token the model must emit
at each position, or -100 where nothing is scored. The objective is cross-entropy and token accuracy over the
scored positions. A sample is drawn from its own key (`generators._rng`), never from NumPy's global state.

>>> @dataclass(frozen=True)
... class Demo(TaskConfig):
...     seq_len: int = 128
...     vocab_size: int = 16
>>> sorted(sweep_presets(Demo, {"seq_len": 8}, {"vocab_size": [32, 64]}).items())[-1]
('vocab_size_64', Demo(seq_len=8, vocab_size=64))
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
from numba import njit, prange

from ssmbench.api import Field, Spec, Task, TaskConfig, TrainingPolicy
from ssmbench.errors import ConfigError

from ._rng import next_s, randint_s

C = TypeVar("C", bound=TaskConfig)

IGNORE = -100
"""Label of unscored positions (MAD's `target_ignore_idx`)."""
MAX_VOCAB = 32767
"""int16 ids; MAD's largest published vocabulary is 8192 (memorization)."""
MAX_SEQ_LEN = 2**20


def check_int(field: str, value: Any, minimum: int, maximum: int | None = None) -> None:
    """Raise ConfigError naming `field` unless `value` is an int in [minimum, maximum]."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum or (
            maximum is not None and value > maximum):
        upper = f" and <= {maximum}" if maximum is not None else ""
        raise ConfigError(field, f"must be an integer >= {minimum}{upper}, got {value!r}")


def check_fraction(field: str, value: Any) -> None:
    """MAD's noise fractions: 0 <= value < 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ConfigError(field, f"must be a number with 0 <= {field} < 1, got {value!r}")


def check_bool(field: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(field, f"must be true or false, got {value!r}")


def check_vocab(vocab_size: int, special: int, noise: int, need: int, what: str) -> None:
    """The vocabulary must leave at least `need` ordinary tokens after `special` markers and `noise` tokens."""
    check_int("vocab_size", vocab_size, 1, MAX_VOCAB)
    if vocab_size - special - noise < need:
        raise ConfigError("vocab_size", f"vocab_size={vocab_size} leaves {vocab_size - special - noise} ordinary "
                          f"tokens after {special} special and {noise} noise tokens; {what} need at least {need}")


def sweep_presets(config_cls: type, baseline: Mapping[str, Any], changes: Mapping[str, Sequence[Any]]
                  ) -> dict[str, Any]:
    """MAD's task YAML as presets: "mad" is the baseline, "<key>_<value>" one change to it (`num_train_examples`,
    MAD's data-size axis, is a build size here, not a config key)."""
    out = {"mad": config_cls(**baseline)}
    for key, values in changes.items():
        for value in values:
            out[f"{key}_{value}"] = config_cls(**{**baseline, key: value})
    return out


def token_spec(seq_len: int, vocab_size: int, input_doc: str, target_doc: str,
               vocab_roles: Mapping[str, Any]) -> Spec:
    """The Spec of a MAD task: int16 tokens in, one int16 label (or -100) per position out, causal, scored by token
    accuracy; `vocab_roles` (which ids are keys, values, noise, markers) goes into the inputs' HDF5 attributes."""
    fields = {
        "inputs": Field("int16", (seq_len,), input_doc, codec="gzip:4", shuffle=True, attrs=dict(vocab_roles)),
        "targets": Field("int16", (seq_len,), target_doc + f"; {IGNORE} where not scored", codec="gzip:4",
                         shuffle=True, attrs={"ignore_index": IGNORE}),
    }
    return Spec(fields=fields, input_kind="tokens", d_input=vocab_size, seq_len=seq_len, target_kind="classify",
                d_output=vocab_size, l_output=seq_len, ignore_index=IGNORE, causal=True, input_scale=None,
                metrics=("token_accuracy",))


def mad_policy(position: int, *, model_keys: Mapping[str, Any] | None = None,
               scoring_keys: tuple[str, ...] = ()) -> TrainingPolicy:
    """The MAD tasks' training policy: a fresh stream every step, one `quick` section and one `--preset paper`
    family ("mad_paper/mad/<model>") for the six tasks, `position` in the group "mad", and the model keys the task
    needs (compression: MAD's autoencoder readout, {"model.pool": "bottleneck"}) and the config keys a checkpoint
    may be scored at (fuzzy recall: `variable_key_size`, off for MAD's own full-length test keys).

    >>> mad_policy(3).groups == {"mad": 3}, mad_policy(3).quick_section("mad_compression")
    (True, 'mad')
    """
    return TrainingPolicy(preset_family="mad", groups={"mad": position}, model_keys=model_keys or {},
                          scoring_keys=scoring_keys)


class MadTask(Task[C]):
    """The base of the MAD tasks: their shared identity attributes and `generate`.

    A task file declares `name`, `version`, `Config`, `presets`, `policy` (`mad_policy(position)`), `spec`,
    `oracle` and `_fill`, which runs
    its kernel into the preallocated `inputs` and `targets`. Presets are MAD's YAML rows (`sweep_presets`),
    selected with `--preset`; the default build is MAD's 12,800 training samples (80 % of 16,000).
    """

    default_preset: ClassVar[str] = "mad"
    default_n: ClassVar[int] = 16_000
    preset_option: ClassVar[Literal["length", "size", "preset"]] = "preset"
    hf_task_category: ClassVar[str] = "token-classification"

    def generate(self, config: C, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        spec = self.spec(config)
        out = {name: np.empty((keys.shape[0], *f.shape), dtype=f.dtype) for name, f in spec.fields.items()}
        if keys.shape[0]:
            self._fill(config, keys, out)
        return out

    @abc.abstractmethod
    def _fill(self, config: C, keys: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """Write row i of `out["inputs"]` and `out["targets"]` from `keys[i]`."""


# ---------------------------------------------------------------------------------------------- Numba draws

@njit(cache=True)
def draw_distinct(s, n, size, out):
    """Fill out[:size] with `size` distinct ids from range(n) in random order (a uniform ordered size-subset, what
    MAD's `rng.choice(permutations(vocab, size))` draws); returns the new state. Rejection: size <= n is small."""
    for j in range(size):
        while True:
            t, s = randint_s(s, n)
            fresh = True
            for i in range(j):
                if out[i] == t:
                    fresh = False
                    break
            if fresh:
                out[j] = t
                break
    return s


@njit(cache=True)
def coin(s, p):
    """(uniform < p, new state), the draw behind `rng.random() < frac_noise`."""
    bits, s = next_s(s)
    return float(bits >> np.uint64(11)) * (1.0 / 9007199254740992.0) < p, s


# ------------------------------------------------------- in-context recall and noisy recall (one generator)

@dataclass(frozen=True)
class RecallVocab:
    """MAD's split of the vocabulary for (noisy) in-context recall: keys, then values, then noise ids; with one
    query (`multi_query=False`) the last id is the copy prefix and is left out of the split."""

    n_keys: int
    n_values: int
    n_noise: int
    copy_prefix: int

    @classmethod
    def of(cls, vocab_size: int, noise_vocab_size: int, multi_query: bool) -> RecallVocab:
        ordinary = vocab_size - (0 if multi_query else 1) - noise_vocab_size
        return cls(ordinary // 2, ordinary - ordinary // 2, noise_vocab_size, vocab_size - 1)

    def roles(self, multi_query: bool) -> dict[str, Any]:
        """Id ranges (inclusive) for the inputs' HDF5 attributes; noise and the copy prefix only where used."""
        keys, values = self.n_keys, self.n_keys + self.n_values
        out: dict[str, Any] = {"keys": [0, keys - 1], "values": [keys, values - 1]}
        if self.n_noise:
            out["noise"] = [values, values + self.n_noise - 1]
        if not multi_query:
            out["copy_prefix"] = self.copy_prefix
        return out


def check_recall(seq_len: int, vocab_size: int, multi_query: bool, noise_vocab_size: int, frac_noise: float) -> None:
    """Config checks of (noisy) in-context recall, each error naming the key to change."""
    check_bool("multi_query", multi_query)
    check_int("noise_vocab_size", noise_vocab_size, 0, MAX_VOCAB)
    check_fraction("frac_noise", frac_noise)
    check_int("seq_len", seq_len, 4, MAX_SEQ_LEN)
    if seq_len % 2:
        raise ConfigError("seq_len", f"must be even (MAD's key-value pairs), got {seq_len}")
    if frac_noise > 0 and noise_vocab_size == 0:
        raise ConfigError("noise_vocab_size", "must be > 0 when frac_noise > 0 (noise is drawn from these ids)")
    check_vocab(vocab_size, 0 if multi_query else 1, noise_vocab_size, 2, "one key and one value")


def recall_stored_length(seq_len: int, multi_query: bool) -> int:
    """MAD builds seq_len tokens (multi-query) or seq_len + 1 (a copy prefix) and drops the last one."""
    return seq_len - 1 if multi_query else seq_len


def recall_spec(seq_len: int, vocab_size: int, multi_query: bool, noise_vocab_size: int) -> Spec:
    vocab = RecallVocab.of(vocab_size, noise_vocab_size, multi_query)
    where = "each key seen before" if multi_query else "the query key"
    return token_spec(recall_stored_length(seq_len, multi_query), vocab_size,
                      "key, value pairs (or noise pairs), then the query key; id ranges in this field's attributes",
                      f"at {where}: the value that follows it", vocab.roles(multi_query))


@njit(cache=True)
def _put(inputs, targets, p, token, label):
    """Built position p of MAD's sequence: the token goes to inputs[p], its label to targets[p - 1] (MAD returns
    inputs[:-1] and targets[1:])."""
    if p < inputs.shape[0]:
        inputs[p] = token
    if p >= 1:
        targets[p - 1] = label


@njit(cache=True)
def _recall_row(s, seq_len, n_keys, n_values, n_noise, frac_noise, multi_query, copy_prefix, inputs, targets):
    n_pairs = seq_len // 2
    value_of = np.full(n_keys, -1, np.int64)
    order = np.empty(n_keys, np.int64)  # distinct keys in the order they were first shown
    shown = 0
    not_noise = 0
    if frac_noise > 0.0:  # one pair that is never noise, so the query has a key to ask for
        not_noise, s = randint_s(s, n_pairs - 1)
    p = 0
    for i in range(n_pairs - 1):
        noise = False
        if frac_noise > 0.0 and i != not_noise:
            noise, s = coin(s, frac_noise)
        if noise:
            for _ in range(2):
                t, s = randint_s(s, n_noise)
                _put(inputs, targets, p, n_keys + n_values + t, IGNORE)
                p += 1
            continue
        k, s = randint_s(s, n_keys)
        seen = value_of[k] >= 0
        if not seen:
            v, s = randint_s(s, n_values)
            value_of[k] = n_keys + v
            order[shown] = k
            shown += 1
        _put(inputs, targets, p, k, IGNORE)
        _put(inputs, targets, p + 1, value_of[k], value_of[k] if seen and multi_query else IGNORE)
        p += 2
    j, s = randint_s(s, shown)
    k = order[j]
    if not multi_query:
        _put(inputs, targets, p, copy_prefix, IGNORE)
        p += 1
    _put(inputs, targets, p, k, IGNORE)
    _put(inputs, targets, p + 1, value_of[k], value_of[k])


@njit(parallel=True, cache=True)
def fill_recall(keys, seq_len, n_keys, n_values, n_noise, frac_noise, multi_query, copy_prefix, inputs, targets):
    """MAD's `generate_in_context_recall_instance` (test-split labels) for every key, one row each."""
    for r in prange(keys.shape[0]):
        _recall_row(keys[r], seq_len, n_keys, n_values, n_noise, frac_noise, multi_query, copy_prefix, inputs[r],
                    targets[r])


def recall_oracle(inputs: np.ndarray, vocab: RecallVocab, multi_query: bool) -> np.ndarray:
    """The labels of a (noisy) recall sample from its tokens alone: pairs at even positions; a pair whose first id
    is a key is a key-value pair, else noise; the last position holds the query key, labelled with its value."""
    x = np.asarray(inputs, np.int64)
    out = np.full(x.shape[0], IGNORE, np.int16)
    value_of: dict[int, int] = {}
    last = x.shape[0] - 1
    pairs_end = last - (0 if multi_query else 1)
    for p in range(0, pairs_end, 2):
        k, v = int(x[p]), int(x[p + 1])
        if k < vocab.n_keys:
            if multi_query and k in value_of:
                out[p] = value_of[k]
            value_of[k] = v
    out[last] = value_of[int(x[last])]
    return out
