"""Batched transforms and collation for `FolderDataset`: a batch is transformed as whole (B, ...) columns, never
item by item, and crosses a process boundary in its stored dtypes.

* `ColumnPlan` turns the stored arrays of a batch ({name: (B, *stored shape)}) into the yielded columns for one
  transform ("model": float32 pixels scaled to [-1, 1], int64 ids and class targets; "compact": stored dtypes;
  "numpy": the stored arrays themselves) in one vectorised pass per column.
* `Batch` is what `FolderDataset.__getitems__` returns: the items (views into the columns) plus the stored arrays
  and the plan they came from, so that `collate` hands the columns on without re-stacking them.
* In a DataLoader worker `collate` returns `Columns`, a dict of those tensors that pickles as the stored arrays
  (uint8 pixels and tokens, int8 / uint8 targets: 4-8x fewer bytes than float32 / int64) and is rebuilt by the same
  plan when the main process unpickles it: bit for bit the tensors a worker-less loader yields. Except that
  batches of 64 KiB and more go through the worker's ring of reusable shared-memory slots (`ssmbench.data.read.ring`):
  `Batch.of` makes the columns straight in a free slot (`ring.reserve`: no copy at all), and the main process gets
  them as views of it, with no work left to do (where the widened columns would not fit a slot, the stored arrays
  are copied into one and transformed on arrival); smaller batches, and any the ring cannot take, travel as stored
  arrays inside the pickle up to `PIPE_BYTES`, else packed into one new shared-memory tensor, whose file descriptor
  is all that travels. (A tensor
  pickled by a worker otherwise costs one shared-memory file and one descriptor hand-over, a socket connection to
  the worker, each.) A batch changed in the worker after collation (a key added or replaced, a tensor modified in
  place) travels as it is.

torch is imported only by the functions that make tensors.

>>> plan = ColumnPlan("model", "pixels", (1 / 127.5, -1.0), "classify", l_output=4)
>>> stored = {"inputs": np.array([[[0, 255], [51, 102]]], np.uint8),  # (B, H, W) = (1, 2, 2)
...           "targets": np.array([[[0, 1], [1, 2]]], np.uint8), "sample_index": np.array([7])}
>>> {k: (v.dtype.name, v.shape) for k, v in plan.arrays(stored).items()}
{'inputs': ('float32', (1, 4, 1)), 'targets': ('int64', (1, 4)), 'sample_index': ('int64', (1,))}
>>> [round(float(v), 3) for v in plan.arrays(stored)["inputs"].ravel()]  # x / 127.5 - 1
[-1.0, 1.0, -0.6, -0.2]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import ring
from .shm_full import SharedMemoryUnavailable, Unshareable, shared_empty

if TYPE_CHECKING:
    import torch

__all__ = ["ColumnPlan", "Batch", "Columns", "collate", "PIPE_BYTES"]

PIPE_BYTES = 640 << 10
"""Largest batch (stored bytes) that travels from a worker inside its pickle when its ring cannot take it; larger ones
go through one new shared-memory tensor. Measured once on the 2-core VM under other jobs' load (per-thread CPU of the main process, which bounds a
loader with workers): a pipe message cost ~0.5 ms at 512 KiB (PF-128, B = 16) but ~2.2 ms at 1 MiB (PF-512, B = 2:
many 64 KiB pipe reads and page faults), a shared-memory hand-over ~0.7-1 ms at either size (a socket connection
to the worker per descriptor)."""


_Column = tuple[np.ndarray, np.dtype, tuple[float, float] | None]
"""How a column is made: the stored column viewed in the yielded shape, the yielded dtype, (a, b) to scale by."""


@dataclass(frozen=True)
class ColumnPlan:
    """How the stored arrays of a batch become the yielded columns (small and picklable: it travels with a batch).

    `transform` is "model", "compact" or "numpy"; the rest is the stored Spec's: `input_kind` ("pixels", "tokens"
    or real), `input_scale` ((a, b) or None), `target_kind`, `l_output`; `fields` are the extra fields returned.
    """

    transform: str
    input_kind: str
    input_scale: tuple[float, float] | None
    target_kind: str
    l_output: int
    fields: tuple[str, ...] = ()

    def arrays(self, stored: dict[str, np.ndarray], out: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """{name: (B, ...)} in the yielded layout and dtypes: inputs, targets, sample_index, then the extra fields
        ("numpy": the stored arrays unchanged, in their own order). With `out` ({name: array} of `layout(stored)`,
        e.g. a worker's shared-memory slot), each column is written there instead of into new memory."""
        if self.transform == "numpy":
            return stored
        cols: dict[str, np.ndarray] = {}
        for k, (source, dtype, scale) in self._recipe(stored).items():
            if out is not None:
                column = out[k]
                np.copyto(column, source, casting="unsafe")
            else:
                column = source.astype(dtype, copy=scale is not None)
            if scale is not None:  # float32 x * a + b, rounded after each step: bit for bit what the backbone
                column *= dtype.type(scale[0])  # computes from "compact" inputs (a * x.float() + b)
                column += dtype.type(scale[1])
            cols[k] = column
        return cols

    def layout(self, stored: dict[str, np.ndarray]) -> tuple[ring.Layout, int]:
        """Where each yielded column of this batch goes in a slot, and the bytes they take (`ring.layout_of`)."""
        return ring.layout_for({k: (dtype.str, source.shape) for k, (source, dtype, _) in self._recipe(stored).items()})

    def tensors(self, stored: dict[str, np.ndarray],
                out: dict[str, np.ndarray] | None = None) -> dict[str, torch.Tensor]:
        """{name: (B, ...) tensor}: `arrays` as tensors (sharing memory with them: no copy where no cast is needed).
        For "numpy" this is what `default_collate` makes of the NumPy items: the stored arrays as tensors."""
        import torch

        return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in self.arrays(stored, out).items()}

    def _recipe(self, stored: dict[str, np.ndarray]) -> dict[str, _Column]:
        """{name: (the stored column viewed in the yielded shape, the yielded dtype, (a, b) to scale by or None)}."""
        model = self.transform == "model"
        x, y = stored["inputs"], stored["targets"]
        b = len(x)
        inputs: _Column
        targets: _Column
        if self.input_kind == "pixels":  # (B, T, 1) row-major flattening of each image
            x = x.reshape(b, -1, 1)
            inputs = (x, np.dtype(np.float32), self.input_scale or (1.0, 0.0)) if model else (x, x.dtype, None)
        elif self.input_kind == "tokens":  # (B, T) ids
            inputs = (x, np.dtype(np.int64) if model else x.dtype, None)
        else:  # (B, T, d) reals
            inputs = (x, np.dtype(np.float32), None)
        if self.target_kind == "classify":  # (B, l_output) class ids, ignore_index kept
            if int(np.prod(y.shape[1:], dtype=np.int64)) == self.l_output:
                y = y.reshape(b, self.l_output)  # Pathfinder masks: the same row-major order as the pixels
            targets = (y, np.dtype(np.int64) if model else y.dtype, None)
        else:  # regression: float32 as stored
            targets = (y, np.dtype(np.float32), None)
        recipe: dict[str, _Column] = {"inputs": inputs, "targets": targets,
                                      "sample_index": (stored["sample_index"], stored["sample_index"].dtype, None)}
        for k in self.fields:
            v = stored[k]
            recipe[k] = (v, np.dtype(np.float32 if v.dtype.kind == "f" else np.int64) if model else v.dtype, None)
        return recipe


