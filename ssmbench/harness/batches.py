"""Training batches produced ahead of the step, and the fixed validation / test sets, for streamed (atomic) tasks.

The paper's protocol draws a fresh batch every step. Batch `s` is a pure function of (task, config, data seed, s)
(`TaskStream.train_batch`), so background workers can produce steps s+1, s+2, ... while the model trains on s,
and a resumed run continues with exactly the batches it would have seen. Workers are DataLoader processes over a
map-style dataset indexed by step. Validation and test samples come from the same keys `ssmbench generate` uses;
each rank holds only its contiguous slice.

Example:
    >>> feed = TrainFeed("cumsum", {"L": 16}, data_seed=0, batch_size=4, start_step=2, stop_step=4, workers=0)
    >>> [(step, tuple(b["inputs"].shape)) for step, b in feed]
    [(2, (4, 16, 3)), (3, (4, 16, 3))]
    >>> ev = EvalSet.build("cumsum", {"L": 16}, data_seed=0, split="val", n=10, rank=1, world_size=2)
    >>> ev.sample_index.tolist()
    [5, 6, 7, 8, 9]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

MODEL_FIELDS = ("inputs", "targets")


def prefer_fork_safe_numba() -> None:
    """Pick Numba's fork-safe `workqueue` threading layer if no parallel kernel has run in this process yet.

    The generators are `parallel=True` kernels. With the (default) GNU OpenMP layer active, a forked batch worker
    aborts, so the workers would have to be started by a fork server, which re-imports the user's script (and fails
    on scripts without an `if __name__ == "__main__":` guard). Call this before generating anything.
    """
    import numba

    try:
        numba.threading_layer()
    except ValueError:  # not initialised yet
        numba.config.THREADING_LAYER = "workqueue"


def _worker_start_method() -> str:
    import numba

    try:
        return "forkserver" if numba.threading_layer() == "omp" else "fork"
    except ValueError:
        return "fork"


class _StepDataset:
    """Map-style dataset: item `step` is this rank's share of the global batch of that step."""

    def __init__(self, task: str, task_config: Mapping[str, Any], data_seed: int, batch_size: int, rank: int,
                 world_size: int) -> None:
        self.args = (task, dict(task_config), data_seed)
        self.batch_size, self.rank, self.world_size = batch_size, rank, world_size
        self._stream = None

    def __len__(self) -> int:  # steps are unbounded; the sampler decides which ones are drawn
        return 2 ** 62

    def __getitem__(self, step: int) -> dict[str, torch.Tensor]:
        if self._stream is None:  # built lazily, once per worker process
            from ..data.streaming import TaskStream

            self._stream = TaskStream(*self.args[:2], seed=self.args[2])
        batch = self._stream.train_batch(step, self.batch_size, self.rank, self.world_size)
        return {k: torch.from_numpy(np.ascontiguousarray(batch[k])) for k in MODEL_FIELDS}


class TrainFeed:
    """Iterate (step, batch) for steps [start_step, stop_step), produced by `workers` background processes."""

    def __init__(self, task: str, task_config: Mapping[str, Any], data_seed: int, batch_size: int, start_step: int,
                 stop_step: int, rank: int = 0, world_size: int = 1, workers: int = 1, prefetch: int = 4,
                 pin_memory: bool = False) -> None:
        self.start, self.stop = start_step, stop_step
        dataset = _StepDataset(task, task_config, data_seed, batch_size, rank, world_size)
        self.loader = torch.utils.data.DataLoader(
            dataset, batch_size=None, sampler=range(start_step, stop_step), num_workers=workers,
            prefetch_factor=prefetch if workers > 0 else None, pin_memory=pin_memory,
            persistent_workers=False, multiprocessing_context=_worker_start_method() if workers > 0 else None)

    def __iter__(self) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
        return zip(range(self.start, self.stop), self.loader, strict=True)


@dataclass
class EvalSet:
    """This rank's contiguous slice of a fixed evaluation split, as CPU tensors."""

    inputs: torch.Tensor
    targets: torch.Tensor
    sample_index: torch.Tensor
    num_samples: int
    """Size of the whole split (all ranks)."""

    @classmethod
    def build(cls, task: str, task_config: Mapping[str, Any], data_seed: int, split: str, n: int, rank: int = 0,
              world_size: int = 1, chunk: int = 256) -> EvalSet:
        from ..data.streaming import TaskStream

        stream = TaskStream(task, dict(task_config), seed=data_seed)
        start, stop = rank * n // world_size, (rank + 1) * n // world_size
        parts = [stream.samples(split, a, min(a + chunk, stop)) for a in range(start, stop, chunk)]
        if not parts:
            empty = stream.samples(split, 0, 0)
            parts = [empty]
        cat = {k: np.concatenate([p[k] for p in parts]) for k in (*MODEL_FIELDS, "sample_id")}
        return cls(torch.from_numpy(cat["inputs"]), torch.from_numpy(cat["targets"]),
                   torch.from_numpy(cat["sample_id"]), n)

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        for a in range(0, len(self.sample_index), batch_size):
            b = slice(a, a + batch_size)
            yield self.inputs[b], self.targets[b], self.sample_index[b]
