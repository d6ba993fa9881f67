"""A DataLoader worker's ring of reusable shared-memory slots, through which its batches reach the main process.

Sending a 512 KiB batch through the DataLoader's result pipe costs about 1-2 ms of CPU between the two processes
(64 KiB pipe reads, a buffer copied three times, fresh pages faulted in each time: measured with a bare
`multiprocessing.Queue` on the 2-core VM), and a new shared-memory tensor per batch costs a file, a descriptor and a
socket connection to the worker each time. Here each worker makes one shared uint8 tensor once, on its first large
batch: a header of one flag per slot, then `slots` slots of the first batch's size (at most RING_BYTES in all). A
batch is copied into the next slot; what travels is (ring id, slot, layout) -- and, with the ring's first batch
only, the tensor itself (its descriptor, once). The receiving process keeps the rings it was sent (those of workers
that have exited are dropped when a new ring arrives), rebuilds the batch from the slot, copies out whatever would
still point into it, and marks the slot free. A worker whose next slot is still marked busy, or whose batch is larger
than a slot, returns None and the batch travels the other way (`ssmbench.data.columns`): nothing ever waits.

One consumer per ring: the ring's tensor travels once, so every batch of a worker must be unpickled by the same
process (the DataLoader's main process, or its pin-memory thread), as the DataLoader does.

Example (both ends in one process):
    >>> import numpy as np
    >>> stored = {"inputs": np.arange(6, dtype=np.uint8).reshape(2, 3), "sample_index": np.array([4, 9])}
    >>> shipped = ship(stored, min_bytes=0)
    >>> got = receive(lambda arrays: {k: v.copy() for k, v in arrays.items()}, *shipped)
    >>> got["inputs"].tolist(), got["sample_index"].tolist()
    ([[0, 1, 2], [3, 4, 5]], [4, 9])
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

RING_BYTES = 16 << 20
"""Most shared memory one worker's ring takes (slots of the first large batch's size, at most MAX_SLOTS): kept small
because containers often give /dev/shm only 64 MiB. A batch too large for MIN_SLOTS slots never uses a ring."""
MAX_SLOTS, MIN_SLOTS = 8, 4
MIN_BATCH_BYTES = 64 << 10
"""Batches below this travel inside their pickle (cheaper than a copy into shared memory)."""
_ALIGN = 64
_FREE, _BUSY = 0, 1

Layout = list[tuple[str, str, tuple[int, ...], int]]  # (name, dtype, shape, byte offset in the slot)


def layout_of(stored: dict[str, np.ndarray]) -> tuple[Layout, int]:
    """Where each array goes in a slot (offsets aligned to 64 bytes), and the bytes it takes."""
    layout, total = [], 0
    for k, v in stored.items():
        layout.append((k, v.dtype.str, v.shape, total))
        total += -(-v.nbytes // _ALIGN) * _ALIGN
    return layout, total


class _Ring:
    """The worker's end: one shared tensor = flags (slots x int64) + slots."""

    def __init__(self, slot_bytes: int) -> None:
        import torch

        self.slots, self.slot_bytes = min(MAX_SLOTS, RING_BYTES // slot_bytes), slot_bytes
        self.header = -(-self.slots * 8 // _ALIGN) * _ALIGN
        self.tensor = torch.zeros(self.header + self.slots * slot_bytes, dtype=torch.uint8).share_memory_()
        self.buf = self.tensor.numpy()  # (bytes,)
        self.flags = self.buf[:self.slots * 8].view(np.int64)  # (slots,)
        self.id = f"{os.getpid()}:{uuid.uuid4().hex}"
        self.announced, self.next = False, 0


_worker_ring: tuple[int, _Ring | None] | None = None  # (pid, ring or None if none could be made); a fork makes its own
_held: dict[str, tuple[Any, np.ndarray]] = {}  # consumer's end: ring id -> (tensor, its bytes)


def ship(stored: dict[str, np.ndarray], min_bytes: int | None = None) -> tuple[Any, ...] | None:
    """Worker side: copy the arrays into the ring's next slot; return what to send, `(ring id, tensor or None,
    slot, byte offset, layout)`, or None (too small, too large for a slot, or the slot still in use)."""
    global _worker_ring
    layout, total = layout_of(stored)
    if total < (MIN_BATCH_BYTES if min_bytes is None else min_bytes):
        return None
    if _worker_ring is None or _worker_ring[0] != os.getpid():
        if total == 0 or RING_BYTES // total < MIN_SLOTS:
            return None
        try:
            _worker_ring = (os.getpid(), _Ring(total))
        except (OSError, RuntimeError):  # no shared memory to be had: this process ships every batch the other way
            _worker_ring = (os.getpid(), None)
    ring = _worker_ring[1]
    if ring is None:
        return None
    slot = ring.next
    if total > ring.slot_bytes or ring.flags[slot] != _FREE:
        return None
    ring.flags[slot] = _BUSY
    base = ring.header + slot * ring.slot_bytes
    for (_, _, _, offset), v in zip(layout, stored.values(), strict=True):
        ring.buf[base + offset:base + offset + v.nbytes] = np.ascontiguousarray(v).reshape(-1).view(np.uint8)
    ring.next = (slot + 1) % ring.slots
    tensor = None if ring.announced else ring.tensor
    ring.announced = True
    return ring.id, tensor, slot, base, layout


def receive(make: Callable[[dict[str, np.ndarray]], dict[str, Any]], ring_id: str, tensor: Any, slot: int,
            base: int, layout: Layout) -> dict[str, Any]:
    """Consumer side: `make` (the batch's plan) applied to the arrays in the slot; results that still share the
    slot's memory are copied out, then the slot is marked free."""
    if tensor is not None:
        _forget_exited_workers()
        _held[ring_id] = (tensor, tensor.numpy())
    try:
        buf = _held[ring_id][1]
    except KeyError:
        raise RuntimeError(f"a batch came through shared-memory ring {ring_id} before the ring itself: every batch of "
                           "a DataLoader worker must be unpickled by one process") from None
    stored = {}
    for k, dtype, shape, offset in layout:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        stored[k] = buf[base + offset:base + offset + nbytes].view(dtype).reshape(shape)
    lo, hi = buf.ctypes.data, buf.ctypes.data + buf.nbytes
    try:
        out = make(stored)
        return {k: _own(v, lo, hi) for k, v in out.items()}
    finally:
        buf[slot * 8:(slot + 1) * 8].view(np.int64)[0] = _FREE


def _own(value: Any, lo: int, hi: int) -> Any:
    """`value` (a tensor or an array), copied if its data lies in [lo, hi)."""
    if isinstance(value, np.ndarray):
        return value.copy() if lo <= value.ctypes.data < hi else value
    return value.clone() if lo <= value.data_ptr() < hi else value


def _forget_exited_workers() -> None:
    for ring_id in list(_held):
        try:
            os.kill(int(ring_id.split(":")[0]), 0)
        except ProcessLookupError:
            del _held[ring_id]
        except (PermissionError, ValueError):
            pass
