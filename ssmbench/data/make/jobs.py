"""Running shard jobs: in this process or in a pool of worker processes, with Ctrl-C, parent death and SVML handled.

* Ctrl-C: while a build runs, the first SIGINT only sets a flag; the job loop stops at the next block (one
  worker) or within a fifth of a second (a pool, whose workers ignore SIGINT and are then terminated), and the
  build raises `BuildInterrupted` ("interrupted: k/n shards done; re-run the same command to continue", exit status
  130). A second Ctrl-C raises at once. Nothing half-written survives: a shard is a temporary until it is renamed.
* Parent death: every worker watches the build's process (a pidfd on Linux, polling elsewhere) and exits when it
  dies, even by `kill -9`, so no orphan keeps computing.
* SVML: Intel's short vector math library changes the last bits of exp/log, hence the bytes of tasks that draw
  normals. `disable_svml` sets `NUMBA_DISABLE_INTEL_SVML=1` before Numba loads; if Numba was already imported in
  this process with SVML on, the shards are generated in fresh worker processes, where the setting applies.

>>> import os
>>> disable_svml(); os.environ["NUMBA_DISABLE_INTEL_SVML"]
'1'
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ...errors import SsmbenchError
from ...registry import disable_svml


def svml_in_use() -> bool:
    """Whether Numba was loaded in this process with SVML enabled (too late to switch it off here)."""
    numba = sys.modules.get("numba")
    return bool(numba is not None and getattr(numba.config, "USING_SVML", False))


def runs_here(workers: int) -> bool:
    """Whether `run_jobs` runs its jobs in this process (one worker, and Numba here computes without SVML)."""
    return workers <= 1 and not svml_in_use()


SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""What stops a build cleanly: Ctrl-C, and SIGTERM (`kill`, a job scheduler's time limit, `timeout`)."""


class BuildInterrupted(SsmbenchError):
    """Ctrl-C or SIGTERM stopped a build; the message says how far it got and that the same command continues it.
    Exit status 130 for either, as `ssmbench get` (whose rebuild this may be) ends on both."""

    exit_code = 130


class _Interrupts:
    """SIGINT and SIGTERM handling during a build (only in the main thread; elsewhere the defaults stay)."""

    def __init__(self) -> None:
        self.depth = 0
        self.requested = False
        self.previous: dict[int, Any] = {}

    def handler(self, signum: int, frame: Any) -> None:
        if self.requested:  # a second Ctrl-C (or SIGTERM): stop now
            raise KeyboardInterrupt
        self.requested = True

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt


_INTERRUPTS = _Interrupts()


@contextmanager
def interrupts() -> Iterator[None]:
    """Defer SIGINT and SIGTERM to `check_interrupt()` points for the duration (re-entrant; restores the previous
    handlers): either stops the build with the same "interrupted: k/n shards done" line (SIGTERM exited 143 with
    none, issue 37)."""
    state = _INTERRUPTS
    install = state.depth == 0 and threading.current_thread() is threading.main_thread()
    if install:
        state.requested = False
        state.previous = {sig: signal.signal(sig, state.handler) for sig in SIGNALS}
    state.depth += 1
    try:
        yield
    finally:
        state.depth -= 1
        if install:
            for sig, previous in state.previous.items():
                signal.signal(sig, previous)
            state.requested = False



def check_interrupt() -> None:
    """Raise KeyboardInterrupt if Ctrl-C was pressed since `interrupts()` began."""
    _INTERRUPTS.check()


def run_jobs(fn: Callable[..., Any], jobs: Sequence[Mapping[str, Any]], workers: int,
             on_done: Callable[[int, Any], None], on_rows: Callable[[int], None] | None = None) -> None:
    """Call `fn(**job)` for every job, then `on_done(index, result)` here, in completion order.

    One worker (and Numba here without SVML): in this process, with `progress=` a callback that reports rows to
    `on_rows` and checks for Ctrl-C after every block. Otherwise in a pool of `workers` processes; on Ctrl-C or
    the first error the pool's workers are terminated (their shard locks go with them) and the error is raised.
    """
    if not jobs:
        return
    if runs_here(workers):
        def progress(rows: int) -> None:
            if on_rows is not None:
                on_rows(rows)
            check_interrupt()

        for index, job in enumerate(jobs):
            check_interrupt()
            on_done(index, fn(**job, progress=progress))
        return
    _run_pool(fn, jobs, max(1, workers), on_done)


def _run_pool(fn: Callable[..., Any], jobs: Sequence[Mapping[str, Any]], workers: int,
              on_done: Callable[[int, Any], None]) -> None:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    threads = max(1, (os.cpu_count() or 1) // workers)
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    # no max_tasks_per_child: on Python 3.11 it deadlocks the pool after workers * N tasks (gh-115634)
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(threads, os.getpid()))
    try:
        pending = {pool.submit(fn, **job): index for index, job in enumerate(jobs)}
        while pending:
            finished, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for future in finished:
                on_done(pending.pop(future), future.result())
            check_interrupt()
    except BaseException:
        _terminate(pool)
        del pool  # now, so that its queues' semaphores are released before exit (else: "leaked semaphore")
        raise
    pool.shutdown(wait=True)


def _terminate(pool: Any) -> None:
    """Stop a pool now: drop queued jobs, kill its workers (mid-shard; their temporaries stay until swept)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=10)
    pool.shutdown(wait=True)


def _init_worker(threads: int, parent: int) -> None:
    """Worker set-up: ignore Ctrl-C and SIGTERM (the parent decides, also when a whole process group is signalled),
    die with the parent, no SVML, Numba's thread count."""
    import multiprocessing

    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    _exit_with(parent)
    disable_svml()
    # A worker starts no processes. Under a fork start method, Numba's threading layer makes a named semaphore
    # that a killed worker cannot unlink ("leaked semaphore objects" at exit); under spawn it makes none.
    multiprocessing.set_start_method("spawn", force=True)
    import numba

    numba.set_num_threads(threads)


def _exit_with(parent: int) -> None:
    """Exit this process as soon as process `parent` ends (however it ends)."""
    try:
        pidfd = os.pidfd_open(parent)  # type: ignore[attr-defined]  # Linux >= 5.3
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is None:
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(1)
        except OSError:
            pass

    def watch() -> None:
        if pidfd is not None:
            import select

            select.select([pidfd], [], [])  # readable once the parent has exited
            os._exit(1)
        import time

        while True:
            time.sleep(1.0)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                os._exit(1)
            except OSError:
                pass

    threading.Thread(target=watch, name="ssmbench-parent-watch", daemon=True).start()
