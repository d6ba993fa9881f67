"""Training batches and evaluation sets read from a dataset folder (ListOps-Subtrees, ListOps, Pathfinder), and the
two choosers the training loop calls for any task: `feed_for` and `eval_set_for`.

Training walks the folder's train split in epochs. The order of epoch e is `ShardAwareSampler(seed=data.seed,
epoch=e)` (shards shuffled, samples shuffled within windows of shards; under DDP each rank takes every W-th index of
the same order), and step s is batch p = s mod E of epoch e = s div E, with E = (n_train div W) div (B / W) steps
per epoch (the incomplete last batch is dropped). Batch s is therefore a pure function of (folder, data seed, s, W):
a resumed run sees exactly the batches of an uninterrupted one, and background workers read ahead by step as for
streamed tasks. Items cross process boundaries in the folder's stored dtypes (`transform="compact"`: uint8 pixels
and tokens); the backbone widens them and scales the pixels on the device.

Evaluation reads the first min(n, split size) samples of val / test; rank r of W takes the contiguous slice
`EvalShardSampler` gives it, so every sample is scored exactly once across ranks. ListOps-Subtrees items carry
`node_height` / `node_op` for the Figure-2 breakdowns.

Example (a tiny Pathfinder folder of 16 training images, batch 4 -> 4 steps per epoch):
    >>> import tempfile
    >>> from ssmbench.data.make.generate import generate_dataset
    >>> from ssmbench.task_config import resolve_config
    >>> tmp = tempfile.TemporaryDirectory()
    >>> config = resolve_config("pathfinder", size=32)[1]
    >>> folder = generate_dataset("pathfinder", config, out=tmp.name, n=24, split={"train": 16, "val": 4,
    ...                           "test": 4}, samples_per_shard=8, quiet=True).path
    >>> steps = FolderSteps(folder, data_seed=0, batch_size=4)
    >>> steps.steps_per_epoch, steps.position(9)
    (4, (2, 1))
    >>> b = steps[9]
    >>> tuple(b["inputs"].shape), str(b["inputs"].dtype), tuple(b["targets"].shape)
    ((4, 1024, 1), 'torch.uint8', (4, 1024))
    >>> sorted(sum((steps.indices(s).tolist() for s in range(8, 12)), [])) == list(range(16))  # epoch 2
    True
    >>> ev = FolderEvalSet.build(folder, "val", n=3, rank=1, world_size=2)
    >>> [idx.tolist() for _, _, idx, _ in ev.batches(8)]
    [[1, 2]]
    >>> tmp.cleanup()
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...errors import ConfigError, DatasetError


def breakdowns_for(cfg: Any) -> tuple[str, ...]:
    """The stored fields a run's accuracy is broken down by (`policy.metric_breakdowns`: Figure 2 of ListOps)."""
    rt = cfg.resolved_task
    return tuple(rt.task.policy.breakdowns(rt.config))


def _from_folder(cfg: Any) -> bool:
    return bool(cfg.resolved_task.task.policy.reads_folder)


def _open(path: str | Path, split: str, task: str | None, dataset_id: str | None, fields: tuple[str, ...] = ()):
    from ...data.read.loader import open_folder

    ds = open_folder(path, split, fields=fields, transform="compact", expect_task=task)
    if dataset_id and ds.dataset_id != dataset_id:
        raise DatasetError(f"{path} now holds dataset {ds.dataset_id}, not {dataset_id} that this run started on "
                           "(rebuilt since?)", "point -o data.path at the original folder, or start a new run")
    return ds


