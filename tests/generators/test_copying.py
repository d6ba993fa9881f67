"""The copying tasks of Jelassi et al. (data_cards/string_copy.md, prefix_ngram.md, suffix_ngram.md,
duplicate_ngram.md): the Numba kernels against slow references written with the authors' own string operations,
the laws of lengths, letters and keys, the solving oracles, and the configs' checks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

import copying_oracle as ref  # tests/generators is on pytest's pythonpath
from ssmbench.errors import ConfigError, VerificationError
from ssmbench.registry import get_task
from ssmbench.seeding import keys_for

TASKS = ("string_copy", "prefix_ngram", "suffix_ngram", "duplicate_ngram")
NGRAM = TASKS[1:]


def config_of(task: str, **fields):
    return get_task(task).Config(**fields)


def draw(task: str, config, n: int) -> dict[str, np.ndarray]:
    t = get_task(task)
    return t.generate(config, keys_for(t.name, t.version, config.to_dict(), 0, "train", 0, n))


CASES = [
    ("string_copy", {}), ("string_copy", {"length_answer": 4, "pad_to": 60}),
    ("string_copy", {"min_length": 50, "max_length": 50, "vocab_size": 200}),
    ("prefix_ngram", {}), ("prefix_ngram", {"n_gram": 2, "length_answer": 3, "vocab_size": 3, "min_length": 8}),
    ("suffix_ngram", {}), ("suffix_ngram", {"n_gram": 1, "vocab_size": 2, "min_length": 4, "max_length": 30}),
    ("duplicate_ngram", {}), ("duplicate_ngram", {"n_gram": 1, "vocab_size": 3, "pad_to": 80}),
    ("duplicate_ngram", {"n_gram": 2, "vocab_size": 2, "max_length": 30}),  # self-overlapping n-grams
]


@pytest.mark.parametrize("task,fields", CASES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(CASES)])
def test_kernel_matches_the_slow_reference_byte_for_byte(task, fields):
    """Tiny alphabets force repeated n-grams, failed draws (all 10 tries) and overlapping replacements."""
    config = config_of(task, **fields)
    t = get_task(task)
    keys = keys_for(t.name, t.version, config.to_dict(), 0, "train", 0, 60)
    out = t.generate(config, keys)
    rows = [ref.copying_sample(task, int(k), config.vocab_size, config.min_length, config.max_length, config.L,
                               getattr(config, "n_gram", 0), config.length_answer) for k in keys]
    np.testing.assert_array_equal(out["inputs"], np.array([r[0] for r in rows], np.uint8))
    np.testing.assert_array_equal(out["targets"], np.array([r[1] for r in rows], np.int16))
    np.testing.assert_array_equal(out["length"], [r[2] for r in rows])
    if "key_position" in out:
        np.testing.assert_array_equal(out["key_position"], [r[3] for r in rows])


@pytest.mark.parametrize("task", TASKS)
def test_lengths_and_letters_are_uniform(task):
    config = config_of(task, min_length=6, max_length=15, vocab_size=8)
    block = draw(task, config, 4000)
    assert stats.chisquare(np.bincount(block["length"], minlength=16)[6:]).pvalue > 1e-3
    x = block["inputs"]
    string_start = 1 + (config.n_gram + 1 if task == "prefix_ngram" else 0)
    first = x[:, string_start: string_start + 6].ravel()  # the first 6 letters of every string
    assert stats.chisquare(np.bincount(first, minlength=8)).pvalue > 1e-3


@pytest.mark.parametrize("task", ["prefix_ngram", "suffix_ngram"])
def test_the_key_is_uniform_over_all_candidates_but_the_last(task):
    """At one length with 252 letters (repeated 3-grams are negligible) the key's first occurrence is uniform over
    0 .. m-2 and never the last candidate m-1 (`randint(0, len(list_ngrams) - 1)`)."""
    config = config_of(task, min_length=14, max_length=14, vocab_size=252)
    positions = draw(task, config, 4000)["key_position"]
    m = 14 - 3 - 1
    assert positions.max() == m - 2 and positions.min() == 0
    assert stats.chisquare(np.bincount(positions, minlength=m - 1)).pvalue > 1e-3


def test_duplicate_strings_repeat_an_ngram_far_more_often_than_copied_ones():
    """At 40 letters 9 in 10 duplicate_ngram strings repeat a 3-gram (the rest: the two drawn candidates overlapped,
    and the replacement wrote over part of the new n-gram, as `str.replace` does), against 4 in 100 copied strings."""

    def repeats(task: str) -> float:
        x = draw(task, config_of(task, min_length=40, max_length=40), 2000)["inputs"]
        grams = [[tuple(row[1 + i: 4 + i]) for i in range(38)] for row in x.tolist()]
        return float(np.mean([len(set(g)) < len(g) for g in grams]))

    assert repeats("duplicate_ngram") > 0.85 and repeats("string_copy") < 0.06


@pytest.mark.parametrize("task,fields", CASES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(CASES)])
def test_oracle_solves_every_sample_from_its_question(task, fields):
    config = config_of(task, **fields)
    t = get_task(task)
    block = draw(task, config, 200)
    for i in range(200):
        solved = t.oracle(config, {"inputs": block["inputs"][i]})
        for name, want in solved.items():
            np.testing.assert_array_equal(want, block[name][i], err_msg=name)


@pytest.mark.parametrize("task", TASKS)
def test_oracle_refuses_a_wrong_answer_or_a_broken_frame(task):
    config = config_of(task)
    t = get_task(task)
    row = draw(task, config, 1)["inputs"][0]
    last = int(np.flatnonzero(row == config.eos)[0]) - 1  # the answer's last letter
    wrong = row.copy()
    wrong[last] = (wrong[last] + 1) % config.vocab_size
    with pytest.raises(VerificationError):
        t.oracle(config, {"inputs": wrong})
    no_bos = row.copy()
    no_bos[0] = 0
    with pytest.raises(VerificationError):
        t.oracle(config, {"inputs": no_bos})


@pytest.mark.parametrize("task", TASKS)
def test_rows_are_as_long_as_the_longest_example_or_pad_to(task):
    config = config_of(task, min_length=20, max_length=20)
    block = draw(task, config, 50)
    longest = int(((block["inputs"] != config.pad).sum(axis=1)).max())
    assert config.L == longest  # at one length (and no length_answer) every example has the same length
    assert get_task(task).spec(dataclasses.replace(config, pad_to=300)).seq_len == 300


def test_presets_and_bad_configs_name_their_field():
    assert {k: (c.min_length, c.max_length) for k, c in get_task("string_copy").presets.items()} == {
        "train": (5, 20), "20": (20, 20), "40": (40, 40), "80": (80, 80), "160": (160, 160), "320": (320, 320)}
    for task in NGRAM:
        assert (get_task(task).presets["train"].min_length, get_task(task).presets["train"].max_length) == (6, 20)
    for task, changes, field in [
        ("string_copy", {"min_length": 21}, "min_length"), ("string_copy", {"vocab_size": 253}, "vocab_size"),
        ("string_copy", {"pad_to": 42}, "pad_to"), ("prefix_ngram", {"min_length": 5}, "min_length"),
        ("suffix_ngram", {"length_answer": 2, "min_length": 7}, "min_length"),
        ("prefix_ngram", {"pad_to": 43}, "pad_to"), ("duplicate_ngram", {"length_answer": 1}, "length_answer"),
        ("string_copy", {"max_length": 2**20}, "max_length"),
    ]:
        with pytest.raises(ConfigError) as err:
            dataclasses.replace(get_task(task).presets["train"], **changes)
        assert err.value.field == field, (task, changes)