class Batch(list[dict[str, Any]]):
    """The items of one batched fetch, which also carries the batch they were cut from: `columns` ({name: (B, ...)
    tensor}, the collated batch; None until `collate` needs it), `stored` (the arrays as read) and `plan`."""

    def __init__(self, items: list[dict[str, Any]], columns: dict[str, torch.Tensor] | None = None, *,
                 stored: dict[str, np.ndarray] | None = None, plan: ColumnPlan | None = None,
                 reservation: ring.Reservation | None = None) -> None:
        super().__init__(items)
        self.columns, self.stored, self.plan, self.reservation = columns, stored, plan, reservation

    @classmethod
    def of(cls, stored: dict[str, np.ndarray], plan: ColumnPlan) -> Batch:
        """Transform a batch of stored arrays: items are views into the columns (rows of the NumPy arrays for
        "numpy", which makes no tensor). In a DataLoader worker the columns are made straight in a slot of its
        ring where one is free (`ring.reserve`), so that they travel without a copy."""
        if plan.transform == "numpy":
            per_field = [list(v) for v in stored.values()]  # B row views each (NumPy scalars for (B,) fields)
            return cls([dict(zip(stored, r, strict=True)) for r in zip(*per_field, strict=True)],
                       stored=stored, plan=plan)
        reserved = ring.reserve(*plan.layout(stored)) if _in_worker() else None  # no layout in the main process
        reservation, out = reserved if reserved is not None else (None, None)
        columns = plan.tensors(stored, out)
        rows = zip(*(t.unbind(0) for t in columns.values()), strict=True)  # B tuples of views, one per column
        return cls([dict(zip(columns, r, strict=True)) for r in rows], columns, stored=stored, plan=plan,
                   reservation=reservation)


