"""Which task keys a checkpoint may be scored at: each task declares its own (`TrainingPolicy.scoring_keys`); the
harness lists no task names. Flip-flop trained at p(ignore) .8 is scored on the dense .1 and sparse .98 streams,
copying at longer strings, MAD fuzzy recall on full-length keys; any other task key is refused in one line."""

from __future__ import annotations

import pytest

from ssmbench.errors import ConfigError
from ssmbench.harness import scoring
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.registry import get_task, tasks
from ssmbench.training_policy import TrainingPolicy


def scored(monkeypatch, tmp_path, model, task, **overrides):
    """The config `score_checkpoint` would score a (model, task) quick run's checkpoint with, at `overrides`."""
    trained = resolve_run(model, task, "quick")
    checkpoint = tmp_path / "best.pt"
    checkpoint.write_bytes(b"weights")
    monkeypatch.setattr(scoring, "load_checkpoint", lambda path: {"config": trained.to_json(), "model": {}})
    monkeypatch.setattr(scoring, "score", lambda cfg, weights, split, **kw: cfg)
    return trained, scoring.score_checkpoint(checkpoint, overrides=overrides, quiet=True)


@pytest.mark.parametrize("p_ignore", [0.1, 0.98])
def test_flipflop_is_scored_at_another_ignore_probability(monkeypatch, tmp_path, p_ignore):
    trained, cfg = scored(monkeypatch, tmp_path, "lstm", "flipflop", p_ignore=p_ignore)
    assert trained.task_config["p_ignore"] == 0.8 and cfg.task_config["p_ignore"] == p_ignore
    assert {k: v for k, v in cfg.task_config.items() if k != "p_ignore"} == \
        {k: v for k, v in trained.task_config.items() if k != "p_ignore"}
    _, cfg = scored(monkeypatch, tmp_path, "lstm", "flipflop", **{"task.p_ignore": p_ignore})  # the `task.` form
    assert cfg.task_config["p_ignore"] == p_ignore


@pytest.mark.parametrize("task", ["string_copy", "prefix_ngram", "suffix_ngram", "duplicate_ngram"])
def test_copying_is_scored_at_longer_strings(monkeypatch, tmp_path, task):
    trained, cfg = scored(monkeypatch, tmp_path, "attention", task, min_length=40, max_length=40, pad_to=0)
    assert trained.task_config["max_length"] == 20
    assert (cfg.task_config["min_length"], cfg.task_config["max_length"]) == (40, 40)


def test_keys_a_task_does_not_declare_are_refused_in_one_line(monkeypatch, tmp_path):
    with pytest.raises(ConfigError) as err:
        scored(monkeypatch, tmp_path, "lstm", "flipflop", vocab_size=7)  # not a flip-flop key at all
    assert err.value.field == "vocab_size" and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="cannot change when scoring a parity_check checkpoint"):
        scored(monkeypatch, tmp_path, "lstm", "parity_check", p_ignore=0.1)  # flip-flop's key, not parity's
    with pytest.raises(ConfigError, match="cannot change when scoring"):
        scored(monkeypatch, tmp_path, "attention", "string_copy", vocab_size=10)  # changes the model's vocabulary
    with pytest.raises(ConfigError, match="cannot change when scoring"):
        scored(monkeypatch, tmp_path, "lstm", "flipflop", **{"model.d_model": 8})


def test_every_declared_key_is_a_field_of_the_tasks_config():
    for name in tasks.names():
        task = get_task(name)
        fields = set(task.Config.__dataclass_fields__)
        assert set(task.policy.scoring_keys) <= fields, name


def test_a_policy_refuses_malformed_scoring_keys():
    assert TrainingPolicy(scoring_keys=["p_ignore"]).scoring_keys == ("p_ignore",)
    with pytest.raises(ConfigError, match="bare task config key"):
        TrainingPolicy(scoring_keys=("task.p_ignore",))
