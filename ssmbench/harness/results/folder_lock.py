"""One writer per run folder: `run_lock` holds `RUN/.lock` with `flock` while a run trains or resumes there.

The file names its holder (pid, its start time, host, start, command); a second writer is refused in one line
naming it (`RunFolderBusy`, exit 2), also when it holds the flock but has not written its details yet (two writers
starting in the same instant: the flock decides, not the recorded pid). The kernel drops the lock of a process that
dies, however it dies, so the file a SIGKILL leaves behind is taken over at once with a note, after checking that
the pid it names is gone (dead, a zombie, or reused); one naming another host is refused with how to remove it. On
a file system without locks the recorded holder is all there is to go by. The new holder removes the temporaries a
killed writer left (`RunFolder.remove_temporaries`).

A flock belongs to the open file, which a forked child shares: forked children (the data workers) close their copy
of the lock's descriptor (`os.register_at_fork`), else they would hold the lock for the seconds they take to notice
that their parent was killed, and refuse an immediate `--resume` naming a dead pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...errors import SsmbenchError

LOCK_NAME = ".lock"


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


def _holder_pid(holder: dict[str, Any]) -> int | None:
    """The pid a lock file names; None when it names none or something that is not a number (a damaged file)."""
    try:
        return int(holder.get("pid", 0) or 0) or None
    except (TypeError, ValueError):
        return None


def _stale(holder: dict[str, Any]) -> bool:
    """Whether `holder` names a process of this host that no longer runs."""
    if not holder or holder.get("host", socket.gethostname()) != socket.gethostname():
        return False
    pid = _holder_pid(holder)
    return pid is not None and not _running(pid, holder.get("pid_start"))


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
            pid = _holder_pid(holder) or 0
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
    remove_temporaries(Path(folder))  # a killed writer's: none of this run's writes is under way
    try:
        yield
    finally:
        if _HELD.pop(key, None) is not None:  # else a forked child leaving the block: the lock is its parent's
            _release(path, fd)


def remove_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files a killed writer left in a run folder (`last.pt.tmp.<hex>`,
    `metrics.jsonl.tmp.<hex>`, ...): only the lock's holder calls this, so no write of this run is under way.
    Returns what it removed."""
    removed = []
    for tmp in [*folder.glob("*.tmp.*"), *folder.glob("checkpoints/*.tmp.*")]:
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    return removed


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
