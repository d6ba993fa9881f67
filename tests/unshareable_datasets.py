"""Datasets for the full-/dev/shm tests (`tests/data/read/test_shm_full.py`) whose one item cannot be shared by a
DataLoader worker. In a module of their own on pytest's pythonpath, so that workers started by a fork server (which
import what they unpickle by name) find them.
"""

from __future__ import annotations

from ssmbench.data.read.ring import in_dataloader_worker
from ssmbench.data.read.shm_full import SharedMemoryUnavailable, Unshareable

NO_SPACE = "unable to allocate shared memory(shm): No space left on device (28)"


class FailsOnce:
    """A step dataset whose item `bad` cannot be shared: raised in the worker (`how="raise"`, as `shared_empty`
    does) or unpickled as the error in the training process (`how="pickle"`, as a collated batch's `__reduce__`
    does). Module level, so DataLoader workers of any start method can unpickle it."""

    def __init__(self, dataset, bad, how: str) -> None:
        self.dataset, self.bad, self.how = dataset, bad, how

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, item):
        if item == self.bad and in_dataloader_worker():
            if self.how == "raise":
                raise SharedMemoryUnavailable(NO_SPACE)
            return Unshareable(NO_SPACE)
        return self.dataset[item]


class EvalFailsOnce:
    """A folder split whose batch starting at sample `bad` cannot be shared (raised in the worker); the rest as is."""

    def __init__(self, ds, bad: int) -> None:
        self.ds, self.bad, self.fields, self.collate = ds, bad, ds.fields, ds.collate

    def __len__(self) -> int:
        return len(self.ds)

    def __getitems__(self, indices):
        if int(indices[0]) == self.bad and in_dataloader_worker():
            raise SharedMemoryUnavailable(NO_SPACE)
        return self.ds.__getitems__(indices)
