"""Samplers for sharded datasets (`FolderDataset`): shard-local shuffling for training, exact splits for evaluation.

Plain classes with `__iter__`/`__len__` (what `torch.utils.data.DataLoader(sampler=...)` needs); no torch import.
A dataset is described to them by `shard_starts`, the (S + 1,) sample offsets of its shards (one shard when the
dataset has no such attribute).

* `ShardAwareSampler` (training): each epoch permutes the shard order, cuts it into windows of `window` shards
  and shuffles the samples of each window together. A batch then draws from `window` shards at once, so a worker
  keeps at most a few files open and reads stay local, while every sample can still land anywhere in its window
  and the windows themselves come in random order. With `world_size > 1` every rank computes the same order (same
  seed and epoch) and takes every `world_size`-th index of it: disjoint shares of equal length. By default the
  tail that does not divide evenly is dropped (at most `world_size - 1` samples, different ones every epoch);
  `drop_last=False` pads by repeating the first indices of the order instead, as `DistributedSampler` does.
* `EvalShardSampler` (evaluation): rank r of W takes the contiguous slice [r n / W, (r + 1) n / W) in index order,
  so every sample is evaluated exactly once across ranks, without padding or dropping (ranks may differ by one
  sample: run the forward passes on the unwrapped module and all-reduce metric states once at the end).

>>> class Toy:  # three shards of 4, 4 and 2 samples
...     shard_starts = [0, 4, 8, 10]
...     def __len__(self): return 10
>>> import itertools
>>> order = list(ShardAwareSampler(Toy(), seed=0, window=1))  # window=1: one shard at a time
>>> sorted(order) == list(range(10)), [k for k, _ in itertools.groupby(min(i // 4, 2) for i in order)]
(True, [2, 1, 0])
>>> len(ShardAwareSampler(Toy(), rank=1, world_size=4)), len(ShardAwareSampler(Toy(), rank=1, world_size=4, drop_last=False))
(2, 3)
>>> [list(EvalShardSampler(Toy(), rank=r, world_size=3)) for r in range(3)]
[[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
"""

from __future__ import annotations

from collections.abc import Iterator, Sized

import numpy as np

__all__ = ["ShardAwareSampler", "EvalShardSampler", "shard_starts_of"]


def shard_starts_of(dataset: Sized) -> np.ndarray:
    """(S + 1,) int64 sample offsets of the dataset's shards; [0, len] when it does not say."""
    starts = getattr(dataset, "shard_starts", None)
    if starts is None:
        return np.array([0, len(dataset)], dtype=np.int64)
    return np.asarray(starts, dtype=np.int64)


def _dist_default(rank: int | None, world_size: int | None) -> tuple[int, int]:
    if rank is not None and world_size is not None:
        return int(rank), int(world_size)
    import torch.distributed as dist

    ready = dist.is_available() and dist.is_initialized()
    return (int(rank if rank is not None else (dist.get_rank() if ready else 0)),
            int(world_size if world_size is not None else (dist.get_world_size() if ready else 1)))


class ShardAwareSampler:
    """Training order that shuffles shards, then samples within windows of `window` shards (see module doc).

    `shuffle=False` yields this rank's share of 0, 1, ..., n - 1. Call `set_epoch(epoch)` every epoch (or pass
    `epoch=`); the order is a pure function of (seed, epoch, rank, world_size). `rank`/`world_size` default to
    torch.distributed's when it is initialised, else 0 and 1.
    """

    def __init__(self, dataset: Sized, shuffle: bool = True, seed: int = 0, epoch: int = 0, window: int = 4,
                 rank: int | None = None, world_size: int | None = None, drop_last: bool = True) -> None:
        self.starts = shard_starts_of(dataset)
        self.n = int(self.starts[-1])
        self.shuffle, self.seed, self.epoch = shuffle, int(seed), int(epoch)
        self.window = max(1, int(window))
        self.rank, self.world_size = _dist_default(rank, world_size)
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in [0, world_size = {self.world_size})")
        self.drop_last = drop_last
        if drop_last:
            self.per_rank = self.n // self.world_size
        else:
            self.per_rank = -(-self.n // self.world_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def global_order(self) -> np.ndarray:
        """(n,) int64: the epoch's order over the whole split, before it is shared out among ranks."""
        if not self.shuffle:
            return np.arange(self.n, dtype=np.int64)
        rng = np.random.default_rng([self.seed, self.epoch, 0x5A4D])
        shards = rng.permutation(len(self.starts) - 1)
        parts = []
        for w in range(0, len(shards), self.window):
            group = np.concatenate([np.arange(self.starts[s], self.starts[s + 1], dtype=np.int64)
                                    for s in shards[w:w + self.window]])
            parts.append(rng.permutation(group))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def indices(self) -> np.ndarray:
        order = self.global_order()
        total = self.per_rank * self.world_size
        if total > len(order):  # pad (drop_last=False): repeat the start of the order
            reps = -(-total // max(len(order), 1))
            order = np.tile(order, reps)
        return order[:total][self.rank::self.world_size]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.per_rank


class EvalShardSampler:
    """Rank `rank`'s contiguous slice of the split in index order: every sample exactly once over all ranks."""

    def __init__(self, dataset: Sized, rank: int | None = None, world_size: int | None = None) -> None:
        self.n = int(shard_starts_of(dataset)[-1])
        self.rank, self.world_size = _dist_default(rank, world_size)
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in [0, world_size = {self.world_size})")
        self.start = self.rank * self.n // self.world_size
        self.stop = (self.rank + 1) * self.n // self.world_size

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.stop))

    def __len__(self) -> int:
        return self.stop - self.start
