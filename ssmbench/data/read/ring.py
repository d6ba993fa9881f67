"""A DataLoader worker's ring of reusable shared-memory slots, through which its batches reach the main process.

Sending a 512 KiB batch through the DataLoader's result pipe costs about 1-2 ms of CPU between the two processes
(64 KiB pipe reads, a buffer copied three times, fresh pages faulted in each time: measured with a bare
`multiprocessing.Queue` on the 2-core VM), and a new shared-memory tensor per batch costs a file, a descriptor and a
socket connection to the worker each time. Here each worker makes one shared uint8 tensor once, on its first large
batch: a header of one flag per slot, then `slots` slots of the first batch's size (at most `ring_budget()` in all). The
worker makes a batch's columns (as the consumer will use them) straight in the next free slot (`reserve`; the
dataset does this in `columns.Batch.of`), or copies finished arrays into one (`ship`); what travels is
(ring id, slot, layout) -- and, with the ring's first batch only, the tensor itself (its descriptor, once). The
receiving process keeps the rings it was sent (those of workers that have exited are dropped when a new ring
arrives) and hands out the batch's tensors as views into the slot, without a copy; the slot is marked free when the
last of them is garbage-collected. A worker takes the next free slot; when none is (a consumer holding on to its
batches), or the batch is larger than a slot, `reserve` and `ship` return None and the batch is made in fresh memory
and travels the other way (`ssmbench.data.read.columns`): nothing ever waits. A batch made in a slot but dropped in the
worker (collated by another collate_fn, which copies) gives the slot back when its arrays are garbage-collected;
anything that pickles those arrays themselves gets copies (torch moves a tensor that is not its own shared memory
into a new segment), never views of a slot the worker will reuse.

One consumer per ring: the ring's tensor travels once, so every batch of a worker must be unpickled by the same
process (the DataLoader's main process, or its pin-memory thread), as the DataLoader does; `ship` therefore works in
DataLoader worker processes only (elsewhere it returns None).

Example (where each array of a batch goes in a slot):
    >>> import numpy as np
    >>> layout_of({"inputs": np.zeros((2, 3), np.float32), "sample_index": np.array([4, 9])})
    ([('inputs', '<f4', (2, 3), 0), ('sample_index', '<i8', (2,), 64)], 128)
"""

from __future__ import annotations

import math
import os
import uuid
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

RING_BYTES, SHM_SHARE = 64 << 20, 8
"""Most shared memory one worker's ring takes (slots of the first large batch's size, at most MAX_SLOTS): RING_BYTES,
and never more than 1 / SHM_SHARE of what /dev/shm has free when the ring is made (containers often give /dev/shm
only 64 MiB: a ring then takes at most 8 MiB). A batch too large for MIN_SLOTS slots never uses a ring.
MAX_SLOTS = 8 lets a worker run ahead by prefetch_factor batches (the DataLoader's default 2, the loader benchmark's
4) while the consumer still holds one or two: with fewer slots than that, batches that find none free go the slow
way (measured: PF-128 `model` batches of 3 MiB in the 16 MiB ring of the first version had 5 slots, and 2 workers
fell from 1.58x raw to 1.14x once the reads got fast enough for the workers to run ahead)."""
MAX_SLOTS, MIN_SLOTS = 8, 4
MIN_BATCH_BYTES = 64 << 10
"""Batches below this travel inside their pickle (cheaper than a copy into shared memory)."""
_ALIGN = 64
_FREE, _BUSY = 0, 1

Layout = list[tuple[str, str, tuple[int, ...], int]]  # (name, dtype, shape, byte offset in the slot)
if TYPE_CHECKING:
    Handle = tuple[str, torch.Tensor | None, int, int, Layout]
    """What `receive` takes: (ring id, the ring's tensor or None, slot, byte offset, layout)."""


def layout_of(stored: dict[str, np.ndarray]) -> tuple[Layout, int]:
    """Where each array goes in a slot (offsets aligned to 64 bytes), and the bytes it takes."""
    return layout_for({k: (v.dtype.str, v.shape) for k, v in stored.items()})


