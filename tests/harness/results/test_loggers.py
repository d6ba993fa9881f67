"""Optional loggers write beside metrics.jsonl: TensorBoard event files with the same scalars (offline)."""

from __future__ import annotations

import pytest

import ssmbench
from ssmbench.errors import ConfigError
from ssmbench.harness.results.loggers import make_logger

TINY = {"L": 32, "model.d_model": 8, "model.d_state": 32, "train.steps": 4, "train.eval_every": 2,
        "train.log_every": 2, "eval.val_samples": 8, "eval.test_samples": 8, "eval.metric_batch_size": 4,
        "data.workers": 0}


def test_tensorboard_gets_the_jsonl_scalars(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    r = ssmbench.evaluate("dlr", "cumsum", overrides=TINY, out=tmp_path / "run", quiet=True, logger="tensorboard")
    events = EventAccumulator(str(r.run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "val/r2", "val/mse"} <= tags
    assert [e.step for e in events.Scalars("val/r2")] == [2, 4]
    assert (r.run_dir / "metrics.jsonl").exists()


def test_unknown_or_missing_logger_is_a_usage_error(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="must be one of"):
        make_logger("mlflow", tmp_path, None)
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match="wandb is not installed") as info:
        make_logger("wandb", tmp_path, None)
    assert info.value.hint == "pip install wandb"
