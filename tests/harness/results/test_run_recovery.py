"""A killed or damaged run resumes at once, and a full disk while checkpointing is one line (issue 37).

* The run lock is a flock on `RUN/.lock`, which forked children would share: the data workers close their copy, so
  an `eval` killed with SIGKILL can be resumed at once (it was refused for ~7 s naming the dead pid). A stale holder
  is recognised by its state (dead, a zombie); a held flock is refused even when the file names no live process
  (two writers starting in the same instant).
* The temporaries a killed writer leaves are removed by the next lock holder; the previous `last.pt` is kept as
  `last.prev.pt` and used, with one line, when `last.pt` is damaged; a `metrics.jsonl` that vanished is a warning
  and is written again from the run's own records.
* ENOSPC while a checkpoint is written (torch says `RuntimeError: unexpected pos`) is `DiskFullError`: one line
  naming the folder and the bytes needed, exit 1, the old checkpoint intact.

The SIGKILL-then-resume test with real processes is in test_run_writers.py (it shares that file's helpers).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import torch

import ssmbench
from ssmbench.data.make.space import DiskFullError
from ssmbench.errors import ConfigError
from ssmbench.harness.evaluation import resume
from ssmbench.harness.results import checkpoints, run_folder
from ssmbench.harness.results.checkpoints import load_checkpoint, load_last, previous_of, save_checkpoint
from ssmbench.harness.results.run_folder import RunFolder, RunFolderBusy, default_run_dir, run_lock
from support import dead_pid, wait_for

TINY = {"L": 32, "model.d_model": 8, "model.d_state": 32, "train.steps": 4, "train.eval_every": 2,
        "train.log_every": 1, "eval.val_samples": 8, "eval.test_samples": 8, "eval.metric_batch_size": 4,
        "data.workers": 0}
CEILING = 120  # seconds to wait for another process's file: generous, never a sleep


# ---------------------------------------------------------------------------------------------------- the lock
def test_forked_children_do_not_keep_the_run_lock(tmp_path, capsys):
    """A holder that forked a child (as the data workers are) and is killed with SIGKILL: its lock is free at once,
    although the child still runs; the next writer takes it over with a note."""
    folder, ready = tmp_path / "run", tmp_path / "ready"
    code = ("import multiprocessing as mp, os, sys, time\n"
            "from pathlib import Path\n"
            "from ssmbench.harness.results.run_folder import run_lock\n"
            f"with run_lock({str(folder)!r}, command='holder'):\n"
            "    child = mp.get_context('fork').Process(target=time.sleep, args=(120,), daemon=True)\n"
            "    child.start()\n"
            f"    Path({str(ready)!r}).write_text(str(child.pid))\n"
            "    sys.stdin.read()\n")
    log = open(tmp_path / "holder.err", "w")  # not a pipe: the orphaned child would keep it open
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stderr=log)
    child = None
    try:
        wait_for(ready, holder)
        child = int(ready.read_text())
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=CEILING)
        os.kill(child, 0)  # the forked child outlives its parent (as orphaned data workers do for seconds)
        with run_lock(folder):
            assert json.loads((folder / ".lock").read_text())["pid"] == os.getpid()
        err = capsys.readouterr().err
        assert f"named pid {holder.pid} on {socket.gethostname()}" in err and "no longer runs" in err
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=CEILING)
        holder.stdin.close()
        log.close()
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_held_flock_is_refused_even_when_the_file_names_no_live_process(tmp_path):
    """Two writers starting in the same instant: the first holds the flock but has not written its details yet
    (the file is empty, or still names the dead process it takes over from). The second is refused: the flock,
    not the recorded pid, decides."""
    import fcntl

    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / ".lock"
    for body in ("", json.dumps({"pid": dead_pid(), "host": socket.gethostname()})):
        path.write_text(body)
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another open file: conflicts even in this process
            with pytest.raises(RunFolderBusy) as caught:
                with run_lock(folder):
                    pass
            assert caught.value.exit_code == 2
            expected = "wrote no details yet" if not body else "no longer runs: another process is taking it over"
            assert expected in caught.value.message, caught.value.message
        finally:
            os.close(fd)
    path.write_text(json.dumps({"pid": "not a number", "host": socket.gethostname()}))  # a damaged lock file
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RunFolderBusy):  # one line, not a ValueError traceback
            with run_lock(folder):
                pass
    finally:
        os.close(fd)
    with run_lock(folder):  # free again
        pass


def test_a_killed_holder_not_yet_reaped_no_longer_runs(tmp_path, capsys):
    """A SIGKILLed holder whose parent has not reaped it yet (a zombie: `kill(pid, 0)` still succeeds) is stale."""
    zombie = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        start = run_folder._process_start(zombie.pid)
        zombie.send_signal(signal.SIGKILL)
        while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            os.sched_yield()
        folder = tmp_path / "run"
        folder.mkdir()
        (folder / ".lock").write_text(json.dumps({"pid": zombie.pid, "pid_start": start,
                                                   "host": socket.gethostname()}))
        with run_lock(folder):
            pass
        assert f"named pid {zombie.pid}" in capsys.readouterr().err
    finally:
        zombie.communicate(timeout=CEILING)


def test_taking_the_lock_removes_a_killed_writers_temporaries(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.create()
    left = [run.path / "checkpoints" / "last.pt.tmp.0123abcd", run.path / "metrics.jsonl.tmp.4567",
            run.path / "config.json.tmp.89ef"]
    for path in left:
        path.write_bytes(b"half")
    keep = run.path / "checkpoints" / "last.pt"
    keep.write_bytes(b"x")
    with run_lock(run.path):
        assert not any(path.exists() for path in left) and keep.exists()


# ------------------------------------------------------------------------------------------------- the run's log
def test_truncate_log_keeps_the_checkpoint_steps_own_lines(tmp_path):
    """A resume from the checkpoint of step 4 keeps step 4's train and val lines (written before that checkpoint)
    and drops the later ones, which the resumed run writes again."""
    run = RunFolder(tmp_path / "run")
    for step in (2, 4, 6):
        run.log({"step": step, "split": "train", "loss": 1.0 / step})
        run.log({"step": step, "split": "val", "r2": 0.1 * step})
    run.truncate_log(4)
    assert [(r["step"], r["split"]) for r in run.read_log()] == [(2, "train"), (2, "val"), (4, "train"), (4, "val")]


def test_a_metrics_log_that_vanished_is_a_warning_and_is_written_again(tmp_path, capsys):
    run = RunFolder(tmp_path / "run")
    history = [{"step": 1, "split": "train", "loss": 1.0}, {"step": 2, "split": "train", "loss": 0.5}]
    run.log(history[0], history[:1])
    run.log_path.unlink()  # deleted by hand mid-run
    run.log(history[1], history)
    assert run.read_log() == history
    err = capsys.readouterr().err
    assert "metrics.jsonl vanished during the run" in err and "written again from the run's own records" in err
    run.log_path.unlink()
    run.log({"step": 3, "split": "train", "loss": 0.25})  # no history to rewrite from: said so
    assert "the lines before this one are lost" in capsys.readouterr().err


def test_a_torn_last_log_line_is_left_out_and_a_full_disk_while_logging_is_one_line(tmp_path, monkeypatch):
    run = RunFolder(tmp_path / "run")
    run.log({"step": 1, "split": "train", "loss": 1.0})
    with open(run.log_path, "a") as f:
        f.write('{"step": 2, "spl')  # killed, or the disk filled, mid-line
    assert run.read_log() == [{"step": 1, "split": "train", "loss": 1.0}]
    run.truncate_log(1)
    assert run.log_path.read_text() == '{"loss": 1.0, "split": "train", "step": 1}\n'  # rewritten without it
    monkeypatch.setattr(run_folder, "open", failing_open(after=0), raising=False)
    with pytest.raises(DiskFullError, match=f"^no space left on device while writing {run.log_path}: .*--resume"):
        run.log({"step": 2, "split": "train", "loss": 0.5})


# ------------------------------------------------------------------------------------------------- checkpoints
class Payload:
    """An arbitrary object: pickled into a checkpoint, loading it could run code."""


def test_a_checkpoint_carrying_a_pickled_object_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "extra": Payload()}, path)
    with pytest.raises(ConfigError, match="not a readable ssmbench checkpoint"):
        load_checkpoint(path)


def test_the_previous_last_checkpoint_is_kept_and_used_when_last_is_damaged(tmp_path, capsys):
    last = tmp_path / "checkpoints" / "last.pt"
    for step in (1, 2):
        save_checkpoint(last, {"state": {"step": step}}, keep_previous=True)
    assert previous_of(last).name == "last.prev.pt"
    assert load_checkpoint(previous_of(last))["state"]["step"] == 1
    assert load_last(last)["state"]["step"] == 2 and capsys.readouterr().err == ""
    last.write_bytes(last.read_bytes()[:40])  # truncated
    assert load_last(last)["state"]["step"] == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "last.pt is damaged" in err[0] and "last.prev.pt (step 1)" in err[0], err
    assert load_checkpoint(last)["state"]["step"] == 1  # put back in place
    previous_of(last).unlink()
    last.write_bytes(b"")
    with pytest.raises(ConfigError, match="not a readable ssmbench checkpoint"):
        load_last(last)


def test_a_resume_from_a_truncated_last_pt_continues_from_the_previous_one(tmp_path, capsys):
    """A finished 4-step run (checkpoints at steps 2 and 4) whose last.pt is truncated and whose metrics.jsonl was
    deleted: extending it to 6 steps continues from step 2 (one line says so), rewrites the log from the
    checkpoint's records (a warning) and trains steps 3-6."""
    out = tmp_path / "run"
    ssmbench.evaluate("dlr", "cumsum", overrides=TINY, out=out, quiet=True)
    last = out / "checkpoints" / "last.pt"
    assert load_checkpoint(previous_of(last))["state"]["step"] == 2
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    (out / "metrics.jsonl").unlink()
    capsys.readouterr()
    done = resume(out, overrides={"train.steps": 6}, quiet=True)
    err = capsys.readouterr().err
    assert "last.pt is damaged" in err and "continuing from the previous checkpoint last.prev.pt (step 2)" in err
    assert "metrics.jsonl vanished" in err
    assert done.metrics["steps"] == 6
    steps = [(r["step"], r["split"]) for r in RunFolder(out).read_log()]
    assert steps == [(1, "train"), (2, "train"), (2, "val"), (3, "train"), (4, "train"), (4, "val"), (5, "train"),
                     (6, "train"), (6, "val")]


