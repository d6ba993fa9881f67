"""Training batches handed to the device through page-locked buffers allocated once, and the wait for each batch.

The data workers' batches arrive in the training process as shared-memory CPU tensors, several steps to a worker
message. On a CUDA device a background thread of `DeviceFeed` receives the messages and copies the model fields of
each into one of a few page-locked (pinned) host buffers, allocated once at the first step and then reused; the
training thread sends each step's rows with one non-blocking copy per field on the current stream and records an
event after the message's last step. A buffer is written again only once the training thread has sent all of it
and its event has passed on the GPU (a wait that happens only when the host runs `slots` messages ahead of the GPU,
which is then busy). Copying whole messages keeps the thread's takes of the GIL to a few a message: each take stalls
a training thread that launches kernels non-stop (`benchmarks/harness/feed_host_cost.py --beside-step`).

This replaces the DataLoader's `pin_memory=True`, whose thread allocates new pinned memory for every worker message:
a cudaHostAlloc, which page-locks the whole message while holding the CUDA driver's lock (torch's pinned cache
reuses a freed block only after the GPU has run the copies out of it, so a fresh block is allocated whenever the
prefetched messages outnumber the cached ones, e.g. for each of the first messages of a run). Batch values and
their order are unchanged, so every run is too; on the CPU the batches pass through as they come, with no thread.

`last_wait` is the time the training thread waited for the step's batch: the wait for the workers (and, on CUDA,
for the copy into a pinned buffer when it was not done ahead), without the time the thread spent waiting for the
GPU to release a buffer. It is the harness's `data_wait`.

Example:
    >>> from ssmbench.harness.feed.batches import TrainFeed
    >>> feed = DeviceFeed(TrainFeed("cumsum", {"L": 16}, 0, 4, start_step=0, stop_step=3, workers=0), "cpu")
    >>> [(step, tuple(b["inputs"].shape)) for step, b in feed]
    [(0, (4, 16, 3)), (1, (4, 16, 3)), (2, (4, 16, 3))]
    >>> feed.waited >= feed.last_wait >= 0.0
    True
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch

MODEL_FIELDS = ("inputs", "targets")
STAGING_BYTES = 64 << 20
"""Pinned bytes a feed aims for: between 4 and 16 buffers of one worker message's model fields (6 at the paper's
atomic setting, where a message is 10 steps of 1 MiB; a feed without messages has one step to a buffer)."""

LOADER_PINS = False
"""True: the former path (the DataLoader's pin-memory thread pins every worker message; the training step sends
the batch). Only for A/B measurements (`benchmarks/harness/overhead.py --feed loader-pinned`)."""

_END = object()


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class DeviceFeed:
    """Iterate (step, batch) of a CPU feed, with the model fields already on `device` when it is a CUDA device."""

    def __init__(self, feed: Iterable[tuple[int, dict[str, Any]]], device: torch.device | str,
                 fields: tuple[str, ...] = MODEL_FIELDS, slots: int | None = None, stage: bool | None = None,
                 join_timeout: float = 30.0) -> None:
        """Args:
            feed: (step, {field: CPU tensor}) in step order (`folder_feed.feed_for`).
            device: where the model runs. fields: the fields sent (the others pass through on the CPU).
            slots: pinned buffers, reused in turn (default: from STAGING_BYTES and the first message).
            stage: send through pinned buffers filled by a background thread (default: on a CUDA device).
        """
        self.feed, self.device, self.fields = feed, torch.device(device), tuple(fields)
        self.stage = self.device.type == "cuda" if stage is None else stage
        self.slots = slots
        self.join_timeout = join_timeout
        self.last_wait = 0.0
        self.waited = 0.0
        self.gpu_waited = 0.0
        """Seconds the background thread waited for the GPU to release a buffer (not counted in `waited`)."""
        self.allocations = 0
        """Pinned buffers allocated (one per slot and field at the first step, more only if a batch outgrows one)."""
        self._buffers: list[dict[str, torch.Tensor]] = []
        self._guards: list[Any] = []

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        return self._staged() if self.stage else self._plain()

    def _plain(self) -> Iterator[tuple[int, dict[str, Any]]]:
        asked = time.perf_counter()
        for step, batch in self.feed:
            self._waited(time.perf_counter() - asked)
            yield step, batch
            asked = time.perf_counter()

    def _waited(self, seconds: float) -> None:
        self.last_wait = max(0.0, seconds)
        self.waited += self.last_wait

    def _staged(self) -> Iterator[tuple[int, dict[str, Any]]]:
        asked = time.perf_counter()
        it = _messages(self.feed)
        first = next(it, None)  # in this thread: the DataLoader forks its workers before the helper thread exists
        if first is None:
            return
        sizes = {k: v.nbytes for k, v in first[1].items() if k in self.fields and isinstance(v, torch.Tensor)}
        n = self.slots or max(4, min(16, STAGING_BYTES // max(1, sum(sizes.values()))))
        self._buffers, self._guards = [{} for _ in range(n)], [None] * n
        for key, nbytes in sizes.items():
            self._grow(range(n), key, _capacity(nbytes))  # every buffer now: the first step is not timed
        ready: queue.Queue[Any] = queue.Queue()
        free: queue.Queue[int] = queue.Queue()
        for slot in range(n):
            free.put(slot)
        stop = threading.Event()
        helper = threading.Thread(target=self._fill, args=(it, first, ready, free, stop), name="ssmbench-staging",
                                  daemon=True)
        helper.start()
        del first  # the helper's now: a message held here would keep its worker's ring slot busy for the whole run
        gpu_before = self.gpu_waited
        trim = getattr(self.feed, "trim", None)
        try:
            while True:
                item = ready.get()
                if item is _END:
                    return
                if isinstance(item, _Failed):
                    raise item.exc
                slot, steps, host, stacked = item
                self._waited(time.perf_counter() - asked - (self.gpu_waited - gpu_before))
                for j, step in enumerate(steps):
                    if j:
                        self._waited(time.perf_counter() - asked)  # the message is here: no wait
                    batch = {k: v[j] if stacked and isinstance(v, torch.Tensor) else v for k, v in host.items()}
                    for key in self.fields:
                        if isinstance(batch.get(key), torch.Tensor) and key in self._buffers[slot]:
                            batch[key] = self._to_device(batch[key])
                    if trim is not None:  # a step padded to its message's longest: cut to its own length
                        batch = trim(step, batch)
                    if j == len(steps) - 1:  # the message's last copies are queued: the event follows them
                        self._guards[slot] = self._record(self._guards[slot])
                        free.put(slot)  # the helper waits on the event before writing the buffer again
                        del host
                    yield step, batch
                    asked, gpu_before = time.perf_counter(), self.gpu_waited
        finally:
            stop.set()
            helper.join(self.join_timeout)
            if not helper.is_alive():  # else it is inside the feed, which cannot be closed from here
                it.close()  # shuts the DataLoader workers down now, not at the interpreter's exit

    def _fill(self, it: Iterator[Any], item: Any, ready: queue.Queue[Any], free: queue.Queue[int],
              stop: threading.Event) -> None:
        """The helper thread: next message of the CPU feed -> a free buffer, once the GPU has released it -> `ready`.

        A whole worker message (up to 16 steps) is copied at once: the thread takes the GIL a few times a message
        rather than a dozen times a step, each take a stall for a training thread that launches kernels non-stop."""
        try:
            if self.device.type == "cuda" and self.device.index is not None:
                torch.cuda.set_device(self.device)  # a new thread's device is 0: no context on another rank's GPU
            while item is not None and not stop.is_set():
                steps, fields, stacked = item
                slot = _get(free, stop)
                if slot is None:
                    return
                guard = self._guards[slot]
                if guard is not None:
                    t0 = time.perf_counter()
                    guard.synchronize()  # the copies sent from this buffer have run
                    self.gpu_waited += time.perf_counter() - t0
                ready.put((slot, steps, self._copy_in(fields, slot), stacked))
                item = fields = None  # the worker's message is copied: its ring slot is free again
                item = None if stop.is_set() else next(it, None)
            ready.put(_END)
        except BaseException as exc:  # noqa: BLE001 - raised again in the training thread
            ready.put(_Failed(exc))

    def _copy_in(self, batch: dict[str, Any], slot: int) -> dict[str, Any]:
        """The batch with its model fields replaced by views of buffer `slot` holding copies of them."""
        out = dict(batch)
        buffers = self._buffers[slot]
        for key in self.fields:
            src = out.get(key)
            if not isinstance(src, torch.Tensor):
                continue
            if key not in buffers or buffers[key].numel() < src.nbytes:
                self._grow([slot], key, _capacity(src.nbytes))
            host = buffers[key][:src.nbytes].view(src.dtype).view(src.shape)  # the buffer's first bytes
            _copy(host, src)
            out[key] = host
        return out

    def _grow(self, slots: Iterable[int], key: str, nbytes: int) -> None:
        """Buffers of at least `nbytes` for `key` in these slots. A replaced buffer whose copies may still be pending
        is safe: torch's pinned allocator reuses it only after the copies recorded on it have run."""
        for slot in slots:
            if key not in self._buffers[slot] or self._buffers[slot][key].numel() < nbytes:
                self._buffers[slot][key] = self._pinned(nbytes)
                self.allocations += 1

    # The three device operations, apart so that a test can replace them on a machine without CUDA.
    def _pinned(self, nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)

    def _to_device(self, host: torch.Tensor) -> torch.Tensor:
        return host.to(self.device, non_blocking=True)

    def _record(self, event: Any) -> Any:
        event = event if event is not None else torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        return event


