"""MQAR: recall the value bound to each queried key, Zoology's multi-query associative recall (data_cards/mqar.md).

A sample is `num_kv_pairs` key-value pairs (keys distinct ids in [1, V/2), values distinct ids in [V/2, V)), then a
query region where each key appears once more, at an even offset drawn from a power law that favours the start of
the region (Zoology's `multiquery_ar`, `power_a` = 0.01); the label at a query is the value its key was bound to.
The other query-region positions are random ids (`random_non_queries`, Zoology's default) or 0.

Worked example (L = 16, V = 12, 2 pairs, zero filler; Zoology's docstring example)::

    position   0  1  2  3 | 4  5  6  7  8  9 10 11 12 13 14 15
    inputs     2  8  4  7 | 0  0  4  0  0  0  0  0  2  0  0  0
    targets    -  -  -  - | -  -  7  -  -  -  -  -  8  -  -  -      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = Mqar(), MqarConfig(L=16, vocab_size=12, num_kv_pairs=2, random_non_queries=False)
>>> row = task.generate(cfg, keys_for("mqar", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0], row["targets"][0]
>>> keys, values = x[0:4:2].tolist(), x[1:4:2].tolist()
>>> all(1 <= k < 6 for k in keys) and all(6 <= v < 12 for v in values)
True
>>> queried = [int(p) for p in (y != -100).nonzero()[0]]
>>> sorted(x[queried].tolist()) == sorted(keys) and all((p - 4) % 2 == 0 for p in queried)
True
>>> all(int(y[p]) == values[keys.index(int(x[p]))] for p in queried)
True
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._rng import randint, rng_state, uniform  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TaskConfig, TrainingPolicy  # noqa: E402
from ssmbench.errors import ConfigError, VerificationError  # noqa: E402

from ._recall import IGNORE_INDEX, MAX_LENGTH, check_bool, check_int, check_positive_float, token_spec  # noqa: E402

MAX_VOCAB = 32768
"""Ids are stored as uint16 and labels as int16 (with -100), so the vocabulary is at most 2^15."""
FIGURE2 = {64: 4, 128: 8, 256: 16, 512: 64}
"""Zoology's Figure 2 (sequence length -> number of key-value pairs; iclr24_zoology_figure2/configs.py)."""


@dataclass(frozen=True)
class MqarConfig(TaskConfig):
    L: int = 64
    """Sequence length (Zoology's `input_seq_len`); even, at least 4 * num_kv_pairs."""
    num_kv_pairs: int = 8
    """Key-value pairs in the context, each queried once."""
    vocab_size: int = 8192
    """Token ids 0 .. vocab_size-1: keys from [1, V/2), values from [V/2, V), filler from [0, V)."""
    power_a: float = 0.01
    """Query offsets g (in pairs of positions) are drawn without replacement with P(g) ∝ (g+1)^(power_a - 1); 1.0 is
    uniform."""
    random_non_queries: bool = True
    """Fill the query region's other positions with uniform random ids (Zoology's default); false: with 0."""

    def __post_init__(self) -> None:
        check_int("L", self.L, 4, MAX_LENGTH)
        check_int("num_kv_pairs", self.num_kv_pairs, 1)
        check_int("vocab_size", self.vocab_size, 4, MAX_VOCAB)
        check_positive_float("power_a", self.power_a)
        check_bool("random_non_queries", self.random_non_queries)
        if self.L % 2:
            raise ConfigError("L", f"must be even (queries sit at even offsets), got {self.L}")
        if 4 * self.num_kv_pairs > self.L:
            raise ConfigError("num_kv_pairs", f"{self.num_kv_pairs} pairs need L >= {4 * self.num_kv_pairs} "
                              f"(context 2 per pair, query region 2 per pair), got L = {self.L}")
        if self.vocab_size // 2 - 1 < self.num_kv_pairs:
            raise ConfigError("vocab_size", f"{self.vocab_size} leaves {self.vocab_size // 2 - 1} key ids in "
                              f"[1, V/2) for {self.num_kv_pairs} distinct keys", "raise vocab_size")


def query_weights(config: MqarConfig) -> np.ndarray:
    """Unnormalised power-law weights (g + 1)^(power_a - 1) of the query offsets g = 0 .. space-1 (float64)."""
    space = (config.L - 2 * config.num_kv_pairs) // 2
    return np.arange(1, space + 1, dtype=np.float64) ** (float(config.power_a) - 1.0)


@njit(cache=True)
def _ordered_sample(state, low, high, k, pool, out):
    """out[:k] = k distinct ids from [low, high) in uniformly random order (a partial Fisher-Yates shuffle)."""
    n = high - low
    for i in range(n):
        pool[i] = low + i
    for j in range(k):
        t = j + randint(state, n - j)
        pool[j], pool[t] = pool[t], pool[j]
        out[j] = pool[j]


@njit(cache=True)
def _weighted_order(state, weights, k, clocks, out):
    """out[:k] = k distinct offsets drawn one after another with probability ∝ weights among those left.

    Exponential clocks E_g / w_g (E_g ~ Exp(1)) ring in exactly that order (successive sampling, as NumPy's
    `choice(replace=False, p=...)` draws), so the k first to ring are the draws, in order.
    """
    for g in range(weights.shape[0]):
        clocks[g] = -np.log(1.0 - uniform(state)) / weights[g]
    order = np.argsort(clocks)
    out[:k] = order[:k]


