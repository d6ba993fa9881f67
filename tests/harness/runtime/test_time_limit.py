"""`--time-limit`: a run or a suite stops cleanly before a wall-clock limit (last.pt saved, no metrics.json, exit 75)
and continues with `--resume` / the same command, also from a run folder copied to another path.

No test depends on timing: in-process runs obey a `Deadline` on a fake clock (each reading one second later, or moved
by the test), and the command-line runs use limits that are certainly reached (the deadline counts from the process
start, so a 2-second limit has passed, or nearly, before training starts). Nothing asserts on wall time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from itertools import count
from pathlib import Path

import pytest
import torch

import ssmbench
from ssmbench.errors import ConfigError
from ssmbench.harness import evaluation
from ssmbench.harness.config.run_config import RunConfig
from ssmbench.harness.runtime import time_limit
from ssmbench.harness.runtime.time_limit import (
    Budget,
    Deadline,
    TimeLimitReached,
    format_duration,
    parse_duration,
)
from ssmbench.harness.suites import SuiteTimeLimit, run_suite, suite_dir
from support import run_main

IMPORTED_AT = time.monotonic()
"""When this module was imported: after this process started (pytest's and torch's imports lie between)."""

TINY = {"L": 32, "model.d_model": 8, "model.d_state": 32, "train.steps": 40, "train.eval_every": 10,
        "train.log_every": 5, "eval.val_samples": 16, "eval.test_samples": 16, "eval.metric_batch_size": 4,
        "data.workers": 0}
CLI_TINY = [f"-o{k}={v}" for k, v in TINY.items() if k != "train.steps"] + ["-q"]


def ticking(limit: float) -> Deadline:
    """A deadline on a clock that reads one second later at every reading: deterministic, whatever the machine."""
    return Deadline(limit, clock=count().__next__)


def run(tmp_path, name, task="cumsum", **kw):
    return ssmbench.evaluate("dlr", task, overrides=TINY, out=tmp_path / name, quiet=True, **kw)


def weights(run_dir: Path, name: str = "last.pt") -> dict:
    return torch.load(run_dir / "checkpoints" / name, weights_only=True)["model"]


def same_weights(a: Path, b: Path, name: str = "last.pt") -> bool:
    wa, wb = weights(a, name), weights(b, name)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def log_rows(run_dir: Path) -> list[tuple]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["split"], r.get("loss"), r.get("mse")) for r in rows]


def ssmbench_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ssmbench")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, timeout=900,
                          env={**os.environ, "PYTHONSAFEPATH": "1"})


# ------------------------------------------------------------------------------------------------ DURATION values

@pytest.mark.parametrize("text, seconds", [("90s", 90), ("45m", 2700), ("4h", 14400), ("1h30m", 5400),
                                           ("1:30:00", 5400), ("30:00", 1800), ("5400", 5400), ("2.5", 2.5),
                                           ("1d2h", 93600), (" 2H ", 7200), (600, 600)])
def test_durations_read_as_seconds(text, seconds):
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["5x", "", "-3", "0", "0s", "1h1h", "30m1h", "1:75:00", "h", "1.5.2", "inf", True,
                                  "1:60", "0:60:00", "1:00:60"])
def test_bad_durations_are_config_errors_naming_the_option(text):
    with pytest.raises(ConfigError, match="^--time-limit: "):
        parse_duration(text)


def test_the_limit_is_a_setting_of_the_command_not_of_the_run():
    """`-o train.time_limit` takes the same DURATIONs and the same checks; it is never stored (config.json,
    checkpoints), so a run's digest is the same with any limit or none, and --resume may change it."""
    base = RunConfig(task="cumsum", task_config={"L": 32}, model="dlr")
    timed = base.with_overrides({"train.time_limit": "1h30m"}).validate()
    assert timed.train.time_limit == 5400
    assert "time_limit" not in timed.to_json()["train"]
    assert timed.digest() == base.digest()
    assert base.with_overrides({"train.time_limit": "none"}).train.time_limit is None
    with pytest.raises(ConfigError, match="^train.time_limit: cannot read 'soon'"):
        base.with_overrides({"train.time_limit": "soon"})
    with pytest.raises(ConfigError, match="^train.time_limit: must be a duration > 0"):
        base.with_overrides({"train.time_limit": -5})
    assert "train.time_limit" in evaluation.RESUMABLE_KEYS
    settings = {"overrides": {"L": 32}, "seed": 0}
    timed_settings = {"overrides": {"L": 32, "train.time_limit": 60}, "seed": 0}
    assert suite_dir("runs", "atomic", "dlr", timed_settings) == suite_dir("runs", "atomic", "dlr", settings)