def _messages(feed: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[tuple[Any, dict[str, Any], bool]]:
    """(steps, fields, stacked) of a feed: its workers' messages as they come where it has `messages()` (each
    tensor field holds one row per step: `stacked`), else one step at a time. Closing this closes the feed's
    iterator (its DataLoader workers stop)."""
    stacked = hasattr(feed, "messages")
    source = feed.messages() if stacked else iter(feed)
    try:
        for steps, fields in source:
            yield (steps, fields, True) if stacked else ([steps], fields, False)
            del fields  # copied by now: not held here while the next message is awaited (it holds a ring slot)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """dst[...] = src on one CPU core without the GIL: NumPy's copy, which neither starts an OpenMP team in this
    thread nor changes torch's thread count (`torch.set_num_threads` here would reach the training thread's); torch's
    own copy for dtypes NumPy lacks."""
    try:
        np.copyto(dst.numpy(), src.numpy(), casting="no")
    except (TypeError, RuntimeError):  # bfloat16 and the like
        dst.copy_(src)


def _get(q: queue.Queue[int], stop: threading.Event) -> int | None:
    """The next item of `q`, or None once `stop` is set."""
    while not stop.is_set():
        try:
            return q.get(timeout=0.1)
        except queue.Empty:
            continue
    return None


def _capacity(nbytes: int) -> int:
    """Bytes of a new buffer: the batch's, rounded up to 64 KiB (a slightly larger batch does not reallocate).

    >>> _capacity(1), _capacity(65536), _capacity(65537)
    (65536, 65536, 131072)
    """
    unit = 1 << 16
    return max(unit, -(-int(nbytes) // unit) * unit)


def train_feed(cfg: Any, start_step: int, env: Any) -> DeviceFeed:
    """The training batches of steps [start_step, train.steps) for this rank, on its device (`feed_for`)."""
    from .folder_feed import feed_for

    cuda = env.device.type == "cuda"
    feed = feed_for(cfg, start_step, env, pin_memory=cuda and LOADER_PINS)
    note = getattr(feed, "shm_note", None)  # stream feeds: /dev/shm too small for full-sized messages
    if cuda and env.is_main and note is not None and (line := note()):
        logging.getLogger(__name__).warning(line)
    return DeviceFeed(feed, env.device, stage=cuda and not LOADER_PINS)