def _version(tensor: torch.Tensor) -> int | None:
    """The tensor's in-place modification counter (None where it keeps none: inference-mode tensors)."""
    try:
        return tensor._version
    except RuntimeError:
        return None


def _rebuild(plan: ColumnPlan, stored: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Unpickling a `Columns`: the same plan applied to the same stored arrays, in the receiving process."""
    return plan.tensors(stored)


def _rebuild_from_ring(plan: ColumnPlan, ring_id: str, tensor: torch.Tensor | None, slot: int, base: int,
                       layout: ring.Layout) -> dict[str, torch.Tensor]:
    """Unpickling a `Columns` whose stored arrays came through a worker's ring: the plan applied to them there (a
    column the plan does not cast stays a view of the slot, which then stays in use as long as it lives)."""
    return plan.tensors({k: t.numpy() for k, t in ring.receive(ring_id, tensor, slot, base, layout).items()})


def _pack(stored: dict[str, np.ndarray]) -> tuple[torch.Tensor, ring.Layout]:
    """The stored arrays copied into one new shared-memory uint8 tensor, and their layout (`ring.layout_of`)."""
    import torch

    layout, total = ring.layout_of(stored)
    flat = shared_empty((total,), torch.uint8)  # (total,) bytes
    ring.copy_in(flat.numpy(), 0, layout, stored)
    return flat, layout


def _rebuild_packed(plan: ColumnPlan, flat: torch.Tensor, layout: ring.Layout) -> dict[str, torch.Tensor]:
    """Unpickling a packed `Columns`: the stored arrays as views into the shared tensor, then the plan."""
    return plan.tensors(ring.views(flat.numpy(), 0, layout))


class Columns(dict[str, "torch.Tensor"]):
    """{name: (B, ...) tensor} collated in a DataLoader worker: it pickles as the stored arrays and its plan (see
    the module docstring), unless it was changed after collation; it unpickles as a plain dict."""

    def __init__(self, columns: dict[str, torch.Tensor], stored: dict[str, np.ndarray], plan: ColumnPlan,
                 reservation: ring.Reservation | None = None) -> None:
        super().__init__(columns)
        self.stored, self.plan, self.reservation = stored, plan, reservation
        self.made = {k: (t, _version(t)) for k, t in columns.items()}

    def unchanged(self) -> bool:
        """The same keys, the same tensor objects, none modified in place since collation."""
        return self.keys() == self.made.keys() and all(
            self[k] is t and v is not None and _version(t) == v for k, (t, v) in self.made.items())

    def __reduce__(self) -> tuple[Any, ...]:
        if not self.unchanged():
            return dict, (dict(self),)
        shipped = None if self.reservation is None else self.reservation.ship()
        if shipped is not None:  # made in a slot of the worker's ring: nothing to copy
            return ring.receive, shipped
        finished = {k: t.numpy() for k, t in self.items()}
        if ring.fits(ring.layout_of(finished)[1]):
            shipped = ring.ship(finished)  # no work left for the main process
            if shipped is not None:
                return ring.receive, shipped
        else:  # widened columns would not fit the ring: the stored arrays do, the plan runs on arrival
            shipped = ring.ship(self.stored)
            if shipped is not None:
                return _rebuild_from_ring, (self.plan, *shipped)
        if sum(v.nbytes for v in self.stored.values()) <= PIPE_BYTES:
            return _rebuild, (self.plan, self.stored)
        try:
            return _rebuild_packed, (self.plan, *_pack(self.stored))
        except SharedMemoryUnavailable as exc:  # raised again where it is unpickled, not dropped with the batch
            return Unshareable(str(exc)).__reduce__()

    def __copy__(self) -> Columns:  # copy.copy (default_convert does one): same tensors, same provenance
        clone = Columns.__new__(Columns)
        dict.update(clone, self)
        clone.stored, clone.plan, clone.made, clone.reservation = self.stored, self.plan, self.made, self.reservation
        return clone


def _in_worker() -> bool:
    return ring.in_dataloader_worker()


def collate(items: list[Any]) -> Any:
    """`collate_fn` for a DataLoader over a FolderDataset: the columns `__getitems__` already made, without the
    copy `default_collate` would make; in a worker, as `Columns`, which cross to the main process in the stored
    dtypes. Any other list goes to `default_collate`."""
    if isinstance(items, Batch) and (items.columns is not None or items.plan is not None):
        columns = items.columns
        if columns is None:  # "numpy" items: `Batch.of` set `plan` and `stored`, and made no tensors
            assert items.plan is not None and items.stored is not None
            columns = items.plan.tensors(items.stored)
        if items.plan is not None and items.stored is not None and _in_worker():
            return Columns(columns, items.stored, items.plan, items.reservation)
        return columns
    import torch

    return torch.utils.data.default_collate(items)
