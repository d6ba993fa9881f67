"""Length extrapolation sweeps: one checkpoint scored at several lengths, a table and a plot (issue 28, item 4)."""

from __future__ import annotations

import json

import pytest

import ssmbench
from ssmbench.errors import ConfigError
from ssmbench.harness.length_sweep import parse_lengths, sweep_lengths
from support import run_main

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




def test_eval_lengths_prints_the_table_and_writes_the_files(trained, tmp_path):
    ckpt = str(trained.run_dir / "checkpoints" / "best.pt")
    result = run_main("eval", "--checkpoint", ckpt, "--lengths", "16,32", "--out", str(tmp_path / "cli"), "-q")
    assert result.returncode == 0, result.stderr
    assert "| 32 (trained) |" in result.stdout and "| 16 |" in result.stdout
    saved = json.loads((tmp_path / "cli" / "lengths.json").read_text())
    assert [row["L"] for row in saved["rows"]] == [16, 32]
    assert saved["rows"][1]["r2"] == pytest.approx(trained.metrics["test"]["r2"], abs=1e-12)
    as_json = run_main("eval", "--checkpoint", ckpt, "--lengths", "64", "--out", str(tmp_path / "j"), "-q", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["rows"][0]["L"] == 64


@pytest.mark.parametrize("args, fragment", [
    (["--lengths", "16,32", "--task", "cumsum"], "add --checkpoint"),
    (["--lengths", "16,x", "CKPT"], "--lengths"),
    (["--lengths", "16,32", "--length", "64", "CKPT"], "drop --length"),
])
def test_eval_lengths_usage_errors_are_one_line(trained, args, fragment):
    ckpt = str(trained.run_dir / "checkpoints" / "best.pt")
    args = [a for a in args if a != "CKPT"] + (["--checkpoint", ckpt] if "CKPT" in args else [])
    result = run_main("eval", *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert fragment in result.stderr


def test_lengths_a_model_cannot_run_at_are_skipped_with_the_reason(tmp_path):
    """A model whose parameters depend on l_max (tests/user_mixers.py PositionTable, like SGConv): scoring it at
    another length is a one-line usage error naming the trained length; a sweep keeps the lengths it could score
    and records the others as skipped, in its table too."""
    from ssmbench.harness.scoring import score_checkpoint

    run = ssmbench.evaluate("tests.user_mixers:PositionTable", "cumsum", "quick", out=tmp_path / "run",
                            overrides={k: v for k, v in TINY.items() if k != "model.d_state"}, quiet=True,
                            device="cpu")
    ckpt = run.run_dir / "checkpoints" / "best.pt"
    with pytest.raises(ConfigError, match="trained at L = 32") as err:
        score_checkpoint(ckpt, "test", length=64, out=tmp_path / "one", quiet=True)
    assert err.value.field == "--length" and err.value.hint.startswith("score it at L = 32")
    sweep = sweep_lengths(ckpt, [32, 64], out=tmp_path / "sweep", quiet=True)
    assert sweep.rows[0]["L"] == 32 and sweep.rows[0]["r2"] == pytest.approx(run.metrics["test"]["r2"], abs=1e-12)
    assert sweep.rows[1]["L"] == 64 and "trained at L = 32" in sweep.rows[1]["skipped"]
    assert "| 64 | skipped: " in (tmp_path / "sweep" / "lengths.md").read_text()
    with pytest.raises(ConfigError, match="no length could be scored"):
        sweep_lengths(ckpt, [64], out=tmp_path / "none", quiet=True)