# ---------------------------------------------------------------------------------------------- the stop decision

def test_the_deadline_counts_the_start_up_from_the_process_start(monkeypatch):
    """`ssmbench eval --time-limit` counts from the process start (imports, data building): the process start lies
    before this module's import, and an anchored deadline has less than its limit left."""
    assert time_limit.process_start() <= IMPORTED_AT
    monkeypatch.setattr(time_limit, "_anchor_at_process_start", True)
    assert Deadline(3600).left() <= 3600 - (time.monotonic() - IMPORTED_AT)
    monkeypatch.setattr(time_limit, "_anchor_at_process_start", False)
    assert Deadline(3600).left() > 3600 - (time.monotonic() - IMPORTED_AT)


@pytest.mark.parametrize("limit, slack", [(60, 5), (250, 5), (1000, 20), (1500, 30), (36000, 30), (4 * 86400, 30)])
def test_the_slack_is_two_percent_of_the_limit_between_5_and_30_seconds(limit, slack):
    assert Deadline(limit, clock=lambda: 0.0).slack == slack


def test_the_step_estimate_is_the_largest_recent_step_and_the_last_evaluation_is_budgeted():
    """A slow step among fast ones sets the estimate (not the latest one); the last step's evaluation counts even
    when the last step is no multiple of eval_every; the first step of a process (start-up) only until a second
    one is measured."""
    now = [0.0]
    deadline = Deadline(1000, clock=lambda: now[0])
    cfg = RunConfig(task="cumsum", task_config={"L": 32}, model="dlr").with_overrides(
        {"train.steps": 25, "train.eval_every": 10, "train.batch_size": 16, "eval.val_samples": 32,
         "eval.test_samples": 64})
    budget = Budget(deadline, cfg, state_bytes=0)
    for took in (9.0, 1.0, 4.0, 1.0, 1.0):  # the first (9 s) pays for start-up
        now[0] += took
        budget.boundary()
    assert budget.step == 4.0
    with budget.timed("eval"):
        now[0] += 30
    with budget.timed("save"):
        now[0] += 2
    plain = 3 * 4 + 2 + deadline.slack
    assert budget.need(22) == plain
    assert budget.need(24) == plain + 30 + 2  # step 25 is the last: its evaluation and checkpoint
    assert budget.need(19) == plain + 30 + 2


def test_a_limit_that_let_no_step_run_suggests_one_that_can(tmp_path):
    """Repeating a limit in which no step fitted would never make progress: the continue command gives one with room
    for the start-up and a step, and the hint says why; after progress, the same limit."""
    from ssmbench.harness.results.run_folder import RunFolder

    now = [0.0]
    deadline = Deadline(1, clock=lambda: now[0])
    now[0] = 3.0  # the start-up took 3 s
    cfg = RunConfig(task="cumsum", task_config={"L": 32}, model="dlr").with_overrides({"train.steps": 4})
    budget = Budget(deadline, cfg, state_bytes=0)
    exc = time_limit.reached(deadline, RunFolder(tmp_path / "run"), 0, 4, budget)
    assert exc.resume_command() == f"ssmbench eval --resume {tmp_path / 'run'} --time-limit 1m"
    assert "no step fitted in the 1s limit: the start-up took 3 s" in exc.hint and "no step is saved" in exc.message
    budget.boundary()
    exc = time_limit.reached(deadline, RunFolder(tmp_path / "run"), 1, 4, budget)
    assert exc.resume_command().endswith("--time-limit 1s") and exc.hint.startswith("continue with")
    assert time_limit.progress_limit(50, 20) == 180


