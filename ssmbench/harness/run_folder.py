"""The run folder: config.json, metrics.jsonl, metrics.json, checkpoints/{last,best}.pt, plots/.

Every JSON file and checkpoint is written to a temporary name, fsynced and renamed, so a crash never leaves a
half-written file under the final name. `metrics.json` appears only when a run has finished. Checkpoints hold
only tensors and plain Python values, so they load with `torch.load(..., weights_only=True)`.

One process writes a run folder at a time (`run_lock`): `RUN/.lock` is held with `flock` while a run trains or
resumes there and names its holder (pid, host, start time, command); a second writer is refused in one line naming
it. The kernel drops the lock of a process that dies, however it dies, so the file a SIGKILL leaves behind is taken
over with a note (after checking that its pid is gone); one naming another host is refused with how to remove it.

Example:
    >>> import tempfile, pathlib
    >>> run = RunFolder(pathlib.Path(tempfile.mkdtemp()) / "cumsum-dlr")
    >>> run.write_config({"task": "cumsum"}); run.log({"step": 10, "split": "val", "r2": 0.5})
    >>> run.read_config(), [r["step"] for r in run.read_log()], run.finished
    ({'task': 'cumsum'}, [10], False)
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..data.folder.atomic import atomic_write_json
from ..errors import ConfigError, SsmbenchError
from ..plain import json_plain

LOCK_NAME = ".lock"


def default_run_dir(root: str | Path, task: str, model: str) -> Path:
    """runs/<task>-<model>-<UTC timestamp> (a suffix keeps two runs started in the same second apart)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    safe_model = model.replace(":", "-").replace("/", "-").replace(".", "-")
    base = Path(root) / f"{task}-{safe_model}-{stamp}"
    path, k = base, 1
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


class RunFolder:
    """Paths and atomic writers of one run folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    config_path = property(lambda self: self.path / "config.json")
    log_path = property(lambda self: self.path / "metrics.jsonl")
    metrics_path = property(lambda self: self.path / "metrics.json")
    last = property(lambda self: self.path / "checkpoints" / "last.pt")
    best = property(lambda self: self.path / "checkpoints" / "best.pt")
    plots = property(lambda self: self.path / "plots")

    @property
    def finished(self) -> bool:
        return self.metrics_path.exists()

    def create(self) -> None:
        try:
            (self.path / "checkpoints").mkdir(parents=True, exist_ok=True)
            self.plots.mkdir(exist_ok=True)
        except OSError as exc:
            raise ConfigError("--out", f"cannot create the run folder {self.path}: {exc.strerror}") from None

    def write_config(self, config: dict[str, Any]) -> None:
        atomic_write_json(self.config_path, config)

    def read_config(self) -> dict[str, Any]:
        return json.loads(self.config_path.read_text())

    def log(self, record: dict[str, Any]) -> None:
        """Append one line to metrics.jsonl (flushed and fsynced: a preempted run keeps its history)."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as f:
            f.write(json.dumps(json_plain(record), sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read_log(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]

    def truncate_log(self, step: int) -> None:
        """Drop log lines after `step` (a resumed run repeats the steps after its last checkpoint)."""
        keep = [r for r in self.read_log() if r.get("step", 0) <= step]
        tmp = self.log_path.with_name(f"metrics.jsonl.tmp.{uuid.uuid4().hex}")
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in keep))
        os.replace(tmp, self.log_path)

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        atomic_write_json(self.metrics_path, json_plain(metrics))

    def clear_unsaved(self) -> None:
        """Before a run that saved no step starts again from step 0: drop what its first attempt wrote after
        config.json (log lines, a best.pt written before the first last.pt, plots, predictions, temporary files)."""
        import shutil

        for path in (self.log_path, self.best, self.path / "metrics.previous.json"):
            path.unlink(missing_ok=True)
        for folder in (self.plots, self.path / "predictions"):
            shutil.rmtree(folder, ignore_errors=True)
        for tmp in [*self.path.glob("*.tmp.*"), *self.path.glob("checkpoints/*.tmp.*")]:
            tmp.unlink(missing_ok=True)


class RunFolderBusy(SsmbenchError):
    """Another process writes this run folder (exit 2)."""

    exit_code = 2


_HELD: dict[str, list[Any]] = {}
"""Run folders this process holds: resolved path -> [open lock file descriptor, nesting depth]."""


