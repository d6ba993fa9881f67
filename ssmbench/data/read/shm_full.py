"""When shared memory runs out: data workers that cannot hand a batch over, and the training process reading the rest.

DataLoader workers hand their batches to the training process through /dev/shm, which containers often keep small
(Docker's default is 64 MiB). Two things can then fail. Starting the workers: their queues' semaphores live there
(`start_workers_or_read_here`). Sharing a batch: torch moves a batch's tensors into shared memory while a worker's
feeder thread pickles it, and a failure there (`unable to allocate shared memory ... No space left on device`) is only
printed: the batch is dropped and the training process waited for it forever (seen with a 6 MiB /dev/shm, where even
SIGTERM could not end the run). So a worker allocates a batch's shared memory itself (`shared_empty`) before the
batch is queued, and a pickling hook that needs some returns `unavailable` instead of failing; either way the
training process gets `SharedMemoryUnavailable`, and the feeds read the batches not yet handed out in the training
process (`batches.iterate_or_read_here`): the same batches, each a function of its index, after one warning.

Example:
    >>> import pickle
    >>> try:
    ...     pickle.loads(pickle.dumps(Unshareable("no space left")))
    ... except SharedMemoryUnavailable as exc:
    ...     print(exc)
    no space left
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import torch
    import torch.utils.data

log = logging.getLogger(__name__)


class SharedMemoryUnavailable(RuntimeError):
    """A data worker could not put a batch in shared memory (/dev/shm full, no file descriptor left)."""


def shared_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor in shared memory, made in the calling (worker) thread; `SharedMemoryUnavailable`
    where none can be had."""
    import torch

    try:
        return torch.empty(shape, dtype=dtype).share_memory_()
    except (RuntimeError, OSError) as exc:
        raise SharedMemoryUnavailable(f"{exc}") from None


def unavailable(text: str) -> NoReturn:
    """What a batch that could not be shared unpickles as in the training process: the error, raised there."""
    raise SharedMemoryUnavailable(text)


class Unshareable:
    """Stands in for a batch whose shared memory could not be had while pickling (`__reduce__` of a collated batch):
    unpickles as `SharedMemoryUnavailable(text)` in the training process instead of being dropped."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __reduce__(self) -> tuple[Any, ...]:
        return unavailable, (self.text,)


_said: set[str] = set()


def say_reading_here(workers: int, why: str, when: str) -> None:
    """One warning per process and `when` ("start": the workers could not start; "later": a batch could not be
    shared): batches are read in this process from now on, more slowly, the same ones."""
    if when in _said:
        return
    _said.add(when)
    from .ring import shm_free

    free = shm_free()
    room = "" if free is None else f" ({free >> 20} MiB free)"
    why = why.removeprefix(f"{SharedMemoryUnavailable.__module__}.{SharedMemoryUnavailable.__qualname__}: ")
    log.warning("/dev/shm%s has no room for %s of the %d data worker process(es) (%s): reading batches in this "
                "process from now on (slower, same batches); give /dev/shm more room (`df -h /dev/shm`; in a "
                "container: docker run --shm-size=1g, or --ipc=host), or pass -o data.workers=0 to choose this",
                room, "the queues" if when == "start" else "a batch", workers, why)


def start_workers_or_read_here(loader: torch.utils.data.DataLoader[Any]) -> bool:
    """Before a DataLoader starts its worker processes: make (and drop) one semaphore, the first thing its queues
    make, in /dev/shm on Linux. Where that fails (a /dev/shm already full: `OSError` ENOSPC from multiprocessing,
    which used to end the run with a traceback), set `loader.num_workers = 0`, so its batches are read in this
    process: the same batches (they are a function of the step), more slowly; one warning per process names
    /dev/shm and `-o data.workers=0`. Returns whether the workers can start."""
    if getattr(loader, "num_workers", 0) <= 0:
        return False
    import multiprocessing

    ctx = loader.multiprocessing_context or multiprocessing.get_context()
    try:
        ctx.Lock()
    except OSError as exc:
        say_reading_here(loader.num_workers, str(exc.strerror or exc), "start")
        loader.num_workers = 0
        return False
    return True
