"""A lock file that is gone when its holder is done: `held(path)`, for `ssmbench get` and `ssmbench download`.

The holder takes an exclusive `flock` on `path` and, when it is done, unlinks the file *while still holding the
lock*, then closes it. A process that was waiting on the old file then holds a lock on a file no longer at `path`:
it sees that (the inode at `path` is not the one it locked, or there is none) and locks the file that is there now,
creating it if need be. So no `.get-NAME.lock` is left behind, and two processes never both believe they hold it.
A crash leaves the file, which is harmless: the next holder locks it and removes it.

Without `fcntl` (Windows) the lock is `filelock.FileLock`'s, and the file stays; on a file system without `flock`
(some network file systems) the block runs unlocked, like a run folder's lock there (filelock would flock too).

>>> import tempfile, pathlib
>>> tmp = tempfile.TemporaryDirectory()
>>> with held(pathlib.Path(tmp.name) / ".demo.lock"):
...     (pathlib.Path(tmp.name) / ".demo.lock").exists()
True
>>> (pathlib.Path(tmp.name) / ".demo.lock").exists()
False
>>> tmp.cleanup()
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Busy", "held"]


class Busy(Exception):
    """Another process holds the lock and `wait` was False."""


def _take(path: Path, wait: bool, on_wait: Callable[[], None] | None) -> int | None:
    """An open descriptor of the file now at `path`, exclusively flocked; None where the file system has no flock."""
    import fcntl

    told = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                    os.close(fd)
                    return None
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                if not wait:
                    raise Busy(str(path)) from None
                if on_wait is not None and not told:
                    on_wait()
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)  # Ctrl-C interrupts the wait
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            return fd
        os.close(fd)  # the holder we waited for removed this file: lock the one at `path` now


@contextmanager
def held(path: Path, wait: bool = True, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the lock `path` for the block (creating the file), then remove it. With `wait` False a lock held by
    another process raises `Busy` at once; else `on_wait` is called once and this waits for it. OSError when the
    folder cannot be written."""
    try:
        fd = _take(path, wait, on_wait)
    except ImportError:  # no fcntl (Windows)
        fd = None
        with _filelock(path, wait, on_wait):
            yield
        return
    if fd is None:  # a file system without flock: filelock would call flock too, so go on unlocked, as runs do
        yield
        return
    try:
        yield
    finally:
        try:
            os.unlink(path)  # while still holding it: a waiter then sees that its file is gone and retries
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)


@contextmanager
def _filelock(path: Path, wait: bool, on_wait: Callable[[], None] | None) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if not wait:
            raise Busy(str(path)) from None
        if on_wait is not None:
            on_wait()
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
