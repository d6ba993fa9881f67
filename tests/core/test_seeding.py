"""Key derivation (splitmix64-v1) and the Numba counter-based generator."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ssmbench.generators._rng import (
    fill_normal,
    next_s,
    next_u64,
    normal,
    normal_s,
    randint,
    randint_s,
    rng_state,
    uniform,
    uniform_s,
)
from ssmbench.seeding import fixed_key, keys_for, sample_keys, splitmix64, splitmix64_array, stream_id


def test_splitmix64_reference_values():
    # SplitMix64 from state 0: the first outputs of the reference generator (Vigna's splitmix64.c)
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    assert splitmix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4
    arr = splitmix64_array(np.array([0, 0x9E3779B97F4A7C15], dtype=np.uint64))
    assert arr.tolist() == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]


def test_keys_follow_the_documented_recipe():
    stream = stream_id("shift", "1", {"L": 8})
    base = splitmix64(splitmix64(splitmix64(5) ^ stream) ^ 2)
    assert int(sample_keys(stream, "val", 3, 4, root_seed=5)[0]) == splitmix64(base ^ 3)


def test_prefix_property_and_config_sensitivity():
    a = keys_for("shift", "1", {"L": 8}, 0, "train", 0, 100)
    b = keys_for("shift", "1", {"L": 8}, 0, "train", 40, 60)
    assert np.array_equal(a[40:60], b)
    assert not np.array_equal(a, keys_for("shift", "1", {"L": 9}, 0, "train", 0, 100))
    assert not np.array_equal(a, keys_for("shift", "2", {"L": 8}, 0, "train", 0, 100))


def test_fixed_key_ignores_root_seed_and_split_but_not_fixed_seed():
    k0 = fixed_key("solve_fixed", "1", {"L": 64, "fixed_seed": 0})
    assert k0 == fixed_key("solve_fixed", "1", {"L": 64, "fixed_seed": 0})
    assert k0 != fixed_key("solve_fixed", "1", {"L": 64, "fixed_seed": 1})


def test_normals_are_standard_normal():
    out = np.empty(200_000)
    fill_normal(rng_state(12345), out)
    assert stats.kstest(out, "norm").pvalue > 1e-3
    assert abs(stats.kurtosis(out)) < 0.05
    tail = np.mean(np.abs(out) > 3.6541528853610088)  # beyond the ziggurat's base layer edge
    assert abs(tail / (2 * stats.norm.sf(3.6541528853610088)) - 1) < 0.3


def test_uniform_and_randint_are_uniform():
    state = rng_state(7)
    u = np.array([uniform(state) for _ in range(50_000)])
    assert stats.kstest(u, "uniform").pvalue > 1e-3 and u.min() >= 0 and u.max() < 1
    counts = np.bincount([randint(state, 7) for _ in range(70_000)], minlength=7)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_scalar_and_array_apis_give_the_same_stream():
    # From Python the state comes back as a plain int: re-wrap it as uint64 (inside Numba it stays uint64).
    state, s = rng_state(99), np.uint64(99)
    for _ in range(50):
        a = next_u64(state)
        b, s = next_s(np.uint64(s))
        assert a == b
    for _ in range(2000):  # long enough to hit the ziggurat's wedges and tail
        x = normal(state)
        y, s = normal_s(np.uint64(s))
        assert x == y
    x, s = uniform_s(np.uint64(s))
    assert x == uniform(state)
    r, s = randint_s(np.uint64(s), 1000)
    assert r == randint(state, 1000)
