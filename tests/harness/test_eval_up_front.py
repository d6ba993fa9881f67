"""`ssmbench eval` says what is wrong before the slow part (issue 26).

* Usage errors (unknown model or preset, unknown -o key, a value that does not parse or is out of range, --device cuda
  on a machine without a GPU, a missing --checkpoint, --resume with a run-defining option) are found from names,
  tables and files before torch, Numba or a model is imported: checked here by the modules the process had loaded
  when it exited, not by a clock. (Before: 15-23 s on a busy machine, after importing torch and the model.)
* A batch that cannot fit is refused from shapes alone, before the model is built or run: the causality check and
  the memory probe each ran the model at full length first (minutes at T = 65536, N = T on a CPU).
* Scored splits smaller than one virtual batch of the per-batch metrics are refused before the run starts (a task's
  own eval sizes, or a dataset folder holding fewer samples).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import ssmbench
from ssmbench.errors import ConfigError
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.training import memory
from support import refused, run_main

PROBE = """
import json, sys
from ssmbench.cli.app import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": sorted(m for m in ("torch", "numba") if m in sys.modules)}))
"""
NO_GPU_HERE = not any(glob.glob(p) for p in ("/dev/nvidia[0-9]*", "/dev/nvhost*", "/dev/nvmap", "/dev/kfd", "/dev/dxg"))


def eval_probe(*args: str) -> tuple[dict, str]:
    result = subprocess.run([sys.executable, "-c", PROBE, "eval", *args], capture_output=True, text=True,
                            timeout=900, cwd=tempfile.gettempdir(), env={**os.environ, "PYTHONSAFEPATH": "1"})
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A folder that looks like a run to the option checks (they never read it)."""
    folder = tmp_path_factory.mktemp("runs") / "run"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


CASES = [
    (["--model", "nope", "--task", "cumsum"], "error: unknown model 'nope'"),
    (["--model", "dlr", "--task", "cumsum", "-o", "train.stepz=5"],
     "invalid option: train.stepz: unknown key; did you mean 'train.steps'?"),
    (["--model", "dlr", "--task", "cumsum", "-o", "trian.steps=5"], "unknown section 'trian'"),
    (["--model", "dlr", "--task", "cumsum", "-o", "train.steps=abc"], "train.steps: cannot parse 'abc' as int"),
    (["--model", "dlr", "--task", "cumsum", "-o", "train.steps=0"], "train.steps: must be >= 1, got 0"),
    (["--model", "dlr", "--task", "cumsum", "-o", "train.lr=-1"], "train.lr: must be > 0"),
    (["--model", "dlr", "--task", "cumsum", "-o", "train.lr=nan"], "train.lr: must be a finite number, got 'nan'"),
    (["--model", "dlr", "--task", "cumsum", "-o", "train.steps=99999999999999999999"],
     "train.steps: must be <= 1,000,000,000, got 99,999,999,999,999,999,999"),
    (["--model", "dlr", "--task", "cumsum", "-o", "hardware.precision=fp8"], "hardware.precision: must be fp32"),
    (["--model", "dlr", "--task", "cumsum", "--device", "gpu"], "--device: expected auto, cpu, cuda or cuda:i"),
    (["--checkpoint", "/nonexistent/best.pt"], "--checkpoint: /nonexistent/best.pt does not exist"),
    (["--model", "dlr", "--task", "cumsum", "--preset", "quik"], "unknown preset 'quik'; did you mean 'quick'?"),
    (["--model", "dlr", "--evaluator", "score_onyl"], "unknown evaluator 'score_onyl'"),
]


@pytest.mark.parametrize("args, line", CASES, ids=[c[1][:40] for c in CASES])
def test_usage_errors_come_before_torch_and_numba_are_imported(args, line):
    out, err = eval_probe(*args)
    assert out == {"code": 2, "heavy": []}, (out, err)
    assert err.splitlines()[0].startswith(("error:", "invalid option:")) and line in err.splitlines()[0], err
    assert "Traceback" not in err


@pytest.mark.skipif(not NO_GPU_HERE, reason="this machine has a GPU device node: torch decides")
def test_cuda_without_any_gpu_is_refused_before_torch_is_imported():
    out, err = eval_probe("--model", "dlr", "--task", "cumsum", "--device", "cuda")
    assert out == {"code": 2, "heavy": []}, (out, err)
    assert err.startswith("invalid option: --device: cuda was asked for but this machine has no usable CUDA device")


@pytest.mark.parametrize("args", [["--model", "s4", "--task", "shift"], ["--preset", "paper"], ["--seed", "3"],
                                  ["-o", "model.d_model=4"], ["--precision", "bf16"]])
def test_resume_option_errors_come_before_torch(run_folder, args):
    out, err = eval_probe("--resume", str(run_folder), *args)
    assert out == {"code": 2, "heavy": []}, (out, err)
    assert "--resume" in err.splitlines()[0] and "Traceback" not in err


# ------------------------------------------------------------------------------------------------ the memory bound
LONG = {"train.batch_size": 100000}