# -------------------------------------------------------------------------------------------- a full disk (item 2)
def failing_open(after: int, code: int = errno.ENOSPC):
    """`open` whose files raise OSError(code) once `after` bytes were written (a disk filling up mid-write)."""
    real = open

    class Full:
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, data):
            self.n += len(data)
            if self.n > after:
                raise OSError(code, os.strerror(code))
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    return lambda *a, **k: Full(real(*a, **k))


def test_a_full_disk_while_checkpointing_is_one_line_and_loses_nothing(tmp_path, monkeypatch):
    last = tmp_path / "run" / "checkpoints" / "last.pt"
    big = {"model": {"w": torch.zeros(64, 1024)}, "state": {"step": 1}}  # 256 KiB of tensors
    save_checkpoint(last, big, keep_previous=True)
    save_checkpoint(last, {**big, "state": {"step": 2}}, keep_previous=True)
    monkeypatch.setattr(checkpoints, "open", failing_open(after=4096), raising=False)
    with pytest.raises(DiskFullError) as caught:  # torch turns the OSError into "unexpected pos"
        save_checkpoint(last, {**big, "state": {"step": 3}}, keep_previous=True)
    exc = caught.value
    assert exc.exit_code == 1 and exc.errno == errno.ENOSPC and "\n" not in exc.message
    assert exc.message.startswith(f"no space left on device while writing {last}: it needs about 256")
    assert f"continue with `ssmbench eval --resume {tmp_path / 'run'}`" in exc.message
    assert "the last.pt saved before is intact" in exc.message
    monkeypatch.undo()
    assert load_checkpoint(last)["state"]["step"] == 2 and load_checkpoint(previous_of(last))["state"]["step"] == 1
    assert {p.name for p in last.parent.iterdir()} == {"last.pt", "last.prev.pt"}  # no temporary left

    def fsync_fails(fd):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(checkpoints.os, "fsync", fsync_fails)
    with pytest.raises(DiskFullError, match="^disk quota exceeded while writing"):
        save_checkpoint(last, {**big, "state": {"step": 3}}, keep_previous=True)
    monkeypatch.undo()
    assert load_checkpoint(last)["state"]["step"] == 2


