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