class FolderSteps:
    """Map-style dataset: item `step` is this rank's share of the global batch of that training step."""

    def __init__(self, path: str | Path, data_seed: int, batch_size: int, rank: int = 0, world_size: int = 1,
                 task: str | None = None, dataset_id: str | None = None, window: int = 4) -> None:
        if batch_size % world_size:
            raise ConfigError("train.batch_size", f"{batch_size} is not divisible by the world size {world_size}")
        self.ds = _open(path, "train", task, dataset_id)
        self.seed, self.rank, self.world_size, self.window = int(data_seed), rank, world_size, window
        self.local = batch_size // world_size
        self.steps_per_epoch = (len(self.ds) // world_size) // self.local
        if self.steps_per_epoch < 1:
            raise ConfigError("train.batch_size", f"{batch_size} exceeds the {len(self.ds)} training samples of "
                              f"{path}", "lower train.batch_size or generate a larger folder")
        self._epoch: int | None = None
        self._order = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:  # steps are unbounded; the sampler decides which ones are drawn
        return 2 ** 62

    def position(self, step: int) -> tuple[int, int]:
        """(epoch, batch within the epoch) of a training step."""
        return divmod(int(step), self.steps_per_epoch)

    def indices(self, step: int) -> np.ndarray:
        """(B / W,) sample indices of this rank's share of step `step`."""
        from ...data.read.samplers import ShardAwareSampler

        epoch, pos = self.position(step)
        if epoch != self._epoch:  # one permutation per epoch and process
            self._order = ShardAwareSampler(self.ds, seed=self.seed, epoch=epoch, window=self.window,
                                            rank=self.rank, world_size=self.world_size).indices()
            self._epoch = epoch
        return self._order[pos * self.local:(pos + 1) * self.local]

    def __getitem__(self, step: int) -> dict[str, torch.Tensor]:
        return self.ds.collate(self.ds.__getitems__(self.indices(step)))

    def shards_for(self, start_step: int, stop_step: int) -> np.ndarray:
        """The train shards this rank reads in steps [start_step, stop_step): all of them from a whole epoch on."""
        if stop_step - start_step >= self.steps_per_epoch:
            return np.arange(len(self.ds.shard_starts) - 1)
        if stop_step <= start_step:
            return np.zeros(0, dtype=np.int64)
        return self.ds.shards_of(np.concatenate([self.indices(s) for s in range(start_step, stop_step)]))


class FolderFeed:
    """Iterate (step, batch) for steps [start_step, stop_step) of a folder, read by `workers` processes."""

    def __init__(self, steps: FolderSteps, start_step: int, stop_step: int, workers: int = 1, prefetch: int = 4,
                 pin_memory: bool = False) -> None:
        from .batches import step_loader

        self.start, self.stop, self.steps = start_step, stop_step, steps
        self.loader = step_loader(steps, range(start_step, stop_step), workers, prefetch, pin_memory)

    def check_files(self) -> None:
        """Size and sha256 of the train shards these steps read, against the manifest (`DamagedDataError`, exit 3)."""
        self.steps.ds.check_files(self.steps.shards_for(self.start, self.stop))

    def __iter__(self) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
        from .batches import iterate_or_read_here

        def rest(done: int) -> Iterator[dict[str, torch.Tensor]]:  # read here, once /dev/shm is full
            return (self.steps[step] for step in range(self.start + done, self.stop))

        with worker_errors_in_one_line():
            yield from zip(range(self.start, self.stop), iterate_or_read_here(self.loader, rest), strict=True)


@contextmanager
def worker_errors_in_one_line() -> Iterator[None]:
    """A DatasetError raised in a DataLoader worker (a damaged shard: `DamagedDataError`, exit 3) comes back as an
    exception of its type whose text is the worker's traceback; re-raise it as the one line it was."""
    try:
        yield
    except DatasetError as exc:
        kind = type(exc)
        prefix = f"{kind.__module__}.{kind.__qualname__}: "
        lines = [line for line in str(exc).splitlines() if line.startswith(prefix)]
        if not lines:
            raise
        raise kind(lines[-1][len(prefix):]) from None


class _Prefix:
    """The first n samples of a dataset, described to the samplers by its shard offsets."""

    def __init__(self, starts: np.ndarray, n: int) -> None:
        self.shard_starts = np.minimum(starts, n)

    def __len__(self) -> int:
        return int(self.shard_starts[-1])


class FolderEvalSet:
    """This rank's contiguous slice of the first `num_samples` samples of a folder's val or test split."""

    def __init__(self, ds: Any, n: int, rank: int, world_size: int, workers: int = 0) -> None:
        from ...data.read.samplers import EvalShardSampler

        self.ds, self.workers = ds, workers
        self.num_samples = min(int(n), len(ds))
        if int(n) > len(ds) and rank == 0:
            logging.getLogger(__name__).warning(
                "%s holds %d %s samples, fewer than the %d asked for: all %d are scored", ds.root, len(ds),
                ds.split, int(n), len(ds))
        self.sampler = EvalShardSampler(_Prefix(ds.shard_starts, self.num_samples), rank, world_size)
        self.sample_index = torch.arange(self.sampler.start, self.sampler.stop)
        ds.check_files(ds.shards_of(self.sample_index.numpy()))  # before any is read (each file hashed once)

    @classmethod
    def build(cls, path: str | Path, split: str, n: int, rank: int = 0, world_size: int = 1,
              task: str | None = None, dataset_id: str | None = None, fields: tuple[str, ...] = (),
              workers: int = 0) -> FolderEvalSet:
        return cls(_open(path, split, task, dataset_id, fields), n, rank, world_size, workers)

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]]:
        """(inputs, targets, sample_index, {extra field: (B, T)}) in sample order."""
        from .batches import iterate_or_read_here, worker_options

        loader = torch.utils.data.DataLoader(self.ds, batch_size=batch_size, sampler=self.sampler,
                                             collate_fn=self.ds.collate, **worker_options(self.workers))

        def rest(done: int) -> Iterator[Any]:  # the batches after the first `done`, read here (a full /dev/shm)
            order = list(self.sampler)
            return (self.ds.collate(self.ds.__getitems__(order[a:a + batch_size]))
                    for a in range(done * batch_size, len(order), batch_size))

        with worker_errors_in_one_line():
            for b in iterate_or_read_here(loader, rest):
                yield b["inputs"], b["targets"], b["sample_index"], {k: b[k] for k in self.ds.fields}

    def head(self, k: int) -> dict[str, torch.Tensor]:
        """The first k samples of the split (all ranks alike): for probes and figures."""
        return self.ds.collate(self.ds.__getitems__(list(range(min(k, len(self.ds))))))


