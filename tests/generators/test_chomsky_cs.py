"""The Chomsky-hierarchy CS tasks built so far (duplicate_string, missing_duplicate_string, odds_first, bucket_sort,
binary_addition, binary_multiplication, compute_sqrt):
the Numba kernels against slow pure-Python references byte for byte, the answers against their definitions, the
token and label laws, the oracles and their refusals, the configs and the `chomsky` group."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

import chomsky_oracle as ref  # tests/generators is on pytest's pythonpath
from ssmbench.errors import ConfigError, VerificationError
from ssmbench.generators.binary_addition import BinaryAddition
from ssmbench.generators.binary_multiplication import BinaryMultiplication
from ssmbench.generators.bucket_sort import BucketSort, BucketSortConfig
from ssmbench.generators.compute_sqrt import ComputeSqrt, ComputeSqrtConfig
from ssmbench.generators.duplicate_string import DuplicateString, DuplicateStringConfig
from ssmbench.generators.missing_duplicate_string import MissingDuplicateString, MissingDuplicateStringConfig
from ssmbench.generators.odds_first import OddsFirst, OddsFirstConfig
from ssmbench.harness.config.task_groups import task_groups
from ssmbench.seeding import keys_for

CS = {"duplicate_string": DuplicateString(), "missing_duplicate_string": MissingDuplicateString(),
      "odds_first": OddsFirst(), "bucket_sort": BucketSort(), "binary_addition": BinaryAddition(),
      "binary_multiplication": BinaryMultiplication(), "compute_sqrt": ComputeSqrt()}


def draw(task, config, n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    ks = keys_for(task.name, task.version, config.to_dict(), 0, "train", 0, n)
    return ks, task.generate(config, ks)


def reference(name: str, key: int, config) -> tuple[list[int], list[int]]:
    if name == "duplicate_string":
        return ref.duplicate_sample(key, config.L)
    if name == "odds_first":
        return ref.odds_first_sample(key, config.L)
    if name == "bucket_sort":
        return ref.bucket_sort_sample(key, config.L, config.vocab_size)
    if name == "binary_addition":
        return ref.binary_addition_sample(key, config.L)
    if name == "binary_multiplication":
        return ref.binary_multiplication_sample(key, config.L)
    if name == "compute_sqrt":
        return ref.compute_sqrt_sample(key, config.L)
    return ref.missing_duplicate_sample(key, config.L)


CASES = [(name, cls.Config(L=L)) for name, cls in CS.items() for L in (1, 2, 3, 4, 8, 13, 40, 301)] + [
    ("bucket_sort", BucketSortConfig(L=50, vocab_size=11))]


@pytest.mark.parametrize("name,config", CASES, ids=lambda v: v if isinstance(v, str) else
                         "-".join(f"{k}={x}" for k, x in v.to_dict().items()))
def test_kernel_matches_the_slow_reference_byte_for_byte(name, config):
    task = CS[name]
    ks, out = draw(task, config, 12)
    rows = [reference(name, int(k), config) for k in ks]
    np.testing.assert_array_equal(out["inputs"], np.array([r[0] for r in rows], out["inputs"].dtype))
    np.testing.assert_array_equal(out["targets"], np.array([r[1] for r in rows], out["targets"].dtype))


def test_answers_against_their_definitions_and_uniform_symbols():
    L = 21
    for name, expected in [("duplicate_string", lambda x: np.concatenate([x, x], axis=1)),
                           ("odds_first", lambda x: np.concatenate([x[:, 1::2], x[:, ::2]], axis=1)),
                           ("bucket_sort", lambda x: np.sort(x, axis=1))]:
        task = CS[name]
        _, block = draw(task, task.Config(L=L), 1000)
        x, y = block["inputs"].astype(int), block["targets"].astype(int)
        assert (y[:, :L] == -100).all() and (x[:, L:] == task.spec(task.Config(L=L)).d_input - 1).all()
        np.testing.assert_array_equal(y[:, L:], expected(x[:, :L]))
        symbols = 5 if name == "bucket_sort" else 2
        assert stats.chisquare(np.bincount(x[:, :L].ravel(), minlength=symbols)).pvalue > 1e-3


def test_the_missing_bit_is_uniform_in_place_and_value():
    _, block = draw(MissingDuplicateString(), MissingDuplicateStringConfig(L=13), 6000)
    x, y = block["inputs"].astype(int), block["targets"].astype(int)
    assert (x[:, 12:] == [3, 4]).all() and ((x[:, :12] == 2).sum(axis=1) == 1).all()
    where = (x == 2).argmax(axis=1)
    assert stats.chisquare(np.bincount(where, minlength=12)).pvalue > 1e-3
    assert stats.chisquare(np.bincount(y[:, -1], minlength=2)).pvalue > 1e-3
    other = x[np.arange(6000), (where + 6) % 12]
    assert (other == y[:, -1]).all()  # the other copy holds the label


@pytest.mark.parametrize("name", CS)
def test_oracle_solves_from_the_inputs_and_refuses_a_broken_layout(name):
    task = CS[name]
    config = task.presets[task.default_preset]
    _, block = draw(task, config, 50)
    for i in range(50):
        row = {k: v[i] for k, v in block.items()}
        np.testing.assert_array_equal(task.oracle(config, row)["targets"], row["targets"])
    row = {k: v[0].copy() for k, v in block.items()}
    row["inputs"][-1] = 0  # the (last) query token is gone
    with pytest.raises(VerificationError):
        task.oracle(config, row)


def test_binary_widths_are_uniform_and_numbers_are_never_zero():
    """The first number's width is uniform in 1..L-2 and each number uniform over its nonzero values: at L = 6 the
    width and the value of n (width 2: 1, 2, 3 equally likely) against their laws; the answers against Python."""
    L, n = 6, 6000
    for task in (BinaryAddition(), BinaryMultiplication()):
        _, block = draw(task, task.Config(L=L), n)
        x, y = block["inputs"].astype(int), block["targets"].astype(int)
        width = (x[:, :L] == 2).argmax(axis=1)
        assert ((x[:, :L] == 2).sum(axis=1) == 1).all()
        assert stats.chisquare(np.bincount(width, minlength=L - 1)[1:]).pvalue > 1e-3
        two = x[width == 2]
        values = two[:, 0] + 2 * two[:, 1]
        assert values.min() >= 1 and stats.chisquare(np.bincount(values, minlength=4)[1:]).pvalue > 1e-3
        for row, answer in zip(x[:300].tolist(), y[:300, L:].tolist(), strict=True):
            cut = row.index(2)
            a = int("".join(map(str, row[:cut][::-1])), 2)
            b = int("".join(map(str, row[cut + 1:L][::-1])), 2)
            want = a + b if task.name == "binary_addition" else a * b
            end = answer.index(2)
            assert int("".join(map(str, answer[:end][::-1])), 2) == want and answer[end - 1] == 1
            assert all(t == -100 for t in answer[end + 1:])


def test_square_roots_of_every_number_and_the_number_law():
    """Every number of 1..2^9-1 through the kernel's root (the paper's example 100101 -> 110 among them), and the
    numbers uniform over 1..2^4-1 at L = 4."""
    from ssmbench.generators.compute_sqrt import _isqrt_bits

    for L in (6, 9):
        for number in range(1, 2**L):
            x = np.array([int(c) for c in f"{number:0{L}b}"], np.uint8)
            out = np.zeros((L + 1) // 2, np.int8)
            _isqrt_bits(x, L, (L + 1) // 2, out)
            assert int("".join(map(str, out)), 2) == math.isqrt(number), (L, number)
    _, block = draw(ComputeSqrt(), ComputeSqrtConfig(L=4), 6000)
    values = block["inputs"][:, :4].astype(int) @ np.array([8, 4, 2, 1])
    assert values.min() >= 1 and stats.chisquare(np.bincount(values, minlength=16)[1:]).pvalue > 1e-3


def test_missing_duplicate_oracle_refuses_unequal_copies():
    config = MissingDuplicateStringConfig(L=6)
    with pytest.raises(VerificationError):
        MissingDuplicateString().oracle(config, {"inputs": np.array([0, 1, 2, 1, 1, 0, 4]),
                                                 "targets": np.array([-100] * 6 + [1])})


def test_generation_works_at_every_length_of_the_train_short_test_long_range():
    for L in list(range(1, 45)) + [100, 257, 500]:
        for task in CS.values():
            config = dataclasses.replace(task.presets[task.default_preset], L=L)
            _, block = draw(task, config, 2)
            assert block["inputs"].shape == (2, task.spec(config).seq_len)
            row = {"inputs": block["inputs"][1], "targets": block["targets"][1]}
            np.testing.assert_array_equal(task.oracle(config, row)["targets"], row["targets"])


def test_groups_and_bad_configs():
    assert task_groups()["chomsky"][8:15] == list(CS)
    for cls, changes, field in [(DuplicateStringConfig, {"L": 0}, "L"), (OddsFirstConfig, {"L": 2**17}, "L"),
                                (BucketSortConfig, {"vocab_size": 1}, "vocab_size")]:
        with pytest.raises(ConfigError) as err:
            cls(**changes)
        assert err.value.field == field