def test_no_step_starts_whose_evaluation_would_run_past_the_deadline():
    """The budget: the next step fits only with time for its own evaluation and checkpoint (as measured so far),
    a checkpoint to stop after it, a few step times and the slack; after the last step, for the final scoring."""
    now = [0.0]
    deadline = Deadline(1000, clock=lambda: now[0])
    cfg = RunConfig(task="cumsum", task_config={"L": 32}, model="dlr").with_overrides(
        {"train.steps": 100, "train.eval_every": 10, "train.batch_size": 16, "eval.val_samples": 32,
         "eval.test_samples": 64})
    budget = Budget(deadline, cfg, state_bytes=0)
    # before anything is measured: one second to save (the prior for 0 bytes), evaluation from the step time
    assert budget.step == 0 and budget.save == 1.0 and budget.eval == 1.0
    for step in range(1, 11):  # steps take 1 s; step 10 evaluates (50 s) and saves (2 s)
        now[0] += 1
        if step == 10:
            with budget.timed("eval"):
                now[0] += 50
            with budget.timed("save"):
                now[0] += 2
        budget.boundary()
    assert (budget.step, budget.eval, budget.save) == (1, 50, 2)
    slack = deadline.slack  # 2 % of 1000 s = 20 s
    assert slack == 20
    plain = 3 * 1 + 2 + slack                # step 14 -> 15: the step (+ 2 in hand) and last.pt to stop after it
    due = plain + 50 + 2                     # step 19 -> 20: and its evaluation and checkpoint
    final = 50 * (1 + 64 / 32) + 2 + slack   # after step 100: val and test at the best checkpoint
    assert budget.need(14) == plain and budget.need(19) == due and budget.need(99) == due
    assert budget.need(100) == final
    now[0] = 1000 - plain                    # exactly `plain` seconds left
    assert budget.fits(14) and not budget.fits(19)
    now[0] += 1e-3
    assert not budget.fits(14)


# --------------------------------------------------------------------------------------------- single runs, in-process

def test_a_run_stops_at_its_limit_and_a_copied_folder_resumes_like_one_run(tmp_path):
    """The limit stops the run between steps: TimeLimitReached (exit 75) with last.pt at that step, no metrics.json.
    The folder, copied to another path (the original deleted), resumes there and ends with the weights, best
    checkpoint, log and scores of an uninterrupted run; nothing in it names the old path."""
    full = run(tmp_path, "full")
    with pytest.raises(TimeLimitReached) as caught:
        run(tmp_path, "cut", time_limit=ticking(60))
    exc = caught.value
    cut = tmp_path / "cut"
    assert exc.exit_code == 75 and 0 < exc.step < 40 and exc.steps == 40, exc.message
    assert exc.summary == f"time limit reached after step {exc.step} of 40"
    assert exc.resume_command() == f"ssmbench eval --resume {cut} --time-limit 1m"
    saved = torch.load(cut / "checkpoints" / "last.pt", weights_only=True)
    assert saved["state"]["step"] == exc.step
    assert not (cut / "metrics.json").exists()
    assert (cut / "config.json").read_text() == (full.run_dir / "config.json").read_text()  # the limit is not stored

    moved = tmp_path / "elsewhere" / "deeper" / "moved"
    shutil.copytree(cut, moved)
    shutil.rmtree(cut)
    for path in moved.rglob("*"):
        if path.is_file():
            assert str(tmp_path).encode() not in path.read_bytes(), path  # no absolute path in the folder
    done = evaluation.resume(moved, quiet=True, time_limit=Deadline(3600))
    assert same_weights(moved, full.run_dir) and same_weights(moved, full.run_dir, "best.pt")
    assert log_rows(moved) == log_rows(full.run_dir)
    assert done.metrics["test"] == full.metrics["test"] and done.metrics["steps"] == 40


def test_a_limit_reached_after_the_last_step_leaves_only_the_final_scoring(tmp_path, monkeypatch):
    """A deadline that allows every step but not the final scoring: last.pt at the last step, no metrics.json; the
    resume only scores."""
    from ssmbench.harness.results import loggers

    now = [0.0]
    deadline = Deadline(100, clock=lambda: now[0])  # nothing takes (fake) time until the last validation

    class Log:
        def log(self, record):  # then less than the slack is left
            if record["step"] == 40 and record["split"] == "val":
                now[0] = 100 - deadline.slack + 1

        def close(self):
            pass

    monkeypatch.setattr(loggers, "make_logger", lambda *a, **k: Log())
    with pytest.raises(TimeLimitReached) as caught:
        run(tmp_path, "cut", time_limit=deadline)
    assert caught.value.step == 40 and "final scoring is left" in caught.value.summary
    assert torch.load(tmp_path / "cut" / "checkpoints" / "last.pt", weights_only=True)["state"]["step"] == 40
    assert not (tmp_path / "cut" / "metrics.json").exists()
    done = evaluation.resume(tmp_path / "cut", quiet=True)
    assert done.metrics["steps"] == 40 and (tmp_path / "cut" / "metrics.json").exists()