def feed_for(cfg: Any, start_step: int, env: Any, pin_memory: bool = False) -> Any:
    """The training batches of steps [start_step, train.steps) for this rank: a folder or the task's stream."""
    d, t = cfg.data, cfg.train
    if _from_folder(cfg):
        steps = FolderSteps(_path(cfg), d.seed, t.batch_size, env.rank, env.world_size, cfg.task, d.dataset_id)
        feed = FolderFeed(steps, start_step, t.steps, d.workers, d.prefetch, pin_memory)
        check_run_files(cfg, feed, env)
        return feed
    from ..runtime.lengths import train_lengths
    from .batches import TrainFeed

    return TrainFeed(cfg.resolved_task, None, d.seed, t.batch_size, start_step, t.steps, env.rank,
                     env.world_size, d.workers, d.prefetch, pin_memory=pin_memory, train_samples=d.train_samples,
                     local_processes=env.local_world_size, lengths=train_lengths(cfg))


def check_run_files(cfg: Any, feed: FolderFeed, env: Any) -> None:
    """Before the first step: size and sha256 of every shard file this rank will read (the train shards of its
    steps, the val and test samples it scores), against the manifest, hashed in threads, each file once per process;
    a `DamagedDataError` (exit 3) naming the first that differs. Cheap next to training; `ssmbench verify --deep`
    (decoded content) stays the full check."""
    from ...data.read.samplers import EvalShardSampler

    feed.check_files()
    for split, n in (("val", cfg.eval.val_samples), ("test", cfg.eval.test_samples)):
        ds = _open(_path(cfg), split, cfg.task, cfg.data.dataset_id)
        part = EvalShardSampler(_Prefix(ds.shard_starts, min(int(n), len(ds))), env.rank, env.world_size)
        ds.check_files(ds.shards_of(np.arange(part.start, part.stop)))


def eval_set_for(cfg: Any, split: str, rank: int = 0, world_size: int = 1, n: int | None = None) -> Any:
    """This rank's part of the val / test set of a run (n: default eval.val_samples / eval.test_samples)."""
    if n is None:
        n = cfg.eval.val_samples if split == "val" else cfg.eval.test_samples
    if _from_folder(cfg):
        fields = breakdowns_for(cfg)
        return FolderEvalSet.build(_path(cfg), split, n, rank, world_size, cfg.task, cfg.data.dataset_id, fields,
                                   min(cfg.data.workers, 2))
    from .batches import EvalSet

    return EvalSet.build(cfg.resolved_task, None, cfg.data.seed, split, n, rank, world_size)


def probe_inputs(cfg: Any, split: str, k: int) -> torch.Tensor:
    """(k, T, ...) model inputs of the first k samples of a split (causality checks, the output probe)."""
    if _from_folder(cfg):
        ds = _open(_path(cfg), split, cfg.task, cfg.data.dataset_id)
        return ds.collate(ds.__getitems__(list(range(min(k, len(ds))))))["inputs"]
    from .batches import EvalSet

    return EvalSet.build(cfg.resolved_task, None, cfg.data.seed, split, k).inputs


def _path(cfg: Any) -> str:
    if not cfg.data.path:
        raise ConfigError("data.path", f"{cfg.task} trains from a dataset folder and this config names none",
                          "resolve the config with `ssmbench eval` / `evaluate(data=...)`, or set -o data.path=PATH")
    if not (Path(cfg.data.path) / "manifest.json").is_file():
        raise ConfigError("data.path", f"the dataset folder {cfg.data.path} of this run is gone (moved or deleted?)",
                          "point at its new place: `ssmbench eval --resume RUN -o data.path=NEW`, or "
                          "`ssmbench eval --checkpoint CKPT --data NEW`")
    return cfg.data.path
