"""The harness on a CUDA device (run with `pytest -m gpu` on a GPU machine)."""

from __future__ import annotations

import pytest
import torch

import ssmbench
from ssmbench.harness.scoring import score_checkpoint

pytestmark = pytest.mark.gpu

TINY = {"L": 64, "model.d_model": 16, "model.d_state": 64, "train.steps": 40, "train.eval_every": 20,
        "eval.val_samples": 32, "eval.test_samples": 32, "data.workers": 1}


@pytest.fixture(autouse=True)
def _needs_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")


@pytest.mark.parametrize("model", ["dlr", "attention", "s4d", "lru", "s4", "sgconv", "mamba"])
def test_training_on_cuda_records_the_device_and_memory(tmp_path, model):
    overrides = {k: v for k, v in TINY.items() if k != "model.d_state" or model not in ("attention", "sgconv")}
    if model in ("lru", "mamba"):
        overrides["model.d_state"] = 16
    r = ssmbench.evaluate(model, "cumsum", overrides=overrides, device="cuda", out=tmp_path / "run", quiet=True)
    assert r.metrics["device"] == "cuda" and r.metrics["environment"]["cuda_device"]
    assert r.metrics["peak_memory_bytes"] > 0
    assert r.metrics["test"]["r2"] == r.metrics["test"]["r2"]  # finite (not NaN)


def test_gpu_checkpoint_scores_the_same_on_cpu(tmp_path):
    r = ssmbench.evaluate("dlr", "cumsum", overrides=TINY, device="cuda", out=tmp_path / "run", quiet=True)
    cpu = score_checkpoint(r.run_dir / "checkpoints" / "best.pt", "test", device="cpu", out=tmp_path / "cpu")
    assert cpu.metrics["test"]["r2"] == pytest.approx(r.metrics["test"]["r2"], abs=1e-5)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_keeps_ssm_float32_and_learns(tmp_path, precision):
    r = ssmbench.evaluate("dlr", "cumsum", overrides={**TINY, "train.steps": 200, "train.eval_every": 100,
                                                      "train.lr": 1e-3},
                          device="cuda", precision=precision, out=tmp_path / "run", quiet=True)
    assert r.metrics["precision"] == precision
    assert r.metrics["test"]["r2"] > 0.5


def test_compile(tmp_path):
    r = ssmbench.evaluate("attention", "cumsum", overrides={k: v for k, v in TINY.items() if k != "model.d_state"},
                          device="cuda", compile=True, out=tmp_path / "run", quiet=True)
    assert r.metrics["test"]["r2"] == r.metrics["test"]["r2"]


def _train_losses(run_dir) -> list[float]:
    import json

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if r["split"] == "train"]


@pytest.mark.parametrize("model", ["dlr", "s4d", "lru", "attention"])
def test_a_cuda_graph_step_trains_like_the_eager_step(tmp_path, model):
    """`--cuda-graph` (3 eager steps, then the captured step replayed) follows the eager run's loss curve over 200
    steps to float rounding, with a cosine schedule (the rate changes every replay) and a gradient clip."""
    keys = {k: v for k, v in TINY.items() if k != "model.d_state" or model != "attention"}
    keys.update({"train.steps": 200, "train.eval_every": 100, "train.log_every": 10, "train.schedule": "cosine",
                 "train.warmup_steps": 20, "train.grad_clip": 1.0})
    if model == "lru":
        keys["model.d_state"] = 16
    eager = ssmbench.evaluate(model, "cumsum", overrides=keys, device="cuda", out=tmp_path / "eager", quiet=True)
    graph = ssmbench.evaluate(model, "cumsum", overrides={**keys, "hardware.cuda_graph": True}, device="cuda",
                              out=tmp_path / "graph", quiet=True)
    assert len(_train_losses(graph.run_dir)) == 20
    assert _train_losses(graph.run_dir) == pytest.approx(_train_losses(eager.run_dir), rel=1e-3)
    assert graph.metrics["test"]["r2"] == pytest.approx(eager.metrics["test"]["r2"], abs=1e-3)


def test_a_cuda_graph_pack_trains_like_the_eager_pack(tmp_path):
    from ssmbench.harness.config.resolver import resolve_run
    from ssmbench.harness.training.pack_protocol import PackMember, train_and_score_pack

    keys = {**TINY, "train.steps": 200, "train.eval_every": 100, "train.log_every": 10, "train.schedule": "cosine",
            "hardware.device": "cuda"}
    results = {}
    for mode, extra in (("eager", {}), ("graph", {"hardware.cuda_graph": True})):
        members = [PackMember(resolve_run("dlr", "cumsum", overrides={**keys, **extra}, seed=s), tmp_path / mode / str(s))
                   for s in (0, 1)]
        results[mode] = train_and_score_pack(members, quiet=True)
    for eager, graph in zip(results["eager"], results["graph"], strict=True):
        assert _train_losses(graph.run_dir) == pytest.approx(_train_losses(eager.run_dir), rel=1e-3)