def test_a_limit_spent_before_training_stops_before_the_optimiser_and_keeps_the_folder(tmp_path, monkeypatch):
    """Issue 37 (`--time-limit 1s` took 8.4 s to stop): a deadline already spent when training would start stops
    before the optimiser (whose first use imports torch._dynamo: seconds), the validation set and the data workers,
    saving nothing new; the folder stays (config.json, no last.pt) for the --resume the line prints."""
    def no_optimiser(*args, **kwargs):
        raise AssertionError("the optimiser was built")

    spent = Deadline(1, start=0.0, clock=lambda: 10.0)
    monkeypatch.setattr(torch.optim, "AdamW", no_optimiser)
    with pytest.raises(TimeLimitReached) as caught:
        run(tmp_path, "cut", time_limit=spent)
    exc, cut = caught.value, tmp_path / "cut"
    assert exc.step == 0 and exc.next_limit is not None and exc.next_limit >= 60
    assert (cut / "config.json").exists() and not (cut / "checkpoints" / "last.pt").exists()
    assert "no step is saved yet" in exc.message


# ------------------------------------------------------------------------------------------------- suites, in-process

def test_a_suite_stops_inside_a_task_and_the_same_call_continues_it(tmp_path):
    """The limit stops the first task mid-way: SuiteTimeLimit (exit 75), the second task not started; the same call
    without a limit resumes the first from its last.pt (ending like an uninterrupted run) and runs the second."""
    args = ("dlr", "shift,cumsum", evaluation.evaluate, evaluation.resume)
    kw = {"out": tmp_path / "suite", "overrides": TINY, "quiet": True}
    with pytest.raises(SuiteTimeLimit) as caught:
        run_suite(*args, time_limit=ticking(60), **kw)
    exc = caught.value
    assert exc.exit_code == 75 and 0 < exc.step < 40 and exc.suite == tmp_path / "suite"
    assert exc.summary.startswith(f"time limit reached after step {exc.step} of 40 of shift (suite ")
    shift = tmp_path / "suite" / "shift"
    assert (shift / "checkpoints" / "last.pt").exists() and not (shift / "metrics.json").exists()
    assert not (tmp_path / "suite" / "cumsum").exists()
    root, results = run_suite(*args, **kw)
    assert [r.run_dir.name for r in results] == ["shift", "cumsum"]
    alone = run(tmp_path, "shift-alone", task="shift")
    assert same_weights(shift, alone.run_dir) and results[0].metrics["test"] == alone.metrics["test"]


def test_a_suite_does_not_start_a_task_without_time_for_it(tmp_path):
    """When a task ends with too little time left for the next one's set-up and first checkpoint, the next is not
    started (no folder); the same call continues with it."""
    now = [0.0]
    deadline = Deadline(100, clock=lambda: now[0])

    def report(result):  # the first task took (fake) 95 of the 100 seconds
        now[0] = 95.0

    args = ("dlr", "shift,cumsum", evaluation.evaluate, evaluation.resume)
    kw = {"out": tmp_path / "suite", "overrides": TINY, "quiet": True}
    with pytest.raises(SuiteTimeLimit, match="time limit reached before cumsum .5 s left") as caught:
        run_suite(*args, time_limit=deadline, report=report, **kw)
    assert caught.value.exit_code == 75 and caught.value.suite == tmp_path / "suite"
    assert (tmp_path / "suite" / "shift" / "metrics.json").exists()
    assert not (tmp_path / "suite" / "cumsum").exists()
    root, results = run_suite(*args, **kw)
    assert [r.run_dir.name for r in results] == ["shift", "cumsum"]


# ------------------------------------------------------------------------------------------------ the command line

