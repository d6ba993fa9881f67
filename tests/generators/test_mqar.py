"""MQAR (data_cards/mqar.md): the Numba kernel against a slow pure-Python reference of the same procedure, the
query placement against the exact successive-sampling probabilities, and the oracle's checks."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from scipy import stats

import recall_oracle as ref  # tests/generators is on pytest's pythonpath
from ssmbench.errors import ConfigError, VerificationError
from ssmbench.generators.mqar import Mqar, MqarConfig, query_weights
from ssmbench.seeding import keys_for

TASK = Mqar()


def draw(config: MqarConfig, n: int, split: str = "train") -> dict[str, np.ndarray]:
    return TASK.generate(config, keys_for(TASK.name, TASK.version, config.to_dict(), 0, split, 0, n))


@pytest.mark.parametrize("config", [
    MqarConfig(L=64, num_kv_pairs=8, vocab_size=128),
    MqarConfig(L=40, num_kv_pairs=3, vocab_size=10, power_a=1.0, random_non_queries=False),
    MqarConfig(L=32, num_kv_pairs=8, vocab_size=64, power_a=0.5),  # every query offset is used
], ids=["random-filler", "uniform-zeros", "full-region"])
def test_kernel_matches_the_slow_reference_byte_for_byte(config):
    keys = keys_for(TASK.name, TASK.version, config.to_dict(), 0, "train", 0, 12)
    out = TASK.generate(config, keys)
    rows = [ref.mqar_sample(int(k), config.L, config.num_kv_pairs, config.vocab_size, config.power_a,
                            config.random_non_queries) for k in keys]
    inputs, targets = ref.as_arrays(rows, ("uint16", "int16"))
    np.testing.assert_array_equal(out["inputs"], inputs)
    np.testing.assert_array_equal(out["targets"], targets)


def query_offsets(block: dict[str, np.ndarray], k: int) -> np.ndarray:
    """(n, k): the query offset g (position 2k + 2g) of the key of pair j, read back from the samples."""
    x, y = block["inputs"].astype(np.int64), block["targets"]
    out = np.empty((x.shape[0], k), np.int64)
    for i in range(x.shape[0]):
        scored = np.flatnonzero(y[i] != -100)
        for j in range(k):
            (p,) = scored[x[i, scored] == x[i, 2 * j]]
            out[i, j] = (p - 2 * k) // 2
    return out


def test_query_offsets_follow_successive_sampling_of_the_power_law():
    """Pair j's query offset is the j-th draw without replacement ∝ (g+1)^(a-1) (NumPy's choice(p=...)):
    the empirical law of the ordered pair (g_0, g_1) matches the exact probabilities (chi-square)."""
    config = MqarConfig(L=16, num_kv_pairs=2, vocab_size=16, power_a=0.3, random_non_queries=False)
    n = 20_000
    offsets = query_offsets(draw(config, n), 2)
    weights = [float(w) for w in query_weights(config)]
    cells = list(itertools.permutations(range(len(weights)), 2))
    expected = np.array([ref.successive_sampling_probability(weights, c) for c in cells]) * n
    observed = np.array([np.sum((offsets[:, 0] == a) & (offsets[:, 1] == b)) for a, b in cells])
    assert observed.sum() == n
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # the order matters: the first pair's query is more often the earlier one, as successive sampling says
    earlier = sum(e for (a, b), e in zip(cells, expected, strict=True) if a < b) / n
    assert earlier > 0.53 and abs(np.mean(offsets[:, 0] < offsets[:, 1]) - earlier) < 0.015


def test_first_query_offset_follows_zoologys_power_law_written_out_here():
    """Pair 0's query offset is the first successive draw, so P(g) = (g+1)^(a-1) / sum: the law is written out here
    (not taken from `query_weights`, which the generator uses) and checked at Zoology's a = 0.01, where the first
    offset takes about a quarter of the draws (against 1/28 for a flat law, or for exponent a instead of a - 1)."""
    config = MqarConfig(L=64, num_kv_pairs=4, vocab_size=64, random_non_queries=False)  # 28 query offsets
    n = 3000
    first = query_offsets(draw(config, n), 4)[:, 0]
    weights = np.array([(g + 1.0) ** (0.01 - 1.0) for g in range(28)])
    expected = weights / weights.sum()
    observed = np.bincount(first, minlength=28)
    assert abs(observed[0] / n - expected[0]) < 0.03 and expected[0] > 0.24
    assert stats.chisquare(observed, expected * n).pvalue > 1e-3


def test_every_sample_binds_distinct_keys_below_half_to_distinct_values_above_it():
    """Sample by sample in plain Python: keys in [1, V/2), values in [V/2, V), none shared, and each scored query
    labelled with its key's value; over the samples every value id from V/2 to V - 1 occurs."""
    config = MqarConfig(L=64, num_kv_pairs=8, vocab_size=128)
    block = draw(config, 300)
    seen_values: set[int] = set()
    for x, y in zip(block["inputs"].tolist(), block["targets"].tolist(), strict=True):
        keys, values = x[0:16:2], x[1:16:2]
        assert len(set(keys)) == 8 and all(1 <= k < 64 for k in keys)
        assert len(set(values)) == 8 and all(64 <= v < 128 for v in values)
        bound = dict(zip(keys, values, strict=True))
        scored = [p for p, label in enumerate(y) if label != -100]
        assert sorted(x[p] for p in scored) == sorted(keys) and all(y[p] == bound[x[p]] for p in scored)
        seen_values.update(values)
    assert seen_values == set(range(64, 128))


