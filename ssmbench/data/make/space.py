"""Disk space: the free-space check before a build, and one-line errors when the disk fills up while writing.

A full disk (ENOSPC), an exceeded quota (EDQUOT) or a file system that turned read-only (EROFS) is the
environment's problem, not a bug: the writer removes its partial shard and raises `DiskFullError`, which the build
turns into one line naming the folder and the space still needed (exit status 1). Finished shards stay, so the
same command continues once there is room.

HDF5 cannot always recover from a failed write: when closing the file fails again because its cached chunks
still cannot be written, the library is left in a state that crashes at interpreter exit. `poison_hdf5` keeps
those objects alive (so nothing tries to flush them again) and ends the process with `os._exit` at exit instead.

>>> disk_errno(OSError(28, "No space left on device"))
28
>>> disk_errno(OSError(5, "file write failed: errno = 122, error message = 'Disk quota exceeded'"))
122
>>> disk_errno(OSError(2, "No such file or directory")) is None
True
"""

from __future__ import annotations

import atexit
import errno
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from ...errors import SsmbenchError
from ...plain import human_bytes

DISK_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
               errno.EROFS: "read-only file system"}
"""The OS errors that mean "this folder cannot take more bytes", with how the message names them."""
_EMBEDDED = re.compile(r"errno = (\d+)")


class DiskFullError(SsmbenchError):
    """The folder cannot take the bytes a build still has to write (full, over quota or read-only): exit 1.

    `errno` is the OS error number (None for the free-space check before a build).
    """

    exit_code = 1

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.errno = code

    def __reduce__(self) -> tuple[Any, ...]:  # picklable with its errno, for worker processes
        return (type(self), (self.message, self.errno))


NEARLY_FULL = 16 << 20
"""Free bytes under which an error without an errno, raised while writing, is taken for a full disk."""


def disk_errno(exc: BaseException, folder: Path | None = None) -> int | None:
    """The errno of `exc` if it is a disk-space or read-only error (also when h5py embeds it in the message of
    an OSError or a RuntimeError). With `folder` (where the failed write went), an OSError or RuntimeError that
    names no errno at all counts as ENOSPC when that folder's file system has less than NEARLY_FULL bytes free:
    HDF5 reports some failed writes on a full disk only as "internal error" (issue 37).

    >>> disk_errno(RuntimeError("Can't write data (internal error)"), Path("/")) is None  # room enough here
    True
    """
    if not isinstance(exc, (OSError, RuntimeError)):
        return None
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
        return exc.errno
    match = _EMBEDDED.search(str(exc))
    code = int(match.group(1)) if match else None
    if code in DISK_ERRNOS:
        return code
    if folder is not None and code is None and (not isinstance(exc, OSError) or exc.errno is None):
        try:
            return errno.ENOSPC if free_bytes(folder) < NEARLY_FULL else None
        except OSError:
            return None
    return None


def free_bytes(path: Path) -> int:
    """Free bytes (for this user) on the file system that holds `path`, or would hold it once created."""
    existing = Path(path).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return shutil.disk_usage(existing).free


def check_writable(path: Path) -> None:
    """Refuse (ConfigError naming --out) a folder that cannot be created or written, before any size check: a
    read-only or virtual file system (/proc) reports 0 B free, which would read as a full disk."""
    import tempfile

    from ...errors import ConfigError

    existing = Path(path).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder")
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".ssmbench-write-test-"):
            pass
    except OSError as exc:
        raise ConfigError("--out", f"cannot write into {existing} ({exc.strerror or exc}), so {path} cannot be "
                          "created there", "choose a writable --out (default: $SSMBENCH_DATA or ./data)") from None


def check_free_space(path: Path, needed: int) -> None:
    """Refuse to start when `path` cannot be written (`check_writable`) or its file system has less than `needed`
    bytes free."""
    check_writable(path)
    free = free_bytes(path)
    if free < needed:
        raise DiskFullError(f"not enough free space for {path}: about {human_bytes(needed)} needed, "
                            f"{human_bytes(free)} free; free some space or choose another --out")


def disk_full_message(path: Path, code: int | None, needed: int | None, upper_bound: bool = False, *,
                      kept: str = "", writable: str = "choose a writable --out",
                      space: str = "free some space or choose another --out",
                      then: str = "re-run the same command") -> str:
    """One line: what happened in which folder, and (for a full disk or quota) about how much more it needs
    (`upper_bound`: `needed` is a bound from the raw sample size, not an estimate). A dataset build's by default;
    a checkpoint's says what is `kept` and how to go on (`writable`, `space`, `then`: `checkpoints.disk_full`)."""
    kept = f"; {kept}" if kept else ""
    if code == errno.EROFS:
        return f"{DISK_ERRNOS[code]}: cannot write to {path}{kept}; {writable}, then {then}"
    reason = DISK_ERRNOS.get(code or errno.ENOSPC, DISK_ERRNOS[errno.ENOSPC])
    more = (f"it needs {'up to' if upper_bound else 'about'} {human_bytes(needed)} more to finish" if needed
            else "it needs more space to finish")
    try:
        free = f" ({human_bytes(free_bytes(path if path.is_dir() else path.parent))} free)"
    except OSError:
        free = ""
    return f"{reason} while writing {path}: {more}{free}{kept}; {space}, then {then}"


_POISONED: list[Any] = []


def poison_hdf5(*objects: Any) -> None:
    """HDF5 could not close a file after a write failure: keep its objects alive and skip its exit handlers.

    Called at most a few times per process (each failed shard); from then on the process ends with `os._exit`
    (status 1 unless a status was already requested) after Python's own exit handlers, because HDF5's library
    shutdown would flush those objects once more and crash.
    """
    if not _POISONED:
        atexit.register(_exit_without_hdf5_shutdown)
    _POISONED.append(objects)


def hdf5_poisoned() -> bool:
    """Whether a failed write left HDF5 unable to shut down cleanly in this process."""
    return bool(_POISONED)


def exit_now(status: int) -> None:
    """End the process with `status`; with `os._exit` (after flushing stdio) when HDF5 is poisoned."""
    if hdf5_poisoned():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)
    sys.exit(status)


def _exit_without_hdf5_shutdown() -> None:
    exit_now(1)
