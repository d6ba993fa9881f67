"""Induction heads (data_cards/induction_heads.md): the Numba kernel against a slow pure-Python reference, the
distributions of the special position and the tokens, and the oracle's checks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import recall_oracle as ref  # tests/generators is on pytest's pythonpath
from ssmbench.errors import ConfigError, VerificationError
from ssmbench.generators.induction_heads import InductionHeads, InductionHeadsConfig
from ssmbench.seeding import keys_for

TASK = InductionHeads()


def draw(config: InductionHeadsConfig, n: int) -> dict[str, np.ndarray]:
    return TASK.generate(config, keys_for(TASK.name, TASK.version, config.to_dict(), 0, "train", 0, n))


@pytest.mark.parametrize("config", [InductionHeadsConfig(L=64), InductionHeadsConfig(L=4, vocab_size=3),
                                    InductionHeadsConfig(L=300, vocab_size=200),
                                    InductionHeadsConfig(L=64, layout="h3"), InductionHeadsConfig(L=4, layout="h3")])
def test_kernel_matches_the_slow_reference_byte_for_byte(config):
    keys = keys_for(TASK.name, TASK.version, config.to_dict(), 0, "val", 0, 10)
    out = TASK.generate(config, keys)
    rows = [ref.induction_sample(int(k), config.L, config.vocab_size, config.layout) for k in keys]
    inputs, targets, special = ref.as_arrays(rows, ("uint8", "int16", "int32"))
    np.testing.assert_array_equal(out["inputs"], inputs)
    np.testing.assert_array_equal(out["targets"], targets)
    np.testing.assert_array_equal(out["special_position"], special)


@pytest.mark.parametrize("config,low,last_s", [(InductionHeadsConfig(L=64), 0, 61),
                                               (InductionHeadsConfig(L=5, vocab_size=4), 0, 2),
                                               (InductionHeadsConfig(L=64, layout="h3"), 1, 60)])
def test_every_sample_labels_the_token_after_the_first_special_token(config, low, last_s):
    """The task's meaning, checked sample by sample in plain Python (no shared stream or helper): the special id
    occurs exactly at s and at L - 1, and the one label, at L - 1, is the token that followed s; ordinary ids start
    at `low` and s reaches `last_s` (L - 3; H3's generator: L - 4, and id 0 never occurs)."""
    block = draw(config, 400)
    special = config.vocab_size - 1
    assert block["special_position"].max() == last_s and block["inputs"].min() == low
    for x, y, s in zip(block["inputs"].tolist(), block["targets"].tolist(), block["special_position"].tolist(),
                       strict=True):
        assert [p for p, t in enumerate(x) if t == special] == [s, config.L - 1]
        assert y[:-1] == [-100] * (config.L - 1)
        assert y[-1] == x[s + 1] != special


def test_special_position_answer_and_tokens_are_uniform():
    config = InductionHeadsConfig(L=32)
    block = draw(config, 6000)
    s = block["special_position"].astype(np.int64)
    assert stats.chisquare(np.bincount(s, minlength=30)).pvalue > 1e-3 and s.max() <= 29  # [0, L-3]
    answers = block["targets"][:, -1]
    assert stats.chisquare(np.bincount(answers, minlength=15)).pvalue > 1e-3 and answers.max() <= 14
    assert ((block["targets"][:, :-1] == -100).all())
    x = block["inputs"]
    assert ((x == 15).sum(axis=1) == 2).all() and (x[:, -1] == 15).all()
    ordinary = x[x != 15].astype(np.int64)
    assert stats.chisquare(np.bincount(ordinary, minlength=15)).pvalue > 1e-3


def test_oracle_finds_the_answer_and_refuses_a_third_special_token():
    config = InductionHeadsConfig(L=64)
    block = draw(config, 2)
    row = {k: v[0].copy() for k, v in block.items()}
    got = TASK.oracle(config, row)
    np.testing.assert_array_equal(got["targets"], row["targets"])
    assert int(got["special_position"]) == int(row["special_position"])
    s = int(row["special_position"])
    swapped = dict(row, inputs=row["inputs"].copy())
    swapped["inputs"][s + 1] = (int(swapped["inputs"][s + 1]) + 1) % 15
    assert TASK.oracle(config, swapped)["targets"][-1] != row["targets"][-1]
    extra = dict(row, inputs=row["inputs"].copy())
    extra["inputs"][(s + 5) % 60] = 15
    with pytest.raises(VerificationError):
        TASK.oracle(config, extra)


def test_h3_layout_is_a_dataset_of_its_own_and_a_bad_layout_names_its_key():
    assert "layout" not in InductionHeadsConfig().to_dict()  # the default keeps its identity and bytes
    assert InductionHeadsConfig(layout="h3").to_dict()["layout"] == "h3"
    with pytest.raises(ConfigError) as err:
        InductionHeadsConfig(layout="H3")
    assert err.value.field == "layout"
    config = InductionHeadsConfig(L=16, layout="h3")
    row = {k: v[0] for k, v in draw(config, 1).items()}
    zero = dict(row, inputs=np.where(row["inputs"] == 15, 15, 0).astype(np.uint8))  # id 0 is H3's unused no-op
    with pytest.raises(VerificationError):
        TASK.oracle(config, zero)


def test_presets_cover_the_paper_lengths():
    assert sorted(int(k) for k in TASK.presets) == [2**e for e in range(6, 21)]
    assert TASK.default_preset == "256" and TASK.presets["256"].vocab_size == 16
