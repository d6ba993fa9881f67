"""Length extrapolation sweeps: one checkpoint scored at several lengths, a table and a plot (issue 28, item 4)."""

from __future__ import annotations

import json

import pytest

import ssmbench
from ssmbench.errors import ConfigError
from ssmbench.harness.length_sweep import parse_lengths, sweep_lengths

TINY = {"L": 32, "model.d_model": 8, "model.d_state": 16, "train.steps": 6, "train.eval_every": 3,
        "eval.val_samples": 16, "eval.test_samples": 16, "data.workers": 0}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "run"
    return ssmbench.evaluate("dlr", "cumsum", "quick", out=out, overrides=TINY, quiet=True, device="cpu")


def test_each_length_is_scored_like_a_checkpoint_score_and_the_trained_length_reproduces_the_run(trained, tmp_path):
    ckpt = trained.run_dir / "checkpoints" / "best.pt"
    sweep = sweep_lengths(ckpt, [16, 32, 64], out=tmp_path / "sweep", quiet=True)
    assert [row["L"] for row in sweep.rows] == [16, 32, 64] and sweep.trained_length == 32
    # the trained length scores the same test set with the same weights: the training run's own test numbers
    at_trained = sweep.rows[1]
    assert at_trained["r2"] == pytest.approx(trained.metrics["test"]["r2"], abs=1e-12)
    assert at_trained["r2_batchavg"] == pytest.approx(trained.metrics["test"]["r2_batchavg"], abs=1e-12)
    for row in sweep.rows:  # each length has a scoring run folder of its own, at that length
        config = json.loads((tmp_path / "sweep" / f"L{row['L']}" / "config.json").read_text())
        assert config["task_config"]["L"] == row["L"]
        metrics = json.loads((tmp_path / "sweep" / f"L{row['L']}" / "metrics.json").read_text())
        assert metrics["test"]["r2"] == row["r2"]
    saved = json.loads((tmp_path / "sweep" / "lengths.json").read_text())
    assert saved["rows"] == sweep.rows and saved["trained_length"] == 32
    table = (tmp_path / "sweep" / "lengths.md").read_text()
    assert "| 32 (trained) |" in table and "| 64 |" in table
    assert (tmp_path / "sweep" / "lengths.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("text", ["", "256,x", "0,64", "64,-1", "64,64"])
def test_bad_length_lists_are_refused_with_the_fix(text):
    with pytest.raises(ConfigError) as err:
        parse_lengths(text)
    assert "--lengths" in str(err.value)


def test_a_task_without_a_length_is_refused(tmp_path):
    import torch

    fake = tmp_path / "best.pt"
    torch.save({"config": {"task": "pathfinder", "model": "dlr", "task_config": {"size": 32}}, "model": {}}, fake)
    with pytest.raises(ConfigError, match="no sequence length"):
        sweep_lengths(fake, [64], out=tmp_path / "s", quiet=True)