def test_keys_values_and_filler_are_uniform_over_their_ranges():
    config = MqarConfig(L=64, num_kv_pairs=4, vocab_size=32)
    block = draw(config, 4000)
    x, y = block["inputs"].astype(np.int64), block["targets"]
    keys, values = x[:, 0:8:2], x[:, 1:8:2]
    assert all(len(set(r)) == 4 for r in keys.tolist()) and all(len(set(r)) == 4 for r in values.tolist())
    assert stats.chisquare(np.bincount(keys.ravel(), minlength=16)[1:]).pvalue > 1e-3  # ids 1..15
    assert stats.chisquare(np.bincount(values.ravel(), minlength=32)[16:]).pvalue > 1e-3  # ids 16..31
    region = x[:, 8:]
    filler = region[y[:, 8:] == -100]
    assert stats.chisquare(np.bincount(filler, minlength=32)).pvalue > 1e-3  # ids 0..31, keys included
    assert ((y != -100).sum(axis=1) == 4).all()


def test_zero_filler_and_a_uniform_placement_when_power_a_is_one():
    config = MqarConfig(L=24, num_kv_pairs=2, vocab_size=16, power_a=1.0, random_non_queries=False)
    block = draw(config, 6000)
    region, scored = block["inputs"][:, 4:], block["targets"][:, 4:] != -100
    assert (region[~scored] == 0).all() and (region[scored] > 0).all()
    first = query_offsets(block, 2)[:, 0]
    assert stats.chisquare(np.bincount(first, minlength=10)).pvalue > 1e-3


def test_oracle_recomputes_values_and_refuses_a_broken_layout():
    config = MqarConfig(L=64, num_kv_pairs=8, vocab_size=128)
    block = draw(config, 3)
    row = {k: v[0].copy() for k, v in block.items()}
    np.testing.assert_array_equal(TASK.oracle(config, row)["targets"], row["targets"])
    wrong = dict(row, targets=row["targets"].copy())
    p = int(np.flatnonzero(wrong["targets"] != -100)[0])
    wrong["targets"][p] = (int(wrong["targets"][p]) - 64 + 1) % 64 + 64  # another value id
    assert not np.array_equal(TASK.oracle(config, wrong)["targets"], wrong["targets"])
    moved = dict(row, targets=row["targets"].copy())
    moved["targets"][p + 1], moved["targets"][p] = moved["targets"][p], -100  # an odd offset
    with pytest.raises(VerificationError):
        TASK.oracle(config, moved)
    repeated = dict(row, inputs=row["inputs"].copy())
    repeated["inputs"][2] = repeated["inputs"][0]  # two pairs with one key
    with pytest.raises(VerificationError):
        TASK.oracle(config, repeated)


def test_presets_are_zoology_figure2_and_bad_configs_name_their_field():
    assert {k: (c.L, c.num_kv_pairs, c.vocab_size) for k, c in TASK.presets.items()} == {
        "64": (64, 4, 8192), "128": (128, 8, 8192), "256": (256, 16, 8192), "512": (512, 64, 8192)}
    base = MqarConfig()
    for changes, field in [({"L": 2**21}, "L"), ({"power_a": float("nan")}, "power_a"),
                           ({"vocab_size": 40000}, "vocab_size"), ({"random_non_queries": 1}, "random_non_queries")]:
        with pytest.raises(ConfigError) as err:
            dataclasses.replace(base, **changes)
        assert err.value.field == field
