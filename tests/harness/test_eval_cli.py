"""`ssmbench eval` / `compare` / `ls presets` as a user types them: results, one-line errors, exit codes, signals.

The results, the signals and the resume after them run `ssmbench` as a process of its own; the one-line errors and
runs whose output is all they check go through `ssmbench.cli.app.main` in this process (`support.run_main`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from support import TESTS, run_main

TINY = ["--task", "cumsum", "-o", "L=32", "-o", "model.d_model=8",
        "-o", "eval.val_samples=16", "-o", "eval.test_samples=16", "-o", "data.workers=0", "-q"]


def ssmbench(*args: str, timeout: int = 300, **kw) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ssmbench")
    env = {**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": str(TESTS)}
    kw.setdefault("cwd", tempfile.gettempdir())  # default run folders must never land in the checkout's runs/
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=timeout, **kw)


def one_line_error(result: subprocess.CompletedProcess, code: int, *fragments: str) -> None:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_eval_prints_scores_and_compare_builds_the_table(tmp_path):
    a = ssmbench("eval", "--model", "dlr", *TINY[:-1], "-o", "model.d_state=32", "-o", "train.steps=4", "-o",
                 "train.eval_every=2", "--out", str(tmp_path / "dlr"), "--json")  # not quiet: progress on stderr
    assert a.returncode == 0, a.stderr
    assert "step 2: val" in a.stderr
    out = json.loads(a.stdout)  # stdout holds the one JSON object only
    assert set(out["test"]) >= {"r2", "r2_batchavg", "mse"}
    assert out["startup_s"] > 0 and out["time_per_step_s"] > 0 and 0 <= out["data_wait_share"] <= 1
    b = run_main("eval", "--model", "attention", *TINY, "-o", "train.steps=4", "-o", "train.eval_every=2",
                 "--out", str(tmp_path / "attn"))  # the human line; in this process (the JSON run above is not)
    assert b.returncode == 0, b.stderr
    assert "test r2" in b.stdout
    assert re.search(r"\(\d+\.\d ms a step, \d+\.\d % of it waiting for data; start-up \d+\.\d s\)$", b.stdout.strip())
    table = run_main("compare", str(tmp_path / "dlr"), str(tmp_path / "attn"), "--markdown")
    assert table.returncode == 0, table.stderr
    assert "| cumsum |" in table.stdout and "dlr 1L L=32" in table.stdout and "attention 1L L=32" in table.stdout
    data = json.loads(run_main("compare", str(tmp_path / "dlr"), str(tmp_path / "attn"), "--json").stdout)
    assert [c["model"] for c in data["columns"]] == ["dlr", "attention"]
    assert data["columns"][0]["time_ratio"] == pytest.approx(1.0)


def test_tilde_removes_a_model_key_the_preset_set(tmp_path):
    """The quick preset gives DLR d_state = 512; `-o ~model.d_state` leaves it to the model's own default (what
    config.json records and what the run was built with), and the other preset keys stay."""
    run = run_main("eval", "--model", "dlr", *TINY, "-o", "~model.d_state", "-o", "train.steps=2",
                   "--out", str(tmp_path / "run"))
    assert run.returncode == 0, run.stderr
    overrides = json.loads((tmp_path / "run" / "config.json").read_text())["model_overrides"]
    assert "d_state" not in overrides and overrides["d_model"] == 8 and overrides["dt_min"] == 1e-05


def test_ls_presets_names_sources():
    result = run_main("ls", "presets")
    assert result.returncode == 0
    assert "dlr_paper/atomic/dlr" in result.stdout and "DLR paper Table 5" in result.stdout
    assert "quick" in result.stdout


@pytest.mark.parametrize("args, fragments", [
    (["--model", "dlrr", "--task", "cumsum"], ["did you mean 'dlr'"]),
    (["--model", "dlr", "--task", "cumsun"], ["did you mean 'cumsum'"]),
    (["--model", "dlr", "--task", "cumsum", "--preset", "papr"], ["did you mean 'paper'"]),
    (["--model", "dlr", "--task", "cumsum", "-o", "train.stepz=3"], ["did you mean 'train.steps'"]),
    (["--model", "dlr", "--task", "cumsum", "-o", "model.d_stat=3"], ["did you mean 'model.d_state'"]),
    (["--model", "lru", "--task", "shift", "--length", "16384", "--preset", "paper"],
     ["no paper preset", "dlr_paper/long_shift/dlr"]),
    (["--model", "dlr", "--task", "cumsum", "-o", "train.schedule=cosine", "-o", "train.warmup_steps=40", "-o",
      "train.steps=10"], ["train.steps", "must exceed train.warmup_steps (40)"]),
    (["--model", "dlr", "--task", "cumsum", "--device", "cuda"], ["no usable CUDA device"]),
    (["--model", "dlr", "--task", "cumsum", "-o", "~train.steps"], ["'~train.steps'", "~model.KEY"]),
    (["--model", "dlr", "--task", "cumsum", "-o", "~model.d_state=3"], ["'~model.d_state=3'", "(no value)"]),
    (["--model", "user_mixers:LeakyMixer", *TINY], ["fails the causality check"]),
    (["--model", "user_mixers:build_wrong_shape", "--task", "cumsum", "-o", "L=32", "-q"],
     ["expected a float tensor of shape"]),
])
def test_usage_errors_are_one_line_with_exit_2(args, fragments):
    if "--device" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    one_line_error(run_main("eval", *args), 2, *fragments)


def test_checkpoint_and_resume_errors(tmp_path):
    run = tmp_path / "run"
    assert run_main("eval", "--model", "dlr", *TINY, "-o", "model.d_state=32", "-o", "train.steps=2", "-o", "train.eval_every=2",
                    "--out", str(run)).returncode == 0
    one_line_error(run_main("eval", "--checkpoint", str(run / "checkpoints" / "best.pt"), "--task", "shift"), 2,
                   "trained on cumsum, not shift")
    one_line_error(run_main("eval", "--checkpoint", str(run / "checkpoints" / "best.pt"), "--model", "attention"), 2,
                   "holds a 'dlr' model, not 'attention'")
    one_line_error(run_main("eval", "--checkpoint", str(run / "checkpoints" / "best.pt"), "--resume", str(run)), 2,
                   "give one of them")
    one_line_error(run_main("eval", *TINY, "--split", "val"), 2, "--split chooses what")
    one_line_error(run_main("eval", "--resume", str(run)), 2, "already finished")
    truncated = tmp_path / "truncated"
    shutil.copytree(run, truncated)
    (truncated / "metrics.json").unlink()
    last = truncated / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    one_line_error(run_main("eval", "--resume", str(truncated)), 2, "--resume:", "truncated or damaged")
    one_line_error(run_main("eval", "--resume", str(tmp_path)), 2, "not an ssmbench run folder")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    one_line_error(run_main("eval", "--checkpoint", str(tmp_path / "junk.pt")), 2, "not a readable")
    scored = run_main("eval", "--checkpoint", str(run / "checkpoints" / "best.pt"), "--split", "val",
                      "--out", str(tmp_path / "score"), "--json")
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["val"]["n"] == 16 * 32


def test_nan_loss_exits_1_with_one_line(tmp_path):
    result = run_main("eval", "--model", "user_mixers:NanAfter", *TINY,
                      "-o", "train.steps=12", "-o", "train.eval_every=6", "-o", "train.log_every=3",
                      "--out", str(tmp_path / "run"))
    one_line_error(result, 1, "loss became nan", "last good checkpoint")


CEILING = 900
"""Seconds a signal test waits for an event at most: generous, since a loaded 2-core machine is slow."""


def wait_for_training(log: Path, proc: subprocess.Popen) -> None:
    """Until the run has logged a training line (or the process ended, or the ceiling passed)."""
    deadline = time.monotonic() + CEILING
    while not (log.exists() and '"train"' in log.read_text()):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the run logged no training line in time"
        time.sleep(0.2)


@pytest.mark.parametrize("during, eval_every, val_samples", [("training", 50, 64), ("validation", 5, 20000)])
def test_group_sigterm_saves_the_step_and_exits_130(tmp_path, during, eval_every, val_samples):
    """A scheduler's preemption signals the whole process group, data workers included: the run still saves
    last.pt at the current step and exits 130 with the resume command (workers ignore the signal). The second case
    signals right after step 5's loss line, while a long validation of step 5 runs."""
    import torch

    exe = Path(sys.executable).with_name("ssmbench")
    args = [str(exe), "eval", "--model", "dlr", "--task", "cumsum", "-o", "L=64", "-o", "model.d_model=16",
            "-o", "model.d_state=64", "-o", "train.steps=100000", "-o", f"train.eval_every={eval_every}", "-o",
            "train.log_every=5", "-o", f"eval.val_samples={val_samples}", "-o", "eval.test_samples=16",
            "-o", "data.workers=2", "-q", "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONSAFEPATH": "1"},
                            start_new_session=True)
    wait_for_training(tmp_path / "run" / "metrics.jsonl", proc)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=CEILING)
    assert proc.returncode == 130, err
    assert "interrupted at step" in err and "--resume" in err, err
    assert "Traceback" not in err and "killed by signal" not in err, err
    saved = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=True)["state"]["step"]
    assert 0 < saved < 100000
    if during == "validation":
        assert saved == 5


