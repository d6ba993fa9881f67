"""The MAD tasks (generators/mad_*.py): what MAD's generators promise, checked on our samples without mad-lab (the
distribution comparison with mad-lab itself is benchmarks/fidelity/mad_lab.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from ssmbench.errors import ConfigError
from ssmbench.harness.config.task_groups import task_groups
from ssmbench.registry import get_task
from support import draw

MAD = ["mad_in_context_recall", "mad_fuzzy_recall", "mad_noisy_recall", "mad_selective_copying", "mad_compression",
       "mad_memorization"]


def preset(name: str, **changes):
    return dataclasses.replace(get_task(name).presets["mad"], **changes)


def test_the_mad_group_holds_the_six_tasks_in_the_paper_order():
    assert task_groups()["mad"] == MAD


@pytest.mark.parametrize("name,expected", [
    ("mad_in_context_recall", {"vocab_size": 16, "seq_len": 128, "multi_query": True}),
    ("mad_fuzzy_recall", {"vocab_size": 16, "seq_len": 128, "multi_query": True, "k_motif_size": 3,
                          "v_motif_size": 3}),
    ("mad_noisy_recall", {"vocab_size": 32, "noise_vocab_size": 16, "seq_len": 128, "multi_query": True,
                          "frac_noise": 0.2}),
    ("mad_selective_copying", {"vocab_size": 16, "seq_len": 256, "num_tokens_to_copy": 16}),
    ("mad_compression", {"vocab_size": 16, "seq_len": 32}),
    ("mad_memorization", {"vocab_size": 256, "seq_len": 32}),
])
def test_the_mad_preset_is_the_baseline_of_mads_task_yaml(name, expected):
    got = get_task(name).presets["mad"].to_dict()
    assert {k: got[k] for k in expected} == expected


def test_sweep_presets_change_one_key_of_the_baseline():
    presets = get_task("mad_noisy_recall").presets
    assert presets["frac_noise_0.8"] == preset("mad_noisy_recall", frac_noise=0.8)
    assert {"vocab_size_48", "vocab_size_144", "seq_len_1024"} <= set(presets)


@pytest.mark.parametrize("name", ["mad_in_context_recall", "mad_noisy_recall"])
@pytest.mark.parametrize("multi_query", [True, False])
def test_recall_labels_are_the_value_each_key_was_paired_with(name, multi_query):
    config = preset(name, multi_query=multi_query)
    block = draw(name, config, stop=200)
    ordinary = config.vocab_size - config.to_dict().get("noise_vocab_size", 0) - (0 if multi_query else 1)
    n_keys = ordinary // 2
    for x, y in zip(block["inputs"], block["targets"], strict=True):
        pairs = {}
        last = len(x) - 1
        for p in range(0, last - (0 if multi_query else 1), 2):
            if x[p] < n_keys:
                assert n_keys <= x[p + 1] < ordinary
                assert pairs.setdefault(int(x[p]), int(x[p + 1])) == x[p + 1]  # one value per key per sequence
                if y[p] != -100:
                    assert multi_query and y[p] == x[p + 1]
            else:
                assert y[p] == -100 and x[p] >= ordinary  # noise pairs are never scored
        assert y[last] == pairs[int(x[last])]  # the query asks for a key that was shown
        assert (y[1:last:2] == -100).all()  # labels sit at keys, predicting the value that follows


def test_recall_scores_a_key_only_after_its_first_sight():
    block = draw("mad_in_context_recall", preset("mad_in_context_recall"), stop=50)
    for x, y in zip(block["inputs"], block["targets"], strict=True):
        seen: set[int] = set()
        for p in range(0, len(x) - 1, 2):
            assert (y[p] != -100) == (int(x[p]) in seen)
            seen.add(int(x[p]))


def test_noisy_recall_replaces_about_frac_noise_of_the_pairs_by_noise():
    config = preset("mad_noisy_recall", frac_noise=0.6)
    x = draw("mad_noisy_recall", config, stop=400)["inputs"]
    noise_pairs = (x[:, 0:-1:2] >= 16).mean()  # 63 pairs before the query, one of them never noise
    assert noise_pairs == pytest.approx(0.6 * 62 / 63, abs=0.01)
    assert ((x[:, 0:-1:2] >= 16) == (x[:, 1::2] >= 16)).all()


def test_fuzzy_recall_key_runs_are_full_length_with_variable_key_size_off():
    def run_lengths(x, n_keys):
        body = x[x != 15]
        is_key = body < n_keys
        starts = np.flatnonzero(is_key & ~np.r_[False, is_key[:-1]])
        ends = np.flatnonzero(is_key & ~np.r_[is_key[1:], False])
        return ends - starts + 1

    fixed = draw("mad_fuzzy_recall", preset("mad_fuzzy_recall", variable_key_size=False), stop=100)["inputs"]
    variable = draw("mad_fuzzy_recall", preset("mad_fuzzy_recall"), stop=100)["inputs"]
    assert {int(n) for x in fixed for n in run_lengths(x, 7)} == {3}
    assert {int(n) for x in variable for n in run_lengths(x, 7)} == {1, 2, 3}


def test_fuzzy_recall_labels_repeat_the_value_run_of_an_earlier_equal_key_run():
    block = draw("mad_fuzzy_recall", preset("mad_fuzzy_recall"), stop=100)
    scored_last = 0
    for x, y in zip(block["inputs"], block["targets"], strict=True):
        assert x[0] == 15 and (y[x == 15] == -100).all()  # left pad, never scored
        keep = y != -100
        assert ((y[keep] >= 7) & (y[keep] < 15)).all()  # only value ids are asked for
        assert (y[:-1][keep[:-1]] == x[1:][keep[:-1]]).all()  # each label is the next input
        scored_last += keep[-1]
    assert scored_last >= 90  # the query is unanswerable (unscored) only when MAD never placed the probe pair


def test_selective_copying_never_puts_a_blank_just_before_the_marker():
    config = preset("mad_selective_copying")
    block = draw("mad_selective_copying", config, stop=200)
    marker = 256 - 16 - 1
    x, y = block["inputs"], block["targets"]
    assert (x[:, marker] == 15).all() and (x[:, marker - 1] != 14).all()  # MAD's np.insert at randint(0, n)
    assert (x[:, :marker] == 14).sum(axis=1).tolist() == [256 - 33] * 200
    for row, labels in zip(x, y, strict=True):
        assert labels[-16:].tolist() == row[:marker][row[:marker] != 14].tolist()
    assert (y[:, : marker + 1] == -100).all()


def test_memorization_uses_one_fixed_injective_map_whatever_the_seed_or_split():
    config = preset("mad_memorization")
    task = get_task("mad_memorization")
    table = task.fixed_arrays(config)["values"]
    assert len(table) == 127 and len(set(table.tolist())) == 127 and ((table >= 127) & (table < 255)).all()
    for split, seed in (("train", 0), ("test", 0), ("train", 7)):
        block = draw("mad_memorization", config, split=split, seed=seed, stop=50)
        assert (block["targets"][:, 1::2] == table[block["inputs"][:, 0::2]]).all()
        assert (block["inputs"][:, 1::2] == 255).all()
    other = task.fixed_arrays(dataclasses.replace(config, fixed_seed=1))["values"]
    assert not np.array_equal(table, other)


def test_compression_ends_with_the_marker_and_scores_every_position():
    block = draw("mad_compression", preset("mad_compression"), stop=100)
    assert (block["inputs"][:, -1] == 15).all() and (block["inputs"][:, :-1] < 15).all()
    assert np.array_equal(block["inputs"], block["targets"])
    assert np.bincount(block["inputs"][:, :-1].ravel(), minlength=15).min() > 100  # uniform over 15 ids


@pytest.mark.parametrize("name,changes,field", [
    ("mad_in_context_recall", {"seq_len": 9}, "seq_len"),
    ("mad_noisy_recall", {"noise_vocab_size": 0}, "noise_vocab_size"),
    ("mad_noisy_recall", {"vocab_size": 17}, "vocab_size"),
    ("mad_fuzzy_recall", {"seq_len": 12}, "seq_len"),
    ("mad_fuzzy_recall", {"vocab_size": 6}, "vocab_size"),
    ("mad_selective_copying", {"num_tokens_to_copy": 128}, "seq_len"),
    ("mad_memorization", {"seq_len": 31}, "seq_len"),
])
def test_impossible_configs_name_the_key_to_change(name, changes, field):
    with pytest.raises(ConfigError) as err:
        preset(name, **changes)
    assert err.value.field == field


@pytest.mark.parametrize("name", MAD)
def test_spec_declares_token_classification_with_the_whole_vocabulary(name):
    task = get_task(name)
    config = task.presets["mad"]
    spec = task.spec(config)
    assert (spec.input_kind, spec.target_kind, spec.ignore_index) == ("tokens", "classify", -100)
    assert spec.d_input == spec.d_output == config.vocab_size
    x = draw(name, config, stop=20)["inputs"]
    assert x.min() >= 0 and x.max() < config.vocab_size


def test_a_built_memorization_folder_carries_the_map_its_card_and_passes_deep_verification(tmp_path):
    from ssmbench.data.hub.verify import verify_dataset
    from ssmbench.data.make.generate import generate_dataset
    from support import tiny_config

    config = tiny_config("mad_memorization")
    folder = generate_dataset("mad_memorization", config, out=tmp_path, n=12, samples_per_shard=4, quiet=True).path
    assert np.array_equal(np.load(folder / "fixed.npy"), get_task("mad_memorization").fixed_arrays(config)["values"])
    card = (folder / "README.md").read_text()
    assert "### Known discrepancies with the paper and the reference" in card and "mad-lab" in card
    report = verify_dataset(folder, deep=True)
    assert report.ok, report.problems


@pytest.mark.parametrize("name", MAD)
def test_quick_and_paper_presets_have_a_row_for_every_mad_task(name):
    from ssmbench.harness.config.presets import resolve_preset

    task = get_task(name)
    quick = resolve_preset("quick", task, "attention")
    assert quick.family == "mad" and quick.keys["model.d_model"] == 64 and quick.keys["train.steps"] <= 1600
    paper = resolve_preset("paper", task, "attention")
    assert paper.name == "mad_paper/mad/attention"
    assert (paper.keys["model.d_model"], paper.keys["train.batch_size"], paper.keys["train.lr"]) == (128, 128, 5e-4)
    assert paper.keys["train.steps"] == (400 if name == "mad_memorization" else 20000)  # 200 epochs of MAD's sets
    assert "athms/mad-lab" in paper.provenance["train.lr"].source



def test_fuzzy_recall_full_length_keys_score_a_third_of_the_positions_that_variable_keys_do():
    """The card's two readings at MAD's baseline: variable key runs (MAD's training split, the default) score about
    10.5 % of the positions, full-length ones (MAD's test split, `variable_key_size=false`) about 3.4 %."""
    config = preset("mad_fuzzy_recall")
    variable = (draw("mad_fuzzy_recall", config, stop=400)["targets"] != -100).mean()
    full = (draw("mad_fuzzy_recall", dataclasses.replace(config, variable_key_size=False),
                 stop=400)["targets"] != -100).mean()
    assert 0.095 < variable < 0.115 and 0.030 < full < 0.039


def test_a_fuzzy_recall_checkpoint_is_scored_on_mads_full_length_test_keys(tmp_path, monkeypatch):
    """`ssmbench eval --checkpoint RUN/... -o variable_key_size=false` scores the trained model on MAD's test
    distribution: the key is accepted while scoring (it does not change the model) and reaches the scored config."""
    from ssmbench.harness import scoring
    from ssmbench.harness.config.run_config import RunConfig

    recorded = Path(__file__).parents[2] / "benchmarks/results/quick_recall_cpu/mad-attention/mad_fuzzy_recall"
    trained = RunConfig.from_json(json.loads((recorded / "config.json").read_text()))  # a quick run's config
    assert trained.task_config["variable_key_size"] is True
    checkpoint = tmp_path / "best.pt"
    checkpoint.write_bytes(b"weights")
    monkeypatch.setattr(scoring, "load_checkpoint", lambda path: {"config": trained.to_json(), "model": {}})
    monkeypatch.setattr(scoring, "score", lambda cfg, weights, split, **kw: cfg)
    scored = scoring.score_checkpoint(checkpoint, overrides={"variable_key_size": False}, quiet=True)
    assert scored.task_config["variable_key_size"] is False
    assert {k: v for k, v in scored.task_config.items() if k != "variable_key_size"} == \
        {k: v for k, v in trained.task_config.items() if k != "variable_key_size"}
    with pytest.raises(ConfigError, match="cannot change when scoring"):
        scoring.score_checkpoint(checkpoint, overrides={"vocab_size": 32}, quiet=True)