def test_cli_bad_duration_is_one_line_and_exit_2(tmp_path):
    for args in (["--time-limit", "5x"], ["--time-limit", "0"], ["-o", "train.time_limit=soon"]):
        result = run_main("eval", "--task", "cumsum", *args, "-q", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
        assert "time_limit" in result.stderr or "--time-limit" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_cli_time_limit_exits_75_and_resume_finishes(tmp_path):
    """A 2-second limit counted from the process start is spent by the start-up (whatever the machine): the run
    stops before its optimiser and data are built (issue 37: it took 8.4 s), exit 75, one line with a resume command
    whose limit can make progress (repeating 2 s never would) and a hint saying why; the folder stays for it, with
    no step saved; --json reports the stop. The resume finishes the run."""
    result = ssmbench_cli(tmp_path, "eval", "--task", "cumsum", *CLI_TINY, "-o", "train.steps=100000",
                          "--out", "run", "--time-limit", "2", "--json")
    assert result.returncode == 75, result.stderr
    assert "Traceback" not in result.stderr
    line = next(x for x in result.stderr.splitlines() if x.startswith("time limit reached"))
    assert re.search(r"of 100000; continue with: ssmbench eval --resume run --time-limit \d+m$", line), line
    hint = next(x for x in result.stderr.splitlines() if x.startswith("hint:"))
    assert "no step fitted in the 2s limit: the start-up took" in hint, hint
    out = json.loads(result.stdout)
    assert out["stopped"] == "time_limit" and out["exit_code"] == 75 and out["steps"] == 100000
    run_dir = tmp_path / "run"
    assert out["step"] == 0 and (run_dir / "config.json").exists()
    assert not (run_dir / "checkpoints" / "last.pt").exists() and not (run_dir / "metrics.json").exists()
    done = run_main("eval", "--resume", "run", "-o", "train.steps=2", "-q", "--time-limit", "1h", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((run_dir / "metrics.json").read_text())["steps"] == 2


def test_cli_suite_stops_and_the_same_command_continues(tmp_path):
    """A suite with a limit already (nearly) spent starts no task: exit 75 and the command to re-run; the same
    command without the limit finds the same suite folder (the limit, here given as -o, is not part of it) and runs
    the tasks (in this process: the re-run command is the stopped process's own argv, the rest is not)."""
    suite = ["eval", "--model", "dlr", "--task", "shift,cumsum", *CLI_TINY, "-o", "train.steps=4"]
    stopped = ssmbench_cli(tmp_path, *suite, "-o", "train.time_limit=2s")
    assert stopped.returncode == 75, stopped.stderr
    line = next(x for x in stopped.stderr.splitlines() if x.startswith("time limit reached"))
    assert "before shift" in line and line.endswith("-o train.time_limit=2s"), line
    assert "continue with: ssmbench eval --model dlr --task shift,cumsum" in line
    folders = list((tmp_path / "runs").iterdir())
    assert len(folders) == 1 and not (folders[0] / "shift").exists()
    done = run_main(*suite, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "runs").iterdir()) == folders
    assert (folders[0] / "shift" / "metrics.json").exists() and (folders[0] / "cumsum" / "metrics.json").exists()


def test_a_folder_task_run_copied_with_its_dataset_resumes_from_the_data_root(tmp_path, monkeypatch):
    """A folder task records its dataset folder's absolute path: when the run folder and the dataset are copied to
    another place (another machine) and the old path is gone, the resume finds the folder with the same dataset_id
    under the data root ($SSMBENCH_DATA) and ends like an uninterrupted run."""
    from ssmbench.data.make.generate import generate_dataset
    from ssmbench.task_config import resolve_config

    _, config, _ = resolve_config("pathfinder", size=32)
    data = generate_dataset("pathfinder", config, out=tmp_path / "a" / "data", n=40,
                            split={"train": 24, "val": 8, "test": 8}, samples_per_shard=8, quiet=True).path
    keys = {"model.d_model": 8, "model.n_layers": 1, "model.d_state": 16, "train.steps": 20, "train.warmup_steps": 2,
            "train.eval_every": 10, "train.log_every": 2, "train.batch_size": 4, "eval.test_samples": 8,
            "eval.batch_size": 4, "eval.metric_batch_size": 4, "data.workers": 0}
    evaluate = ssmbench.evaluate
    full = evaluate("dlr", "pathfinder", overrides=keys, data=data, out=tmp_path / "a" / "full", quiet=True)
    with pytest.raises(TimeLimitReached) as caught:
        evaluate("dlr", "pathfinder", overrides=keys, data=data, out=tmp_path / "a" / "cut", quiet=True,
                 time_limit=ticking(40))
    assert 0 < caught.value.step < 20
    shutil.copytree(tmp_path / "a" / "cut", tmp_path / "b" / "runs" / "cut")
    shutil.copytree(data, tmp_path / "b" / "data" / data.name)
    shutil.rmtree(tmp_path / "a" / "cut")
    shutil.rmtree(data)
    monkeypatch.setenv("SSMBENCH_DATA", str(tmp_path / "b" / "data"))
    done = evaluation.resume(tmp_path / "b" / "runs" / "cut", quiet=True)
    assert same_weights(done.run_dir, full.run_dir) and done.metrics["test"] == full.metrics["test"]