def test_a_full_disk_during_eval_stops_with_the_line_and_the_run_resumes(tmp_path, monkeypatch):
    """In a real run: the disk fills while the step-4 last.pt is written. `evaluate` raises DiskFullError; last.pt
    still holds step 2, and the resume (space freed) finishes the run."""
    real, writes = open, []

    def full_on_second_last(path, *a, **k):
        if "last.pt.tmp." in str(path):
            writes.append(path)
            if len(writes) == 2:
                return failing_open(after=100)(path, *a, **k)
        return real(path, *a, **k)

    monkeypatch.setattr(checkpoints, "open", full_on_second_last, raising=False)
    out = tmp_path / "run"
    with pytest.raises(DiskFullError, match=f"while writing {out / 'checkpoints' / 'last.pt'}"):
        ssmbench.evaluate("dlr", "cumsum", overrides=TINY, out=out, quiet=True)
    monkeypatch.undo()
    assert load_checkpoint(out / "checkpoints" / "last.pt")["state"]["step"] == 2
    assert not list(out.rglob("*.tmp.*")) and not (out / "metrics.json").exists()
    assert resume(out, quiet=True).metrics["steps"] == 4


def test_a_checkpoint_on_a_full_tiny_filesystem_is_one_line(tmp_path):
    """The same on a real 1 MiB tmpfs, where the machine allows mounting one (root); skipped elsewhere."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    try:
        last = mount / "run" / "checkpoints" / "last.pt"
        save_checkpoint(last, {"state": {"step": 1}, "w": torch.zeros(1000)}, keep_previous=True)
        with pytest.raises(DiskFullError, match="^no space left on device while writing .*needs about 2.0 MiB"):
            save_checkpoint(last, {"state": {"step": 2}, "w": torch.zeros(512, 1024)}, keep_previous=True)
        assert load_checkpoint(last)["state"]["step"] == 1
        assert [p.name for p in last.parent.iterdir()] == ["last.pt"]
    finally:
        subprocess.run(["umount", str(mount)], check=False)


# ---------------------------------------------------------------------------------------------- default_run_dir
def test_default_run_dirs_started_in_the_same_second_are_kept_apart(tmp_path, monkeypatch):
    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)

    monkeypatch.setattr(run_folder, "datetime", Frozen)
    made = []
    for _ in range(3):
        path = default_run_dir(tmp_path, "cumsum", "pkg.mod:My/Mixer")
        path.mkdir()
        made.append(path.name)
    base = "cumsum-pkg-mod-My-Mixer-20260102T030405Z"
    assert made == [base, f"{base}-2", f"{base}-3"]
