"""A DataLoader worker's ring of reusable shared-memory slots, through which its batches reach the main process.

Sending a 512 KiB batch through the DataLoader's result pipe costs about 1-2 ms of CPU between the two processes
(64 KiB pipe reads, a buffer copied three times, fresh pages faulted in each time: measured with a bare
`multiprocessing.Queue` on the 2-core VM), and a new shared-memory tensor per batch costs a file, a descriptor and a
socket connection to the worker each time. Here each worker makes one shared uint8 tensor once, on its first large
batch: a header of one flag per slot, then `slots` slots of the first batch's size (at most RING_BYTES in all). The
worker copies a finished batch (its columns as the consumer will use them) into the next free slot; what travels is
(ring id, slot, layout) -- and, with the ring's first batch only, the tensor itself (its descriptor, once). The
receiving process keeps the rings it was sent (those of workers that have exited are dropped when a new ring
arrives) and hands out the batch's tensors as views into the slot, without a copy; the slot is marked free when the
last of them is garbage-collected. A worker takes the next free slot; when none is (a consumer holding on to its
batches), or the batch is larger than a slot, `ship` returns None and the batch travels the other way (`ssmbench.data.columns`):
nothing ever waits.

One consumer per ring: the ring's tensor travels once, so every batch of a worker must be unpickled by the same
process (the DataLoader's main process, or its pin-memory thread), as the DataLoader does; `ship` therefore works in
DataLoader worker processes only (elsewhere it returns None).

Example (where each array of a batch goes in a slot):
    >>> import numpy as np
    >>> layout_of({"inputs": np.zeros((2, 3), np.float32), "sample_index": np.array([4, 9])})
    ([('inputs', '<f4', (2, 3), 0), ('sample_index', '<i8', (2,), 64)], 128)
"""

from __future__ import annotations

import os
import uuid
import weakref
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


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def copy_in(buf: np.ndarray, base: int, layout: Layout, arrays: dict[str, np.ndarray]) -> None:
    """Copy `arrays` into the bytes `buf` at `base` + their offsets in `layout`."""
    for (_, _, _, offset), v in zip(layout, arrays.values(), strict=True):
        buf[base + offset:base + offset + v.nbytes] = np.ascontiguousarray(v).reshape(-1).view(np.uint8)


def views(buf: np.ndarray, base: int, layout: Layout) -> dict[str, np.ndarray]:
    """The arrays of `layout` as views into the bytes `buf` at `base` (no copy)."""
    return {k: buf[base + offset:base + offset + _nbytes(dtype, shape)].view(dtype).reshape(shape)
            for k, dtype, shape, offset in layout}


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


def ship(batch: dict[str, np.ndarray], min_bytes: int | None = None) -> tuple[Any, ...] | None:
    """Worker side: copy the batch's arrays into the ring's next slot; return what `receive` takes, `(ring id,
    tensor or None, slot, byte offset, layout)`, or None (too small, too large for a slot, or the slot in use)."""
    global _worker_ring
    layout, total = layout_of(batch)
    if total < (MIN_BATCH_BYTES if min_bytes is None else min_bytes) or not in_dataloader_worker():
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
    free = [j % ring.slots for j in range(ring.next, ring.next + ring.slots) if ring.flags[j % ring.slots] == _FREE]
    if total > ring.slot_bytes or not free:  # a consumer still holds every slot: ship another way
        return None
    slot = free[0]  # the first free one from where the last left off
    ring.flags[slot] = _BUSY
    base = ring.header + slot * ring.slot_bytes
    copy_in(ring.buf, base, layout, batch)
    ring.next = (slot + 1) % ring.slots
    tensor = None if ring.announced else ring.tensor
    ring.announced = True
    return ring.id, tensor, slot, base, layout


def receive(ring_id: str, tensor: Any, slot: int, base: int, layout: Layout) -> dict[str, Any]:
    """Consumer side: the batch as {name: tensor}, views into the slot, which is marked free once they are all gone."""
    import torch

    if tensor is not None:
        _forget_exited_workers()
        _held[ring_id] = (tensor, tensor.numpy())
    try:
        buf = _held[ring_id][1]
    except KeyError:
        raise RuntimeError(f"a batch came through shared-memory ring {ring_id} before the ring itself: every batch of "
                           "a DataLoader worker must be unpickled by one process") from None
    end = max((offset + _nbytes(dtype, shape) for _, dtype, shape, offset in layout), default=0)
    held = buf[base:base + end]
    weakref.finalize(held, _free, buf, slot)
    # NumPy views of `held` would name the ring's buffer as their base, not `held`: going through a tensor of it
    # makes every column keep `held` itself alive (column -> view -> flat.numpy() -> flat -> held)
    flat = torch.from_numpy(held)  # (end,) uint8
    return {k: torch.from_numpy(v) for k, v in views(flat.numpy(), 0, layout).items()}


def in_dataloader_worker() -> bool:
    import torch.utils.data

    return torch.utils.data.get_worker_info() is not None


def _free(buf: np.ndarray, slot: int) -> None:
    buf[slot * 8:(slot + 1) * 8].view(np.int64)[0] = _FREE


def _forget_exited_workers() -> None:
    for ring_id in list(_held):
        try:
            os.kill(int(ring_id.split(":")[0]), 0)
        except ProcessLookupError:
            del _held[ring_id]
        except (PermissionError, ValueError):
            pass
