"""One writer per run folder, and folders a SIGKILL leaves behind (issue 26).

* A second `eval` or `--resume` of a folder that another process writes is refused in one line naming the holder
  (pid, host), exit 2; before, it trained on in the same folder and altered a finished run.
* `--resume` with an option that defines a run (--model, --task, --preset, --seed, -o model.*, ...) is a usage error;
  before, `--resume RUN --model s4 --task shift` trained the run's own DLR cumsum and exited 0.
* A run killed before its first checkpoint (config.json, no last.pt) starts again from step 0 with a note, under
  `--resume` and when a suite meets it again; before, both exited 2 and the folder had to be deleted by hand. The lock
  file a dead process left is taken over with a note; one naming another host is refused.

Processes are synchronised on files appearing, with generous ceilings; no test sleeps for a fixed time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

import ssmbench
from ssmbench.harness.evaluation import resume
from ssmbench.harness.results.run_folder import RunFolderBusy, _process_start, run_lock
from support import dead_pid, run_main, wait_for

TINY = {"L": 32, "model.d_model": 8, "model.d_state": 32, "train.steps": 4, "train.eval_every": 2,
        "train.log_every": 1, "eval.val_samples": 8, "eval.test_samples": 8, "eval.metric_batch_size": 4,
        "data.workers": 0}
CEILING = 600  # seconds to wait for another process's file: generous, never a sleep


def one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    first = result.stderr.splitlines()[0]
    assert "Traceback" not in result.stderr and first.startswith(("error:", "invalid option:")), result.stderr
    for fragment in fragments:
        assert fragment in first, result.stderr
    return first


def tiny_args(out: Path, *extra: str) -> list[str]:
    args = ["eval", "--model", "dlr", "--task", "cumsum", "--out", str(out), "-q"]
    for key, value in TINY.items():
        args += ["-o", f"{key}={value}"]
    return [*args, *extra]


# ----------------------------------------------------------------------------------------- the lock, in one process
def test_a_held_run_folder_is_refused_naming_its_holder(tmp_path):
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from ssmbench.harness.results.run_folder import run_lock\n"
         f"with run_lock({str(tmp_path / 'run')!r}, command='the holder'):\n"
         f"    Path({str(ready)!r}).touch(); sys.stdin.read()"],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(ready, holder)
        with pytest.raises(RunFolderBusy) as caught:
            with run_lock(tmp_path / "run"):
                pass
        assert caught.value.exit_code == 2
        assert f"pid {holder.pid} on {socket.gethostname()}" in caught.value.message
        assert "(the holder)" in caught.value.message
    finally:
        _, err = holder.communicate(input="", timeout=CEILING)  # closes its stdin: it releases the lock and ends
    assert holder.returncode == 0, err
    assert not (tmp_path / "run" / ".lock").exists()  # released and removed
    with run_lock(tmp_path / "run"):  # free again, without a note
        body = json.loads((tmp_path / "run" / ".lock").read_text())
        assert body["pid"] == os.getpid() and body["host"] == socket.gethostname() and body["started"]
        with run_lock(tmp_path / "run"):  # nested use in the same process
            pass
        assert (tmp_path / "run" / ".lock").exists()
    assert not (tmp_path / "run" / ".lock").exists()


def test_a_lock_file_left_by_a_dead_process_is_taken_over_with_a_note(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    pid = dead_pid()
    (folder / ".lock").write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": "then"}))
    with run_lock(folder):
        assert json.loads((folder / ".lock").read_text())["pid"] == os.getpid()
    err = capsys.readouterr().err
    assert f"named pid {pid} on {socket.gethostname()}" in err and "no longer runs" in err
    assert len(err.strip().splitlines()) == 1


def test_a_lock_file_naming_a_running_process_or_another_host_is_refused(tmp_path):
    """The recorded holder is checked even when the flock is free (a file system without working locks): a live
    pid of this host is refused; so is any other host, with how to remove the file."""
    folder = tmp_path / "run"
    folder.mkdir()
    alive = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        (folder / ".lock").write_text(json.dumps({"pid": alive.pid, "pid_start": _process_start(alive.pid),
                                                  "host": socket.gethostname()}))
        with pytest.raises(RunFolderBusy, match=f"pid {alive.pid} on "):
            with run_lock(folder):
                pass
    finally:
        alive.stdin.close()
        alive.wait(timeout=CEILING)
    (folder / ".lock").write_text(json.dumps({"pid": 4242, "host": "elsewhere.example", "started": "then"}))
    with pytest.raises(RunFolderBusy) as caught:
        with run_lock(folder):
            pass
    assert "pid 4242 on elsewhere.example" in caught.value.message and "another machine" in caught.value.message
    assert f"delete {folder / '.lock'}" in caught.value.hint
    assert json.loads((folder / ".lock").read_text())["host"] == "elsewhere.example"  # left as it was


# ------------------------------------------------------------------------------------------ real processes, SIGKILL
def test_a_second_writer_is_refused_and_a_run_killed_before_its_first_checkpoint_starts_again(tmp_path):
    """A: a real training run that checkpoints only at its end (10^7 steps: it never gets there). While A trains,
    `--resume` and the same `eval --out` are refused naming A's pid; `--resume --model s4 --task shift` is a usage
    error. After SIGKILL, A's folder holds config.json, no last.pt and A's lock file: `--resume` takes the lock over
    and starts the run again from step 0 (config unchanged) to a finished run."""
    run = tmp_path / "run"
    endless = ["-o", "train.steps=10000000", "-o", "train.eval_every=10000000", "-o", "train.log_every=10000000"]
    a = subprocess.Popen([sys.executable, "-m", "ssmbench", *tiny_args(run, *endless)], stderr=subprocess.PIPE,
                         text=True, cwd=tempfile.gettempdir(), env={**os.environ, "PYTHONSAFEPATH": "1"})
    try:
        wait_for(run / "config.json", a)  # written under A's lock
        # (each command below would finish quickly if it were let in: no test waits on an endless run)
        line = one_line_error(run_main("eval", "--resume", str(run), "-o", "train.steps=4"),
                              f"pid {a.pid} on {socket.gethostname()}")
        assert "being written by another process" in line
        one_line_error(run_main(*tiny_args(run)), f"pid {a.pid}")
        one_line_error(run_main("eval", "--resume", str(run), "--model", "s4", "--task", "shift"), "--model",
                       "not with --resume")
        assert a.poll() is None  # still training: nothing above stopped or joined it
    finally:
        a.send_signal(signal.SIGKILL)
        a.communicate(timeout=CEILING)
    assert (run / "config.json").exists() and not (run / "checkpoints" / "last.pt").exists()
    assert json.loads((run / ".lock").read_text())["pid"] == a.pid  # what SIGKILL leaves
    with open(run / "metrics.jsonl", "a") as log:  # a loss line of the killed attempt (its log_every kept it quiet)
        log.write(json.dumps({"step": 7, "split": "train", "loss": 1.0}) + "\n")

    again = run_main("eval", "--resume", str(run), "-o", "train.steps=4")
    assert again.returncode == 0, again.stderr
    assert f"named pid {a.pid}" in again.stderr and "no longer runs" in again.stderr
    assert "starting it again from step 0" in again.stderr and "Traceback" not in again.stderr
    metrics = json.loads((run / "metrics.json").read_text())
    config = json.loads((run / "config.json").read_text())
    assert config["train"]["steps"] == 4 and config["model"] == "dlr" and config["task"] == "cumsum"
    assert metrics["test"]["n"] > 0 and not (run / ".lock").exists()
    log = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["split"]) for r in log] == [(4, "train"), (4, "val")]  # the killed attempt's line is gone


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            pass
    return found


def test_a_run_killed_with_sigkill_resumes_at_once(tmp_path):
    """Issue 37: an `eval` with forked data workers, killed with SIGKILL mid-run, then `--resume` at once. Its
    workers outlive it for seconds and used to hold the lock ("being written by another process: pid N", N dead);
    now the resume takes the lock over with a note, removes the temporary a kill during a checkpoint leaves, and
    finishes from the last checkpoint."""
    run = tmp_path / "run"
    endless = ["-o", "train.steps=10000000", "-o", "train.eval_every=10000000", "-o", "train.log_every=10000000",
               "-o", "train.checkpoint_every=2", "-o", "data.workers=2"]
    a = subprocess.Popen([sys.executable, "-m", "ssmbench", *tiny_args(run, *endless)], stderr=subprocess.DEVNULL,
                         cwd=tempfile.gettempdir(), env={**os.environ, "PYTHONSAFEPATH": "1"})
    workers: list[int] = []
    try:
        wait_for(run / "checkpoints" / "last.prev.pt", a)  # two checkpoints written: it trains, its workers run
        workers = children_of(a.pid)
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=CEILING)
        assert workers and any(Path(f"/proc/{w}").exists() for w in workers)  # orphaned, still there
        stale = run / "checkpoints" / "last.pt.tmp.0123456789abcdef"
        stale.write_bytes(b"half a checkpoint")  # what a kill during torch.save leaves
        reached = torch.load(run / "checkpoints" / "last.pt", weights_only=True)["state"]["step"]
        again = run_main("eval", "--resume", str(run), "-o", f"train.steps={reached + 2}", "-o", "data.workers=2")
    finally:
        if a.poll() is None:
            a.kill()
            a.wait(timeout=CEILING)
        for w in workers:
            try:
                os.kill(w, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert again.returncode == 0, again.stderr
    assert "being written by another process" not in again.stderr and "Traceback" not in again.stderr
    assert f"named pid {a.pid}" in again.stderr and "no longer runs" in again.stderr
    assert not stale.exists() and not list(run.rglob("*.tmp.*")) and not (run / ".lock").exists()
    assert json.loads((run / "metrics.json").read_text())["steps"] == reached + 2


# -------------------------------------------------------------------------------------------------- --resume options
@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "run"
    ssmbench.evaluate("dlr", "cumsum", overrides=TINY, out=out, quiet=True)
    return out


@pytest.mark.parametrize("args, named", [
    (["--model", "s4"], "--model"), (["--model", "dlr"], "--model"), (["--task", "shift"], "--task"),
    (["--preset", "paper"], "--preset"), (["--seed", "1"], "--seed"), (["--length", "64"], "--length"),
    (["--precision", "bf16"], "--precision"), (["--out", "elsewhere"], "--out"), (["--seeds", "0,1"], "--seeds"),
    (["-o", "model.d_model=4"], "model.d_model"), (["-o", "L=64"], "L"), (["-o", "train.lr=1"], "train.lr"),
    (["--log-samples"], "--log-samples"),
])
def test_resume_with_a_run_defining_option_is_a_usage_error(finished, args, named):
    first = one_line_error(run_main("eval", "--resume", str(finished), *args), named)
    assert "--resume" in first and ("its own config" in first or "cannot change on --resume" in first)


def test_resume_takes_the_options_the_readme_allows(finished):
    """-o train.steps, --time-limit, --device, -q, -o data.workers pass the option check: the refusal is the finished
    run's own ("already finished"), not an option's."""
    result = run_main("eval", "--resume", str(finished), "-o", "train.steps=4", "--time-limit", "1h", "--device", "cpu",
                 "-q", "-o", "data.workers=1", "-o", "hardware.threads=1")
    one_line_error(result, "has already finished (4 steps)")


def test_resume_never_cuts_a_run_below_the_step_it_reached(finished, tmp_path):
    """A run stopped at step 4 (here: a finished one whose metrics.json is gone): -o train.steps=2 is refused, naming
    the step reached; it was once scored at once and recorded as a 2-step run. The configured steps still finish."""
    import shutil

    stopped = tmp_path / "stopped"
    shutil.copytree(finished, stopped)
    (stopped / "metrics.json").unlink()
    first = one_line_error(run_main("eval", "--resume", str(stopped), "-o", "train.steps=2"), "train.steps")
    assert "below the step" in first and "(4)" in first
    assert not (stopped / "metrics.json").exists()
    done = run_main("eval", "--resume", str(stopped), "-o", "train.steps=4", "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads((stopped / "metrics.json").read_text())["steps"] == 4


# ------------------------------------------------------------------------------------------------------------- suites
def test_a_suite_restarts_a_task_folder_that_saved_no_step(tmp_path):
    """The state a SIGKILL before cumsum's first checkpoint leaves (config.json, a log line, a best.pt, no last.pt,
    the dead process's lock file): the same suite command finishes it, with the scores of the uninterrupted suite.
    The same state under another config is refused, naming the key that differs."""
    args = ["eval", "--model", "dlr", "--task", "shift,cumsum", "--out", str(tmp_path / "suite")]  # progress lines
    for key, value in TINY.items():
        args += ["-o", f"{key}={value}"]
    first = run_main(*args)
    assert first.returncode == 0, first.stderr
    task = tmp_path / "suite" / "cumsum"
    scores = json.loads((task / "metrics.json").read_text())["test"]
    weights = torch.load(task / "checkpoints" / "last.pt", weights_only=True)["model"]
    (task / "metrics.json").unlink()
    (task / "checkpoints" / "last.pt").unlink()
    (task / "metrics.jsonl").write_text(json.dumps({"step": 1, "split": "train", "loss": 1.0}) + "\n")
    (task / ".lock").write_text(json.dumps({"pid": dead_pid(), "host": socket.gethostname()}))

    again = run_main(*args)
    assert again.returncode == 0, again.stderr
    assert "cumsum: starting again (it saved no step before it stopped)" in again.stderr
    assert "starting it again from step 0" in again.stderr
    assert json.loads((task / "metrics.json").read_text())["test"] == scores
    restarted = torch.load(task / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(weights[k], restarted[k]) for k in weights)
    assert [json.loads(line)["step"] for line in (task / "metrics.jsonl").read_text().splitlines()][:2] == [1, 2]

    (task / "metrics.json").unlink()
    (task / "checkpoints" / "last.pt").unlink()
    config = json.loads((task / "config.json").read_text())
    config["train"]["lr"] = 0.5
    (task / "config.json").write_text(json.dumps(config))
    one_line_error(run_main(*args, "-q"), f"{task} holds another run that saved no step (train.lr: 0.5 there, 0.0001 here)")


def test_an_out_folder_holding_a_saved_run_is_still_refused(finished, tmp_path):
    one_line_error(run_main(*tiny_args(finished)), "already holds a run")
    with pytest.raises(ssmbench.errors.ConfigError, match="already holds a run"):
        ssmbench.evaluate("dlr", "cumsum", overrides=TINY, out=finished, quiet=True)


def test_resume_of_a_damaged_config_without_a_saved_step_says_what_to_do(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text('{"task": "cumsum", "model": ')
    with pytest.raises(ssmbench.errors.ConfigError, match="no step was saved: delete the folder and start the run"):
        resume(run)
