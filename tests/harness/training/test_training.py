"""The training harness end to end on the CPU: learning, run folder, resume equality, checkpoint scoring, plug-ins."""

from __future__ import annotations

import json
import math

import pytest
import torch

import ssmbench
from ssmbench.errors import ConfigError
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.config.run_config import RunConfig
from ssmbench.harness.evaluation import resume
from ssmbench.harness.scoring import score_checkpoint

TINY = {"L": 32, "model.d_model": 8, "model.d_state": 32, "train.steps": 12, "train.eval_every": 6,
        "train.log_every": 3, "eval.val_samples": 24, "eval.test_samples": 20, "eval.metric_batch_size": 4,
        "data.workers": 0}


def tiny(tmp_path, name="run", task="cumsum", model="dlr", **extra):
    return ssmbench.evaluate(model, task, overrides={**TINY, **extra}, out=tmp_path / name, quiet=True)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished tiny run (DLR on cumsum, TINY) that the tests below read and never change: built once."""
    return tiny(tmp_path_factory.mktemp("runs"))


def test_dlr_learns_cumsum_on_cpu(tmp_path):
    """The CI bar of the quick protocol: DLR reaches R² > 0.95 on cumsum at L = 128 in at most 300 steps
    (about 10 s on 2 idle cores; timing targets live in benchmarks/harness/overhead.py, not here)."""
    r = ssmbench.evaluate("dlr", "cumsum", overrides={
        "L": 128, "model.d_model": 32, "model.d_state": 128, "train.steps": 300, "train.eval_every": 100,
        "train.lr": 1e-3, "eval.val_samples": 256, "eval.test_samples": 256, "data.workers": 1},
        out=tmp_path / "run", quiet=True)
    assert r.metrics["test"]["r2"] > 0.95
    assert r.metrics["val"]["r2_batchavg"] > 0.9


def test_run_folder_contents(finished):
    run = finished.run_dir
    for name in ("config.json", "metrics.jsonl", "metrics.json", "checkpoints/last.pt", "checkpoints/best.pt",
                 "plots/learning_curves.png"):
        assert (run / name).exists(), name
    metrics = json.loads((run / "metrics.json").read_text())
    for key in ("task_version", "config_sha256", "ssmbench_version", "seeds", "environment", "device",
                "parameters", "state_size", "causality", "wall_time_s", "time_per_step_s", "peak_memory_bytes"):
        assert key in metrics, key
    assert metrics["causality"]["passed"] is True
    assert metrics["test"]["n"] == 20 * 32  # every test sample, no padding, none dropped
    log = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r["split"] == "val"] == [6, 12]
    assert [r["step"] for r in log if r["split"] == "train"] == [3, 6, 9, 12]
    best = torch.load(run / "checkpoints" / "best.pt", weights_only=True)
    assert best["state"]["step"] == metrics["best_step"]


def test_config_json_reruns_exactly(finished, tmp_path):
    a = finished
    config = RunConfig.from_json(json.loads((a.run_dir / "config.json").read_text()))
    b = ssmbench.evaluate(config=config, out=tmp_path / "b", quiet=True)
    assert a.metrics["test"] == b.metrics["test"]


def _weights(run_dir, name="last.pt"):
    return torch.load(run_dir / "checkpoints" / name, weights_only=True)["model"]


def test_resume_gives_the_same_weights_as_one_run(finished, tmp_path):
    full = finished
    part = tiny(tmp_path, "part", **{"train.steps": 6})
    resume(part.run_dir, {"train.steps": 12}, quiet=True)
    a, b = _weights(full.run_dir), _weights(part.run_dir)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    log = [json.loads(line) for line in (part.run_dir / "metrics.jsonl").read_text().splitlines()]
    full_log = [json.loads(line) for line in (full.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["split"], r.get("loss")) for r in log] == \
           [(r["step"], r["split"], r.get("loss")) for r in full_log]


def test_resume_refuses_finished_and_foreign_runs(finished, tmp_path):
    r = finished
    with pytest.raises(ConfigError, match="already finished"):
        resume(r.run_dir)
    (tmp_path / "foreign").mkdir()
    with pytest.raises(ConfigError, match="not an ssmbench run folder"):
        resume(tmp_path / "foreign")
    with pytest.raises(ConfigError, match="cannot change on --resume"):
        resume(r.run_dir, {"train.lr": 1})


def test_score_checkpoint_reproduces_the_run_and_refuses_other_tasks(finished, tmp_path):
    r = finished
    scored = score_checkpoint(r.run_dir / "checkpoints" / "best.pt", "test", out=tmp_path / "score", quiet=True)
    assert scored.metrics["test"] == r.metrics["test"]
    assert (tmp_path / "score" / "metrics.json").exists()
    with pytest.raises(ConfigError, match="trained on cumsum, not shift"):
        score_checkpoint(r.run_dir / "checkpoints" / "best.pt", task="shift", out=tmp_path / "x")
    with pytest.raises(ConfigError, match="holds a 'dlr' model, not 'attention'"):
        score_checkpoint(r.run_dir / "checkpoints" / "best.pt", model="attention", out=tmp_path / "x")
    longer = score_checkpoint(r.run_dir / "checkpoints" / "best.pt", length=64, out=tmp_path / "y")  # generalisation
    assert longer.config.task_config["L"] == 64 and longer.metrics["seq_len"] == 64
    assert longer.config.task_config == r.config.with_overrides({"L": 64}).task_config


def test_user_mixer_and_factory(tmp_path):
    mixer = tiny(tmp_path, "mixer", model="user_mixers:CumMeanMixer", **{"model.d_state": None, "model.scale": 0.5})
    assert mixer.metrics["causality"]["passed"] and math.isfinite(mixer.metrics["test"]["r2"])
    factory = tiny(tmp_path, "factory", model="user_mixers:build_whole", **{"model.d_state": None,
                                                                            "model.d_model": None,
                                                                            "model.width": 4})
    assert factory.metrics["parameters"] == (3 * 4 + 4) + (4 * 1 + 1)


def test_leaky_mixer_claiming_causality_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="causal"):
        tiny(tmp_path, model="user_mixers:LeakyMixer", **{"model.d_state": None})


def test_nonfinite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    from ssmbench.harness.training.trainer import NonFiniteLoss

    with pytest.raises(NonFiniteLoss, match="loss became nan"):
        tiny(tmp_path, model="user_mixers:NanAfter", **{"model.d_state": None, "model.after": 8})
    last = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=True)
    assert last["state"]["step"] == 6
    assert all(torch.isfinite(v).all() for v in last["model"].values())
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_preset_resolution_order(tmp_path):
    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text('"train.lr" = 0.5\n"train.steps" = 7\n')
    cfg = resolve_run("dlr", "reverse", "quick", config_file=cfg_file, overrides={"train.steps": 9})
    assert cfg.train.lr == 0.5 and cfg.train.steps == 9            # file over preset, -o over file
    assert cfg.model_overrides["n_layers"] == 2                       # the quick preset's per-task value
    assert cfg.model_overrides["d_state"] == 1024                     # "${T}": reverse at L = 512 has T = 1024
    paper = resolve_run("dlr", "shift", "paper")
    assert (paper.task_config["L"], paper.train.steps, paper.train.lr) == (4096, 43200, 5e-5)  # run-1d.sh@27e7287
    assert resolve_run("dlr", "shift", "paper", length=512).preset == "dlr_paper/atomic512/dlr"
    with pytest.raises(ConfigError, match="no paper preset for model 'lru' on shift"):
        resolve_run("lru", "shift", "paper", length=2 ** 14)
    with pytest.raises(ConfigError, match="did you mean 'train.steps'"):
        resolve_run("dlr", "shift", overrides={"train.step": 3})