def test_the_batch_bound_counts_inputs_targets_and_the_encoder_output():
    """cumsum at T = 65536 stores (T, 3) float32 inputs and (T, 1) float32 targets per sample; the quick preset's
    DLR has d_model = 64, so one encoder output is T x 64 float32; bf16 autocast halves that activation; a factory
    (its own whole model) is bounded by its samples alone."""
    cfg = resolve_run("dlr", "cumsum", length=65536, overrides=LONG)
    assert cfg.model_overrides["d_model"] == 64
    T = 65536
    bound = memory.batch_lower_bound(cfg, cfg.spec())
    assert bound["bytes_per_sample"] == T * 3 * 4 + T * 1 * 4 + T * 64 * 4
    assert bound["bytes"] == 100000 * bound["bytes_per_sample"] + bound["model_bytes"] and bound["model_bytes"] > 0
    assert memory.batch_lower_bound(cfg, cfg.spec(), world_size=4)["bytes"] == \
        25000 * bound["bytes_per_sample"] + bound["model_bytes"]
    half = cfg.with_overrides({"hardware.precision": "bf16"})
    assert memory.batch_lower_bound(half, half.spec())["bytes_per_sample"] == T * 3 * 4 + T * 4 + T * 64 * 2
    factory = resolve_run("user_mixers:build_whole", "cumsum", length=65536, overrides=LONG)
    assert memory.batch_lower_bound(factory, factory.spec())["bytes_per_sample"] == T * 3 * 4 + T * 4


def test_a_batch_that_cannot_fit_is_refused_before_the_model_is_built(tmp_path, monkeypatch):
    """1 GiB free (whatever this machine has): refused in one line naming the batch, before `trainer.setup`
    builds the model (whose build runs the causality check), and no folder is left; --force goes on to build."""
    from ssmbench.harness.training import trainer

    def built(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(memory, "free_bytes", lambda device: 2 ** 30)
    monkeypatch.setattr(trainer, "setup", built)
    with pytest.raises(ConfigError) as caught:
        ssmbench.evaluate("dlr", "cumsum", length=65536, overrides=LONG, out=tmp_path / "run", quiet=True)
    message = caught.value.message
    assert message.startswith("train.batch_size: this run needs at least 1.6 TiB of cpu memory (100000 samples "
                              "per step x 17.0 MiB"), message
    assert "1.0 GiB is free" in message and "-o train.batch_size=52" in caught.value.hint  # 130 MiB: the model
    assert not (tmp_path / "run").exists()
    with pytest.raises(AssertionError, match="the model was built"):
        ssmbench.evaluate("dlr", "cumsum", length=65536, overrides=LONG, out=tmp_path / "run", quiet=True,
                          force=True)


def test_the_cli_refuses_an_impossible_batch_in_one_line(tmp_path):
    """The issue's command (with a batch no machine holds): one line, exit 2, no run folder."""
    result = run_main("eval", "--model", "dlr", "--task", "cumsum", "--length", "65536", "-o",
                      "train.batch_size=10000000", "--out", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("invalid option: train.batch_size: this run needs at least") and len(lines) == 2
    assert lines[1].startswith("hint: try -o train.batch_size=") and "--force runs it anyway" in lines[1]
    assert not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------- per-batch metrics of eval


def test_eval_refuses_fewer_scored_samples_than_one_metric_batch(tmp_path):
    """`macro_f1_batchavg nan` (every virtual batch incomplete and dropped) is refused before the run starts:
    one line naming both values and the fix; no run folder."""
    out = tmp_path / "run"
    args = ["eval", "--model", "dlr", "--task", "cumsum", "-o", "L=32", "-o", "model.d_model=8", "-o",
            "train.steps=2", "-o", "data.workers=0", "-q", "--out", str(out)]
    line = refused(run_main(*args, "-o", "eval.val_samples=8"), 2,
                   "hint: pass -o eval.metric_batch_size=8 (or less), or -o eval.val_samples=16 (or more)")
    assert line == ("invalid option: eval.metric_batch_size: 16 is more than the 8 val samples scored "
                    "(eval.val_samples = 8): no complete virtual batch, so every per-batch metric (*_batchavg) "
                    "would read nan")
    refused(run_main(*args, "-o", "eval.test_samples=5", "-o", "eval.metric_batch_size=6"), 2,
            "6 is more than the 5 test samples scored (eval.test_samples = 5)")
    assert not out.exists()


def test_a_folder_with_fewer_samples_than_one_metric_batch_is_refused(tmp_path):
    """A folder task scores min(eval.val_samples, the split's samples): a folder holding 4 val samples under the
    quick preset's metric batch of 16 is refused naming the folder; a metric batch of 4 runs."""
    from ssmbench.data.make.generate import generate_dataset
    from ssmbench.harness.config.resolver import resolve_run
    from support import tiny_config

    folder = generate_dataset("pathfinder", tiny_config("pathfinder"), out=tmp_path, n=12,
                              split={"train": 4, "val": 4, "test": 4}, quiet=True).path
    with pytest.raises(ConfigError) as caught:
        resolve_run("dlr", "pathfinder", data=folder)
    assert str(caught.value) == (f"eval.metric_batch_size: 16 is more than the 4 val samples scored (all 4 of "
                                 f"{folder}): no complete virtual batch, so every per-batch metric (*_batchavg) "
                                 "would read nan")
    assert caught.value.hint == ("pass -o eval.metric_batch_size=4 (or less), or use a folder with at least 16 val "
                                 "samples")
    cfg = resolve_run("dlr", "pathfinder", data=folder, overrides={"eval.metric_batch_size": 4})
    assert cfg.eval.metric_batch_size == 4
