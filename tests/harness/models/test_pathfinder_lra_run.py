"""LRA Pathfinder in the harness: mean pooling + linear head, accuracy on one label per image, the paper rows
(LRU Table 9, LaS Table 4, the S4 repository's S4D configs) and the causal-only refusal."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import ssmbench
from ssmbench.data.make.generate import generate_dataset
from ssmbench.errors import ConfigError, SsmbenchError
from ssmbench.harness.config.presets import resolve_preset
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.models.backbone import SequenceModel, resolve_pool
from ssmbench.harness.training.facts import check_direction
from ssmbench.registry import get_task
from ssmbench.task_config import resolve_config

TINY = {"model.d_model": 8, "model.n_layers": 1, "model.d_state": 16, "train.steps": 6, "train.warmup_steps": 1,
        "train.eval_every": 3, "train.log_every": 1, "train.batch_size": 4, "eval.val_samples": 8,
        "eval.test_samples": 8, "eval.batch_size": 4, "eval.metric_batch_size": 4, "data.workers": 0}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """LRA Pathfinder 32 (the LRA preset): train 24, val 8, test 8."""
    _, config, _ = resolve_config("pathfinder_lra", size=32)
    return generate_dataset("pathfinder_lra", config, out=tmp_path_factory.mktemp("lra"), n=40,
                            split={"train": 24, "val": 8, "test": 8}, samples_per_shard=8, quiet=True).path


class Scale(nn.Module):
    """A position-wise toy mixer that takes a direction argument."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(d_model))

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.tanh(x * self.w)


def test_mean_pooling_is_the_decoder_of_the_average_feature():
    spec = get_task("pathfinder_lra").spec(get_task("pathfinder_lra").presets["32"])
    model = SequenceModel(spec, Scale, d_model=8, n_layers=2, prenorm=True, bidirectional=True)
    x = torch.randint(0, 256, (3, 1024), dtype=torch.uint8)
    want = model.features(x).mean(dim=1, keepdim=True) @ model.decoder.weight.T + model.decoder.bias
    torch.testing.assert_close(model(x), want)
    assert model(x).shape == (3, 1, 2) and model.pool == "mean"
    last = SequenceModel(spec, Scale, d_model=8, pool="last", bidirectional=True)
    torch.testing.assert_close(last(x), last.forward_full(x)[:, -1:])
    listops = get_task("listops").spec(get_task("listops").presets["lra"])
    assert resolve_pool("auto", listops) == "last"  # LRA ListOps is causal: its label sits on the last token
    with pytest.raises(ConfigError, match="model.pool"):
        resolve_pool("mean", listops)


def test_a_run_scores_accuracy_on_one_label_per_image(folder, tmp_path):
    r = ssmbench.evaluate("dlr", "pathfinder_lra", data=folder, out=tmp_path / "run", quiet=True, overrides=TINY)
    for split in ("val", "test"):
        scores = r.metrics[split]
        assert scores["n"] == scores["n_samples"] == 8
        assert scores["accuracy"] == pytest.approx(sum(scores["confusion"][c][c] for c in range(2)) / 8)
    assert r.metrics["monitor"]["key"] == "accuracy"
    config = json.loads((r.run_dir / "config.json").read_text())
    assert config["model_overrides"]["bidirectional"] is True and config["task_config"]["size"] == 32


def test_a_causal_only_mixer_is_refused(folder):
    tiny = {k: v for k, v in TINY.items() if k != "model.d_state"}
    cfg = resolve_run("user_mixers:CumMeanMixer", "pathfinder_lra", data=folder, overrides=tiny)
    with pytest.raises(SsmbenchError, match="causal-only"):
        check_direction(cfg, get_task("pathfinder_lra").spec(get_task("pathfinder_lra").presets["32"]))


@pytest.mark.parametrize("model, size, row, expect", [
    ("lru", 32, "lru_paper/lra_pathfinder32/lru",
     {"model.n_layers": 6, "model.d_model": 192, "model.d_state": 256, "train.steps": 500000,
      "train.batch_size": 64, "model.lr_factor": 0.25, "train.weight_decay": 0.05, "model.r_min": 0.9,
      "model.r_max": 0.999}),
    ("lru", 128, "lru_paper/lra_pathfinder128/lru",
     {"model.d_model": 128, "train.steps": 250000, "train.batch_size": 32, "model.r_min": 0.999,
      "model.r_max": 0.9999, "model.max_phase": pytest.approx(3.14159265 / 10), "task.size": 128}),
    ("las", 32, "las_paper/lra_pathfinder32/las",
     {"model.n_layers": 6, "model.d_model": 256, "train.lr": 0.004, "train.batch_size": 64,
      "train.weight_decay": 0.0, "model.pool_size": 3, "model.alpha_b": 0.001, "model.bidirectional": False}),
    ("s4d", 128, "s4_repo/lra_pathfinder128/s4d", {"train.lr": 5e-4, "model.lr_ssm": 5e-4, "train.batch_size": 16}),
])
def test_paper_rows_hold_the_tables_values(model, size, row, expect):
    task = get_task("pathfinder_lra")
    p = resolve_preset("paper", task, model, task.presets[str(size)], size=size)
    assert p.name == row and p.keys["model.pool"] == "mean" and p.keys["model.norm"] == "batch"
    assert {k: p.keys[k] for k in expect} == expect
    with pytest.raises(ConfigError, match="lra_pathfinder64"):
        resolve_preset("paper", task, "lru", task.presets["64"], size=64)
    pathfinder = get_task("pathfinder")
    assert resolve_preset("paper", pathfinder, "dlr", pathfinder.presets["128"]).name == "dlr_paper/pathfinder128/dlr"