def test_sigint_checkpoints_and_resume_finishes_like_one_run(tmp_path):
    """Ctrl-C of a real process saves the step it reached (exit 130); its resume (in this process, like the
    uninterrupted run) ends with the uninterrupted run's weights. The signal follows the first loss line (step 10):
    400 steps leave it a margin of seconds on a loaded machine (1,000 steps took 20 s in all)."""
    import torch

    args = ["eval", "--model", "dlr", "--task", "cumsum", "-o", "L=64", "-o", "model.d_model=16",
            "-o", "model.d_state=64", "-o", "train.steps=400", "-o", "train.eval_every=200", "-o",
            "train.log_every=10", "-o", "eval.val_samples=16", "-o", "eval.test_samples=16", "-o", "data.workers=1",
            "-q"]
    exe = Path(sys.executable).with_name("ssmbench")
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    proc = subprocess.Popen([str(exe), *args, "--out", str(tmp_path / "cut")], stderr=subprocess.PIPE, text=True,
                            env=env)
    wait_for_training(tmp_path / "cut" / "metrics.jsonl", proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=CEILING)
    assert proc.returncode == 130, err
    assert "interrupted at step" in err and "--resume" in err and "Traceback" not in err
    saved = torch.load(tmp_path / "cut" / "checkpoints" / "last.pt", weights_only=True)["state"]["step"]
    assert 0 < saved < 400
    done = run_main("eval", "--resume", str(tmp_path / "cut"), "-q")
    assert done.returncode == 0, done.stderr
    full = run_main(*args, "--out", str(tmp_path / "full"))
    assert full.returncode == 0, full.stderr
    a = torch.load(tmp_path / "cut" / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "full" / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