@njit(parallel=True, cache=True)
def _fill_mqar(keys, k, vocab_size, weights, random_filler, inputs, targets):
    n, L = inputs.shape
    half = vocab_size // 2
    context = 2 * k
    for i in prange(n):
        state = rng_state(keys[i])
        pool = np.empty(max(half, vocab_size - half), np.int64)
        key_ids = np.empty(k, np.int64)
        value_ids = np.empty(k, np.int64)
        gaps = np.empty(k, np.int64)
        clocks = np.empty(weights.shape[0], np.float64)
        _ordered_sample(state, 1, half, k, pool, key_ids)
        _ordered_sample(state, half, vocab_size, k, pool, value_ids)
        _weighted_order(state, weights, k, clocks, gaps)
        x, y = inputs[i], targets[i]
        x[context:] = 0
        y[:] = IGNORE_INDEX
        for j in range(k):
            x[2 * j] = key_ids[j]
            x[2 * j + 1] = value_ids[j]
            x[context + 2 * gaps[j]] = key_ids[j]
            y[context + 2 * gaps[j]] = value_ids[j]
        if random_filler:
            for p in range(context, L):
                if x[p] == 0:
                    x[p] = randint(state, vocab_size)


@typing.final
class Mqar(Task[MqarConfig]):
    """Recall the value bound to each queried key: Zoology's multi-query associative recall (MQAR)

    Input (L,) token ids: num_kv_pairs key-value pairs, then a query region where each key reappears once at a
    power-law distributed even offset; target (L,): the key's value at its query position, -100 elsewhere.
    """

    name: ClassVar[str] = "mqar"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = MqarConfig
    presets: ClassVar[dict[str, MqarConfig]] = {
        str(L): MqarConfig(L=L, num_kv_pairs=k, random_non_queries=False) for L, k in FIGURE2.items()}
    default_preset: ClassVar[str] = "256"
    default_n: ClassVar[int] = 100_000
    default_split: ClassVar[Mapping[str, float]] = {"train": 0.94, "val": 0.03, "test": 0.03}
    preset_option: ClassVar[typing.Literal["length", "size", "preset"]] = "preset"
    hf_task_category: ClassVar[str] = "token-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"zoology": 0}, paper_family=lambda c: f"mqar{c.L}")
    """A fresh stream every step; the quick section "mqar"; Zoology's Figure 2 rows per sequence length
    (`zoology_paper/mqar<L>/<model>`)."""

    def spec(self, config: MqarConfig) -> Spec:
        filler = "uniform random ids" if config.random_non_queries else "0"
        return token_spec(
            config.L, config.vocab_size, "uint16", "int16",
            f"token ids: key, value for each of the {config.num_kv_pairs} pairs, then the query region (each key "
            f"once, at an even offset; other positions {filler})",
            "at each query position the value bound to its key; -100 elsewhere")

    def generate(self, config: MqarConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        out = {"inputs": np.empty((keys.shape[0], config.L), np.uint16),
               "targets": np.empty((keys.shape[0], config.L), np.int16)}
        if keys.shape[0]:
            _fill_mqar(keys, config.num_kv_pairs, config.vocab_size, query_weights(config),
                       config.random_non_queries, out["inputs"], out["targets"])
        return out

    def oracle(self, config: MqarConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The targets from the context's pairs, at the positions the stored targets score (a random filler id can
        repeat a key, so the inputs alone do not say which occurrence is the query); the layout is checked."""
        x = [int(t) for t in np.asarray(sample["inputs"]).reshape(-1)]
        scored = [int(p) for p in np.flatnonzero(np.asarray(sample["targets"]).reshape(-1) != IGNORE_INDEX)]
        k, half, context = config.num_kv_pairs, config.vocab_size // 2, 2 * config.num_kv_pairs
        keys, values = x[0:context:2], x[1:context:2]
        problems = []
        if len(set(keys)) != k or not all(1 <= t < half for t in keys):
            problems.append(f"context keys {keys} are not {k} distinct ids in [1, {half})")
        if len(set(values)) != k or not all(half <= t < config.vocab_size for t in values):
            problems.append(f"context values {values} are not {k} distinct ids in [{half}, {config.vocab_size})")
        if len(scored) != k or any(p < context or (p - context) % 2 for p in scored):
            problems.append(f"scored positions {scored} are not {k} even offsets of the query region")
        if sorted(x[p] for p in scored) != sorted(keys):
            problems.append("the scored positions do not hold each key exactly once")
        if not config.random_non_queries and any(x[p] for p in range(context, config.L) if p not in scored):
            problems.append("a non-query position of the query region is not 0")
        if problems:
            raise VerificationError("mqar sample is malformed", problems)
        targets = np.full(config.L, IGNORE_INDEX, np.int16)
        for p in scored:
            targets[p] = values[keys.index(x[p])]
        return {"targets": targets}