def layout_for(arrays: dict[str, tuple[str, tuple[int, ...]]]) -> tuple[Layout, int]:
    """`layout_of` for arrays given as {name: (dtype string, shape)} (arrays yet to be made)."""
    layout, total = [], 0
    for k, (dtype, shape) in arrays.items():
        layout.append((k, dtype, shape, total))
        total += -(-_nbytes(dtype, shape) // _ALIGN) * _ALIGN
    return layout, total


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def copy_in(buf: np.ndarray, base: int, layout: Layout, arrays: dict[str, np.ndarray]) -> None:
    """Copy `arrays` into the bytes `buf` at `base` + their offsets in `layout`."""
    for (_, _, _, offset), v in zip(layout, arrays.values(), strict=True):
        buf[base + offset:base + offset + v.nbytes] = np.ascontiguousarray(v).reshape(-1).view(np.uint8)


def views(buf: np.ndarray, base: int, layout: Layout) -> dict[str, np.ndarray]:
    """The arrays of `layout` as views into the bytes `buf` at `base` (no copy)."""
    return {k: buf[base + offset:base + offset + _nbytes(dtype, shape)].view(dtype).reshape(shape)
            for k, dtype, shape, offset in layout}


def shm_free() -> int | None:
    """Free bytes of /dev/shm; None where there is none (macOS: torch's shared memory lives elsewhere)."""
    try:
        shm = os.statvfs("/dev/shm")
    except OSError:
        return None
    return shm.f_bavail * shm.f_frsize


def ring_budget() -> int:
    """Bytes a new ring may take: RING_BYTES, at most 1 / SHM_SHARE of the free space of /dev/shm (where there is one)."""
    return ring_budgets(1, shm_free())[0]


def ring_budgets(workers: int, free: int | None) -> list[int]:
    """The budgets of `workers` rings made one after another from `free` bytes of /dev/shm (None: no /dev/shm), each
    taking its budget out of what the next one sees. With a container's 64 MiB /dev/shm, four workers get 8, 7, 6.1
    and 5.4 MiB.

    >>> [b >> 20 for b in ring_budgets(3, 64 << 20)], [b >> 20 for b in ring_budgets(2, 2 << 30)]
    ([8, 7, 6], [64, 64])
    """
    budgets: list[int] = []
    for _ in range(max(1, workers)):
        budgets.append(RING_BYTES if free is None else min(RING_BYTES, (free - sum(budgets)) // SHM_SHARE))
    return budgets


def shm_for_full_rings(workers: int) -> int:
    """The free /dev/shm at which every one of `workers` rings gets RING_BYTES.

    >>> shm_for_full_rings(4) >> 20
    704
    """
    return (SHM_SHARE + max(1, workers) - 1) * RING_BYTES


class _Ring:
    """The worker's end: one shared tensor = flags (slots x int64) + slots."""

    def __init__(self, slot_bytes: int, budget: int) -> None:
        import torch

        self.slots, self.slot_bytes = min(MAX_SLOTS, budget // slot_bytes), slot_bytes
        self.header = -(-self.slots * 8 // _ALIGN) * _ALIGN
        self.tensor = torch.zeros(self.header + self.slots * slot_bytes, dtype=torch.uint8).share_memory_()
        self.buf = self.tensor.numpy()  # (bytes,)
        self.flags = self.buf[:self.slots * 8].view(np.int64)  # (slots,)
        self.id = f"{os.getpid()}:{uuid.uuid4().hex}"
        self.announced, self.next = False, 0


_worker_ring: tuple[int, _Ring | None] | None = None  # (pid, ring or None if none could be made); a fork makes its own
_held: dict[str, tuple[torch.Tensor, np.ndarray]] = {}  # consumer's end: ring id -> (tensor, its bytes)


def fits(nbytes: int) -> bool:
    """Whether a batch of `nbytes` could go through this process's ring (the one it has, or the one it would make)."""
    if _worker_ring is not None and _worker_ring[0] == os.getpid():
        return _worker_ring[1] is not None and nbytes <= _worker_ring[1].slot_bytes
    return 0 < nbytes and ring_budget() // nbytes >= MIN_SLOTS


def ship(batch: dict[str, np.ndarray], min_bytes: int | None = None) -> Handle | None:
    """Worker side: copy the batch's arrays into the ring's next slot; return what `receive` takes, `(ring id,
    tensor or None, slot, byte offset, layout)`, or None (too small, too large for a slot, or the slot in use)."""
    layout, total = layout_of(batch)
    ring = _ring_for(total, min_bytes)
    slot = None if ring is None else _take(ring)
    if ring is None or slot is None:
        return None
    copy_in(ring.buf, ring.header + slot * ring.slot_bytes, layout, batch)
    return _handle(ring, slot, layout)


class Reservation:
    """A slot a worker took for a batch it makes in place (`reserve`); `ship()` it once the batch is made."""

    def __init__(self, ring: _Ring, slot: int, layout: Layout) -> None:
        self.ring, self.slot, self.layout, self.shipped = ring, slot, layout, False

    def ship(self) -> Handle | None:
        """What `receive` takes, as `ship` returns it, without a copy (the arrays were made in the slot); None if
        this batch was shipped before."""
        if self.shipped:
            return None
        self.shipped = True
        return _handle(self.ring, self.slot, self.layout)


def reserve(layout: Layout, total: int, min_bytes: int | None = None) -> tuple[Reservation, dict[str, np.ndarray]] | None:
    """Worker side: take the ring's next free slot for a batch of `layout` (`layout_of`) that is to be made in place,
    saving `ship`'s copy; return the reservation and the batch's arrays, views of the slot, to fill. The slot is free
    again once they are all garbage-collected, unless the batch was shipped (the consumer frees it then). None where
    `ship` would refuse a batch of `total` bytes."""
    ring = _ring_for(total, min_bytes)
    slot = None if ring is None else _take(ring)
    if ring is None or slot is None:
        return None
    reservation = Reservation(ring, slot, layout)
    base = ring.header + slot * ring.slot_bytes
    return reservation, _kept_views(ring.buf, base, layout, _release, ring.flags, slot, reservation)


def receive(ring_id: str, tensor: torch.Tensor | None, slot: int, base: int,
            layout: Layout) -> dict[str, torch.Tensor]:
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
    return {k: torch.from_numpy(v) for k, v in _kept_views(buf, base, layout, _free, buf, slot).items()}


def _ring_for(total: int, min_bytes: int | None) -> _Ring | None:
    """This worker's ring (made on the first call) if a batch of `total` bytes is to go through it, else None."""
    global _worker_ring
    if total < (MIN_BATCH_BYTES if min_bytes is None else min_bytes) or not in_dataloader_worker():
        return None
    if _worker_ring is None or _worker_ring[0] != os.getpid():
        budget = ring_budget()
        if total == 0 or budget // total < MIN_SLOTS:
            return None
        try:
            _worker_ring = (os.getpid(), _Ring(total, budget))
        except (OSError, RuntimeError):  # no shared memory to be had: this process ships every batch the other way
            _worker_ring = (os.getpid(), None)
    ring = _worker_ring[1]
    return ring if ring is not None and total <= ring.slot_bytes else None


def _take(ring: _Ring) -> int | None:
    """Mark the first free slot from where the last one was taken busy and return it; None if a consumer still
    holds every slot (the batch then goes another way)."""
    free = [j % ring.slots for j in range(ring.next, ring.next + ring.slots) if ring.flags[j % ring.slots] == _FREE]
    if not free:
        return None
    slot = free[0]
    ring.flags[slot] = _BUSY
    ring.next = (slot + 1) % ring.slots
    return slot


def _handle(ring: _Ring, slot: int, layout: Layout) -> Handle:
    """What travels for a batch in `slot`: the ring's tensor goes with its first batch only."""
    tensor = None if ring.announced else ring.tensor
    ring.announced = True
    return ring.id, tensor, slot, ring.header + slot * ring.slot_bytes, layout


def _kept_views(buf: np.ndarray, base: int, layout: Layout, on_free: Callable[..., None],
                *args: object) -> dict[str, np.ndarray]:
    """The arrays of `layout` as views into `buf` at `base`; `on_free(*args)` runs once they are all gone."""
    import torch

    end = max((offset + _nbytes(dtype, shape) for _, dtype, shape, offset in layout), default=0)
    held = buf[base:base + end]
    weakref.finalize(held, on_free, *args)
    # NumPy views of `held` would name the ring's buffer as their base, not `held`: going through a tensor of it
    # makes every column keep `held` itself alive (column -> view -> flat.numpy() -> flat -> held)
    flat = torch.from_numpy(held)  # (end,) uint8
    return views(flat.numpy(), 0, layout)


def _release(flags: np.ndarray, slot: int, reservation: Reservation) -> None:
    if not reservation.shipped:  # made in the worker and dropped there (e.g. collated by another collate_fn)
        flags[slot] = _FREE


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