def _process_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (/proc/PID/stat field 22), None when unknown:
    with the pid it names one process, even after the pid is reused."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _running(pid: int, start: str | None) -> bool:
    """Whether the process `pid` (started at `start`, when recorded) still runs on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    now = _process_start(pid)
    return start is None or now is None or now == start


def _holder_text(holder: dict[str, Any]) -> str:
    pid, host = holder.get("pid", "?"), holder.get("host", "?")
    since = f" since {holder['started']}" if holder.get("started") else ""
    command = f" ({holder['command']})" if holder.get("command") else ""
    return f"pid {pid} on {host}{since}{command}"


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 65536, 0)
        holder = json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _lock_fd(path: Path) -> tuple[int, bool]:
    """An open descriptor of `path` with an exclusive flock on it (True), or without one on a file system that has
    no locks (False); RunFolderBusy naming the holder when another process holds it."""
    import errno
    import fcntl

    for _ in range(100):  # a holder that releases unlinks the file: lock the one that is at the path now
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                holder = _read_holder(fd)
                os.close(fd)
                raise RunFolderBusy(f"{path.parent} is being written by another process: "
                                    f"{_holder_text(holder) if holder else 'its holder wrote no details yet'}",
                                    "one process writes a run folder at a time: wait for it to end, or stop it "
                                    f"first (then continue with `ssmbench eval --resume {path.parent}`)") from None
            if exc.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                return fd, False  # no locks on this file system: the recorded holder is all there is to go by
            os.close(fd)
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd, True
        os.close(fd)
    raise RunFolderBusy(f"{path} keeps changing: another process is taking and releasing the lock of "
                        f"{path.parent}", "try again when it has finished")


@contextlib.contextmanager
def run_lock(folder: str | Path, command: str | None = None) -> Iterator[None]:
    """Hold `folder/.lock` while writing the run in `folder` (created if missing); nested use in one process is
    free. A second process is refused with `RunFolderBusy` (exit 2) naming the holder; the lock a dead process of
    this host left (killed, the machine restarted) is taken over with a one-line note on stderr; one naming
    another host is refused, with how to remove it when that run no longer runs. Released (and the file removed)
    on every way out of the block."""
    folder = Path(folder)
    key = str(folder.resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd, locked = _lock_fd(path)
    try:
        holder, host = _read_holder(fd), socket.gethostname()
        if holder and (holder.get("pid"), holder.get("host", host)) != (os.getpid(), host):
            pid = int(holder.get("pid", 0) or 0)
            remove = f"if that run no longer runs, delete {path} and try again"
            if holder.get("host", host) != host:
                raise RunFolderBusy(f"{folder} is locked by {_holder_text(holder)}, another machine", remove)
            if _running(pid, holder.get("pid_start")):
                why = "" if locked else " (this file system has no locks)"
                raise RunFolderBusy(f"{folder} is being written by another process{why}: {_holder_text(holder)}",
                                    f"wait for it to end or stop it; {remove}")
            print(f"note: {path} named {_holder_text(holder)}, which no longer runs (killed?); taking it over",
                  file=sys.stderr, flush=True)
        body = {"pid": os.getpid(), "pid_start": _process_start(os.getpid()), "host": host,
                "started": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "command": command if command is not None else _command()}
        data = (json.dumps(body, sort_keys=True) + "\n").encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        raise
    _HELD[key] = [fd, 1]
    try:
        yield
    finally:
        del _HELD[key]
        try:
            if _read_holder(fd).get("pid") == os.getpid():
                path.unlink(missing_ok=True)  # while still holding it: a waiting process re-opens the path
        except OSError:
            pass
        os.close(fd)


def holds_lock(folder: str | Path) -> bool:
    """Whether this process holds `folder`'s run lock."""
    return str(Path(folder).resolve()) in _HELD


def _command() -> str:
    import shlex

    argv = list(sys.argv)
    if argv and argv[0].endswith(("ssmbench", "__main__.py")):
        argv[0] = "ssmbench"
    return shlex.join(argv)[:300]


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """torch.save to a temporary name in the same folder, fsync, rename."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp.{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_checkpoint(path: str | Path, option: str = "--checkpoint") -> dict[str, Any]:
    """A checkpoint written by `save_checkpoint`, loaded with weights_only=True; ConfigError naming `option` (the
    command-line option that led to it) if it is missing or unreadable (truncated, not a checkpoint)."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ConfigError(option, f"{path} does not exist") from None
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not an ssmbench checkpoint"
        hint = ("the run cannot continue from it: start the run again (or restore the file from a backup)"
                if option == "--resume" else "pass a checkpoint that `ssmbench eval` wrote")
        raise ConfigError(option, f"{path} is not a readable ssmbench checkpoint (truncated or damaged: "
                                  f"{type(exc).__name__})", hint) from None
