"""The run folder: config.json, metrics.jsonl, metrics.json, checkpoints/{last,best}.pt, plots/.

Every JSON file and checkpoint is written to a temporary name, fsynced and renamed, so a crash never leaves a
half-written file under the final name; the temporaries a killed writer leaves are removed by the next one to take
the lock. `metrics.json` appears only when a run has finished. Checkpoints (`checkpoints.py`) hold only tensors and
plain Python values, so they load with `torch.load(..., weights_only=True)`; the previous `last.pt` is kept as
`last.prev.pt`, and a resume falls back to it (with a line saying so) when `last.pt` is damaged. A `metrics.jsonl`
that vanishes during a run is written again from the run's own records, with a warning.

One process writes a run folder at a time (`run_lock`): `RUN/.lock` is held with `flock` while a run trains or
resumes there and names its holder (pid, host, start time, command); a second writer is refused in one line naming
it. The kernel drops the lock of a process that dies, however it dies, so the file a SIGKILL leaves behind is taken
over at once with a note (after checking that its pid is gone: dead, a zombie, or reused); one naming another host
is refused with how to remove it. Forked children (the data workers) close their copy of the lock's descriptor
(`os.register_at_fork`): otherwise they would hold the lock for seconds after their parent was killed.

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
from .checkpoints import load_checkpoint, previous_of, save_checkpoint

__all__ = ["RunFolder", "RunFolderBusy", "default_run_dir", "holds_lock", "load_checkpoint", "run_lock",
           "save_checkpoint"]

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
        self._logged = False  # this object has written metrics.jsonl (so a missing one has vanished)

    config_path = property(lambda self: self.path / "config.json")
    log_path = property(lambda self: self.path / "metrics.jsonl")
    metrics_path = property(lambda self: self.path / "metrics.json")
    last = property(lambda self: self.path / "checkpoints" / "last.pt")
    best = property(lambda self: self.path / "checkpoints" / "best.pt")
    previous = property(lambda self: previous_of(self.last))
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

    def log(self, record: dict[str, Any], history: list[dict[str, Any]] | None = None) -> None:
        """Append one line to metrics.jsonl (flushed and fsynced: a preempted run keeps its history). If the file
        vanished after this object wrote it, a warning, and it is written again from `history` (the run's records
        so far, `record` last) when given."""
        self.path.mkdir(parents=True, exist_ok=True)
        records = [record]
        if self._logged and not self.log_path.exists():
            records = list(history) if history else records
            self._vanished(len(records), lost=not history)
        self._append(records)

    def _append(self, records: list[dict[str, Any]]) -> None:
        from ..data.build.space import disk_errno
        from .checkpoints import disk_full

        text = "".join(json.dumps(json_plain(r), sort_keys=True) + "\n" for r in records)
        try:
            with open(self.log_path, "a") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:  # a full disk: one line (the next checkpoint needs about what the last one took)
            code = disk_errno(exc)
            if code is None:
                raise
            raise disk_full(self.log_path, code, max(len(text), _size(self.last))) from None
        self._logged = True

    def _vanished(self, lines: int, lost: bool) -> None:
        what = "the lines before this one are lost" if lost else f"written again from the run's own records " \
                                                                 f"({lines} lines)"
        print(f"warning: {self.log_path} vanished during the run (deleted?); {what}", file=sys.stderr, flush=True)

    def read_log(self) -> list[dict[str, Any]]:
        """The log's records; a torn last line (the process killed, or the disk full, while writing it) is left
        out, and a resume rewrites the file without it."""
        if not self.log_path.exists():
            return []
        lines = [line for line in self.log_path.read_text().splitlines() if line.strip()]
        records = []
        for i, line in enumerate(lines):
            try:
                records.append(json.loads(line))
            except ValueError:
                if i < len(lines) - 1:
                    raise
        return records

    def truncate_log(self, step: int, history: list[dict[str, Any]] | None = None) -> None:
        """Drop log lines after `step` (a resumed run repeats the steps after its last checkpoint). A missing
        metrics.jsonl is written again from `history` (the checkpoint's records), with a warning."""
        keep = [r for r in self.read_log() if r.get("step", 0) <= step]
        if not self.log_path.exists() and history:
            keep = [r for r in history if r.get("step", 0) <= step]
            self._vanished(len(keep), lost=False)
        tmp = self.log_path.with_name(f"metrics.jsonl.tmp.{uuid.uuid4().hex}")
        tmp.write_text("".join(json.dumps(json_plain(r), sort_keys=True) + "\n" for r in keep))
        os.replace(tmp, self.log_path)
        self._logged = True

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        atomic_write_json(self.metrics_path, json_plain(metrics))

    def clear_unsaved(self) -> None:
        """Before a run that saved no step starts again from step 0: drop what its first attempt wrote after
        config.json (log lines, a best.pt written before the first last.pt, plots, predictions, temporary files)."""
        import shutil

        for path in (self.log_path, self.best, self.previous, self.path / "metrics.previous.json"):
            path.unlink(missing_ok=True)
        for folder in (self.plots, self.path / "predictions"):
            shutil.rmtree(folder, ignore_errors=True)
        for tmp in [*self.path.glob("*.tmp.*"), *self.path.glob("checkpoints/*.tmp.*")]:
            tmp.unlink(missing_ok=True)

    def remove_temporaries(self) -> list[Path]:
        """Remove the temporary files a killed writer left (`last.pt.tmp.<hex>`, `metrics.jsonl.tmp.<hex>`, ...):
        only the lock's holder calls this, so no write of this run is under way. Returns what it removed."""
        removed = []
        for tmp in [*self.path.glob("*.tmp.*"), *self.path.glob("checkpoints/*.tmp.*")]:
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed.append(tmp)
        return removed


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


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
    """Whether the process `pid` (started at `start`, when recorded) still runs on this host: not when it is gone,
    a zombie (killed, not yet reaped by its parent) or another process that reuses the pid."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    try:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
    except (OSError, IndexError):
        pass
    now = _process_start(pid)
    return start is None or now is None or now == start


def _stale(holder: dict[str, Any]) -> bool:
    """Whether `holder` names a process of this host that no longer runs."""
    if not holder or holder.get("host", socket.gethostname()) != socket.gethostname():
        return False
    try:
        pid = int(holder.get("pid", 0) or 0)
    except (TypeError, ValueError):
        return False
    return not _running(pid, holder.get("pid_start"))


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
                if _stale(holder):  # the lock is held, but not by the process the file names
                    raise RunFolderBusy(f"{path.parent} is locked, though the process its lock file names "
                                        f"({_holder_text(holder)}) no longer runs: another process is taking it "
                                        "over right now, or processes the dead one started still hold it",
                                        f"try again in a moment; `fuser {path}` lists the holders") from None
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
            if key in _HELD:  # (not in a forked child)
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
    RunFolder(folder).remove_temporaries()  # a killed writer's: none of this run's writes is under way
    try:
        yield
    finally:
        if _HELD.pop(key, None) is not None:  # else a forked child leaving the block: the lock is its parent's
            _release(path, fd)


def _release(path: Path, fd: int) -> None:
    try:
        if _read_holder(fd).get("pid") == os.getpid():
            path.unlink(missing_ok=True)  # while still holding it: a waiting process re-opens the path
    except OSError:
        pass
    os.close(fd)


def _forget_locks_in_child() -> None:
    """After a fork, in the child: close its copies of the lock descriptors. A flock belongs to the open file, which
    a forked data worker would otherwise share: the lock would outlive its holder by the seconds the workers take
    to notice they are orphans, and refuse an immediate --resume. (exec closes them anyway: O_CLOEXEC.)"""
    for fd, _ in _HELD.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_forget_locks_in_child)


def holds_lock(folder: str | Path) -> bool:
    """Whether this process holds `folder`'s run lock."""
    return str(Path(folder).resolve()) in _HELD


def _command() -> str:
    import shlex

    argv = list(sys.argv)
    if argv and argv[0].endswith(("ssmbench", "__main__.py")):
        argv[0] = "ssmbench"
    return shlex.join(argv)[:300]
