"""MAD fuzzy in-context recall: keys and values are runs of 1..k_motif_size key ids and 1..v_motif_size value ids;
whenever a key run comes back, say its value run (Poli et al. 2024, athms/mad-lab
`generate_fuzzy_in_context_recall_instance`; data_cards/mad_fuzzy_recall.md).

Worked example (vocab 16, multi-query: keys 0-6, values 7-14, pad 15; the sequence is left-padded to seq_len + 1,
then the last token is cut and the labels shifted left by one)::

    built     15 15  2  5  9  6 11 12  2  5  9
    inputs    15 15  2  5  9  6 11 12  2  5
    targets    -  -  -  -  -  -  -  -  -  9     (the value run of the repeated key (2, 5))

>>> import numpy as np
>>> task, cfg = MadFuzzyRecall(), MadFuzzyRecallConfig(seq_len=10, k_motif_size=2, v_motif_size=2)
>>> task.oracle(cfg, {"inputs": np.array([15, 15, 2, 5, 9, 6, 11, 12, 2, 5])})["targets"].tolist()[-1]
9
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, final

import numpy as np
from numba import njit, prange

from ssmbench.api import TaskConfig
from ssmbench.errors import ConfigError

from ._mad import (
    IGNORE,
    MAX_SEQ_LEN,
    MadTask,
    check_bool,
    check_int,
    check_vocab,
    draw_distinct,
    mad_policy,
    sweep_presets,
    token_spec,
)
from ._rng import randint_s


@dataclass(frozen=True)
class MadFuzzyRecallConfig(TaskConfig):
    seq_len: int = 128
    """Stored length (MAD left-pads its sequence to seq_len + 1 and cuts the last token)."""
    vocab_size: int = 16
    """Ids: keys, then values, then the pad id (and the copy prefix without multi_query)."""
    k_motif_size: int = 3
    """Longest key run; a key is 1..k_motif_size distinct key ids (always k_motif_size with variable_key_size off)."""
    v_motif_size: int = 3
    """Longest value run; a value is 1..v_motif_size distinct value ids."""
    multi_query: bool = True
    """Score every value run whose key run was shown before (MAD's benchmark); false: one query after a prefix."""
    variable_key_size: bool = True
    """Key runs of every length 1..k_motif_size: MAD's training split; false: only full-length keys, MAD's test
    split (generators never see the split here, so the choice is a config key)."""

    def __post_init__(self) -> None:
        check_bool("multi_query", self.multi_query)
        check_bool("variable_key_size", self.variable_key_size)
        check_int("k_motif_size", self.k_motif_size, 1)
        check_int("v_motif_size", self.v_motif_size, 1)
        check_int("seq_len", self.seq_len, 4, MAX_SEQ_LEN)
        least = 2 * (self.k_motif_size + self.v_motif_size) + 1
        if self.seq_len <= least:
            raise ConfigError("seq_len", f"seq_len={self.seq_len} leaves no room for the pairs: need seq_len > "
                              f"{least} (twice the longest key and value runs, plus one)")
        need = 2 * max(self.k_motif_size, self.v_motif_size)
        check_vocab(self.vocab_size, 1 if self.multi_query else 2, 0, need,
                    f"runs of {self.k_motif_size} distinct keys and {self.v_motif_size} distinct values")


def _vocab(config: MadFuzzyRecallConfig) -> tuple[int, int, int, int]:
    """(key ids, value ids, pad id, copy prefix id) as MAD splits the vocabulary."""
    ordinary = config.vocab_size - (1 if config.multi_query else 2)
    return ordinary // 2, ordinary - ordinary // 2, ordinary, config.vocab_size - 1


@njit(cache=True)
def _size(s, largest, variable):
    if not variable:
        return largest, s
    k, s = randint_s(s, largest)
    return k + 1, s


@njit(cache=True)
def _find(kt, kl, m, key, size):
    for e in range(m):
        if kl[e] == size:
            same = True
            for j in range(size):
                if kt[e, j] != key[j]:
                    same = False
                    break
            if same:
                return e
    return -1


@njit(cache=True)
def _fuzzy_row(s, seq_len, K, V, n_keys, n_values, variable, multi_query, pad, prefix, inputs, targets):
    cap = seq_len + 2
    built = np.empty(cap, np.int64)
    label = np.empty(cap, np.int64)
    kt = np.empty((cap, K), np.int64)  # entry 0 is the probe; kt[e, :kl[e]] is a key run, vt[e, :vl[e]] its value
    kl = np.empty(cap, np.int64)
    vt = np.empty((cap, V), np.int64)
    vl = np.empty(cap, np.int64)
    shown = np.zeros(cap, np.bool_)
    kl[0], s = _size(s, K, variable)
    vl[0], s = _size(s, V, True)
    s = draw_distinct(s, n_keys, kl[0], kt[0])
    s = draw_distinct(s, n_values, vl[0], vt[0])
    vt[0, :vl[0]] += n_keys
    m = 1
    probe_at, s = randint_s(s, seq_len - 2 * (kl[0] + vl[0]))
    probe_added = False
    key = np.empty(K, np.int64)
    n = 0
    while n < seq_len - kl[0] - vl[0] - (K + V):
        ks, s = _size(s, K, variable)
        vs, s = _size(s, V, True)
        if n >= probe_at and not probe_added:
            e = 0
            probe_added = True
        else:
            s = draw_distinct(s, n_keys, ks, key)
            e = _find(kt, kl, m, key, ks)
            if e == 0:
                probe_added = True
            elif e < 0:
                e = m
                m += 1
                kt[e, :ks] = key[:ks]
                kl[e] = ks
                vl[e] = vs
                s = draw_distinct(s, n_values, vs, vt[e])
                vt[e, :vs] += n_keys
        scored = shown[e] and multi_query  # the probe is never shown before it is inserted
        for j in range(kl[e]):
            built[n] = kt[e, j]
            label[n] = IGNORE
            n += 1
        for j in range(vl[e]):
            built[n] = vt[e, j]
            label[n] = vt[e, j] if scored else IGNORE
            n += 1
        shown[e] = True
    if not multi_query:
        built[n] = prefix
        label[n] = IGNORE
        n += 1
    for j in range(kl[0]):
        built[n] = kt[0, j]
        label[n] = IGNORE
        n += 1
    for j in range(vl[0]):
        built[n] = vt[0, j]
        label[n] = vt[0, j] if shown[0] else IGNORE  # MAD scores it even when the probe never made it in
        n += 1
    lead = seq_len + 1 - n
    for p in range(seq_len):
        inputs[p] = pad if p < lead else built[p - lead]
        q = p + 1
        targets[p] = IGNORE if q < lead else label[q - lead]


@njit(parallel=True, cache=True)
def _fill_fuzzy(keys, seq_len, K, V, n_keys, n_values, variable, multi_query, pad, prefix, inputs, targets):
    for r in prange(keys.shape[0]):
        _fuzzy_row(keys[r], seq_len, K, V, n_keys, n_values, variable, multi_query, pad, prefix, inputs[r],
                   targets[r])


def fuzzy_oracle(config: MadFuzzyRecallConfig, inputs: np.ndarray) -> np.ndarray:
    """Labels from the tokens alone: after the pad run, pairs of a key run (ids < n_keys) and a value run; a value
    run is labelled when its key run was shown before; the cut last value id is completed from that earlier run."""
    n_keys, _, pad, prefix = _vocab(config)
    x = [int(t) for t in np.asarray(inputs)]
    built_label = [IGNORE] * (len(x) + 1)
    value_of: dict[tuple[int, ...], tuple[int, ...]] = {}
    p = 0
    while p < len(x) and x[p] == pad:
        p += 1
    while p < len(x):
        if x[p] == prefix and not config.multi_query:
            p += 1
            continue
        start = p
        while p < len(x) and x[p] < n_keys:
            p += 1
        key = tuple(x[start:p])
        start = p
        while p < len(x) and n_keys <= x[p] < pad:
            p += 1
        value = tuple(x[start:p])
        final = p == len(x)
        if key in value_of:
            if final:
                value = value_of[key]
            if config.multi_query or final:
                built_label[start:start + len(value)] = value
        value_of[key] = value
    return np.array(built_label[1:], np.int16)


@final
class MadFuzzyRecall(MadTask[MadFuzzyRecallConfig]):
    """MAD fuzzy in-context recall: recall the value run of every key run seen before, runs of variable length"""

    name: ClassVar[str] = "mad_fuzzy_recall"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = MadFuzzyRecallConfig
    presets: ClassVar[dict[str, MadFuzzyRecallConfig]] = sweep_presets(
        MadFuzzyRecallConfig, {"vocab_size": 16, "seq_len": 128, "multi_query": True, "k_motif_size": 3,
                               "v_motif_size": 3},
        {"vocab_size": [32, 64, 128], "seq_len": [256, 512, 1024]})
    policy = mad_policy(1, scoring_keys=("variable_key_size",))  # scored on full-length keys: MAD's test split

    def spec(self, config: MadFuzzyRecallConfig):
        n_keys, n_values, pad, prefix = _vocab(config)
        roles = {"keys": [0, n_keys - 1], "values": [n_keys, n_keys + n_values - 1], "pad": pad}
        if not config.multi_query:
            roles["copy_prefix"] = prefix
        return token_spec(config.seq_len, config.vocab_size,
                          "pad run, then key runs each followed by a value run, then the query key run",
                          "next token inside every value run whose key run appeared before", roles)

    def _fill(self, config: MadFuzzyRecallConfig, keys: np.ndarray, out: dict[str, np.ndarray]) -> None:
        n_keys, n_values, pad, prefix = _vocab(config)
        _fill_fuzzy(keys, config.seq_len, config.k_motif_size, config.v_motif_size, n_keys, n_values,
                    config.variable_key_size, config.multi_query, pad, prefix, out["inputs"], out["targets"])

    def oracle(self, config: MadFuzzyRecallConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"targets": fuzzy_oracle(config, sample["inputs"])}
