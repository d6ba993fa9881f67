"""Flip-flop language modelling (data_cards/flipflop.md): the Numba kernel against a slow pure-Python reference of the
same procedure, the law of the instructions against FFL(T, p)'s definition, and the solving oracle."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

import copying_oracle as ref  # tests/generators is on pytest's pythonpath
from ssmbench.errors import ConfigError, VerificationError
from ssmbench.generators.flipflop import FlipFlop, FlipFlopConfig, render
from ssmbench.seeding import keys_for

TASK = FlipFlop()


def draw(config: FlipFlopConfig, n: int, split: str = "train") -> dict[str, np.ndarray]:
    return TASK.generate(config, keys_for(TASK.name, TASK.version, config.to_dict(), 0, split, 0, n))


@pytest.mark.parametrize("config", [FlipFlopConfig(L=64), FlipFlopConfig(L=512, p_ignore=0.98),
                                    FlipFlopConfig(L=40, p_ignore=0.1), FlipFlopConfig(L=4, p_ignore=0.0),
                                    FlipFlopConfig(L=30, p_ignore=1.0)], ids=["0.8", "sparse", "dense", "4", "1.0"])
def test_kernel_matches_the_slow_reference_byte_for_byte(config):
    keys = keys_for(TASK.name, TASK.version, config.to_dict(), 0, "train", 0, 12)
    out = TASK.generate(config, keys)
    inputs = np.array([ref.flipflop_sample(int(k), config.L, config.p_ignore) for k in keys], np.uint8)
    np.testing.assert_array_equal(out["inputs"], inputs)
    for x, y in zip(out["inputs"], out["targets"], strict=True):  # labels: the bit after each r, nothing else
        reads = x == 1
        reads[1::2] = False
        np.testing.assert_array_equal(y[reads], x[1:][reads[:-1]])
        assert (y[~reads] == -100).all()


def test_instructions_follow_ffl_with_the_first_a_write_and_the_last_a_read():
    """(i) first w, last r; (ii) the others i.i.d. with p_i and (1 - p_i)/2 each for w and r (chi-square);
    (iii) the bits of w and i fair coins, the bits of r the last written bit."""
    config = FlipFlopConfig(L=128, p_ignore=0.6)
    x = draw(config, 4000)["inputs"]
    ops, bits = x[:, 0::2], x[:, 1::2]
    assert (ops[:, 0] == 0).all() and (ops[:, -1] == 1).all()
    middle = np.bincount(ops[:, 1:-1].ravel(), minlength=3)
    assert stats.chisquare(middle, middle.sum() * np.array([0.2, 0.2, 0.6])).pvalue > 1e-3
    free = bits[ops != 1]
    assert stats.binomtest(int((free == 4).sum()), free.size).pvalue > 1e-3
    row = render(x[0])
    register = None
    for op, bit in zip(row[0::2], row[1::2], strict=True):
        register = bit if op == "w" else register
        assert op != "r" or bit == register


@pytest.mark.parametrize("p_ignore,per_sequence", [(0.8, 26508 / 1000), (0.98, 353875 / 100_000),
                                                    (0.1, 345781 / 3000)])
def test_reads_per_sequence_match_the_papers_test_sets(p_ignore, per_sequence):
    """The paper's appendix B counts the reads of its held-out sets (26,508 in 10^3 FFL(0.8) sequences, 353,875 in
    10^5 FFL(0.98), 345,781 in 3,000 FFL(0.1)); ssmbench's mean is within 4 standard errors of each."""
    x = draw(FlipFlopConfig(p_ignore=p_ignore), 3000)["inputs"]
    reads = (x[:, 0::2] == 1).sum(axis=1)
    assert abs(reads.mean() - per_sequence) < 4 * reads.std() / np.sqrt(len(reads)) + 0.02


def test_oracle_solves_every_sample_and_refuses_broken_grammar():
    config = FlipFlopConfig(L=64, p_ignore=0.5)
    block = draw(config, 300)
    for x, y in zip(block["inputs"], block["targets"], strict=True):
        np.testing.assert_array_equal(TASK.oracle(config, {"inputs": x})["targets"], y)
    x = block["inputs"][0].copy()
    read = int(np.flatnonzero(x[0::2] == 1)[0]) * 2
    x[read + 1] = 7 - x[read + 1]  # the other bit after a read
    with pytest.raises(VerificationError) as err:
        TASK.oracle(config, {"inputs": x})
    assert "the register holds" in err.value.problems[0]
    y = block["inputs"][0].copy()
    y[0] = 2  # starts with an ignore
    with pytest.raises(VerificationError) as err:
        TASK.oracle(config, {"inputs": y})
    assert "first instruction is i" in err.value.problems[0]


def test_presets_are_the_papers_distributions_and_bad_configs_name_their_field():
    assert {k: (c.L, c.p_ignore) for k, c in TASK.presets.items()} == {
        "0.8": (512, 0.8), "0.98": (512, 0.98), "0.1": (512, 0.1)}
    for changes, field in [({"L": 63}, "L"), ({"L": 2}, "L"), ({"p_ignore": 1.5}, "p_ignore"),
                           ({"p_ignore": float("nan")}, "p_ignore"), ({"p_ignore": True}, "p_ignore")]:
        with pytest.raises(ConfigError) as err:
            dataclasses.replace(FlipFlopConfig(), **changes)
        assert err.value.field == field
