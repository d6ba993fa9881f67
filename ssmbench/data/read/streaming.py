"""Fresh training batches without touching the disk: the paper's protocol of a new batch at every step.

Step s with global batch B uses train indices s*B .. s*B + B - 1; with W ranks, rank r takes the r-th contiguous
slice of B/W. Val and test come from exactly the keys `ssmbench generate` uses, so a streamed sample and a stored
sample with the same (split, index) are byte-identical. The config resolves as `ssmbench generate` resolves it:
`{"size": 512}` is the pathfinder 512 preset, `{"size": 200}` the 256 preset resized, `{"L": 512}` the 512 preset,
then the other keys on top.

Tasks that drop duplicates (`Task.deduplicate`, the ListOps tasks) cannot be streamed: their stored rows are the
survivors of a candidate stream de-duplicated across the whole dataset, so val row i depends on every training
candidate before it. `TaskStream` refuses them with a DatasetError; build the dataset with `ssmbench generate`
and read it with `ssmbench.data.read.loader.open_folder`.

>>> from ssmbench.data.read.streaming import TaskStream
>>> stream = TaskStream("cumsum", {"L": 16}, seed=0)
>>> batch = stream.train_batch(step=3, batch_size=4)
>>> batch["inputs"].shape, batch["sample_id"].tolist()
((4, 16, 3), [12, 13, 14, 15])
>>> bool((stream.train_batch(3, 4, rank=1, world_size=2)["inputs"] == batch["inputs"][2:]).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ConfigError, DatasetError
from ...seeding import keys_for
from ...task_config import ResolvedTask

if TYPE_CHECKING:
    from ...api import Task, TaskConfig


class TaskStream:
    """Deterministic in-memory samples of one (task, config, root seed).

    `task`: a name, or a `ResolvedTask` (a run's: its config and Spec are used as they are, nothing is resolved
    again). `config` (with a name): a config object, or a mapping of field values resolved like `ssmbench
    generate` (the preset that `L` / `size` selects, then the other values); None is the task's default preset.
    """

    def __init__(self, task: str | ResolvedTask, config: TaskConfig | Mapping[str, Any] | None = None,
                 seed: int = 0) -> None:
        resolved = ResolvedTask.settle(task, config)
        self.task: Task[Any] = resolved.task
        if self.task.deduplicate:
            raise DatasetError(f"{self.task.name} cannot be streamed: its stored samples are de-duplicated across "
                               "the whole dataset, so they are not the raw key stream",
                               f"build it with `ssmbench generate {self.task.name}` and read it with "
                               "ssmbench.open_dataset(folder, split)")
        self.resolved = resolved
        self.config = resolved.config
        self.seed = seed
        self.spec = resolved.spec
        self._cfg = resolved.config.to_dict()
        self._orders: dict[tuple[int, int], np.ndarray] = {}  # finite training sets: the last epochs' orders
        self._keys: dict[str, np.ndarray] = {}  # keys of samples 0 .. n-1 per split, for `samples_at`

    def samples(self, split: str, start: int, stop: int) -> dict[str, np.ndarray]:
        """Samples [start, stop) of a split, with their `sample_id`."""
        keys = keys_for(self.task.name, self.task.version, self._cfg, self.seed, split, start, stop,
                        self.task.stream_exempt)
        out = self.task.generate(self.config, keys)
        out["sample_id"] = np.arange(start, stop, dtype=np.int64)
        return out

    def train_batch(self, step: int, batch_size: int, rank: int = 0, world_size: int = 1,
                    train_samples: int | None = None) -> dict[str, np.ndarray]:
        """This rank's share of the global batch of training step `step`.

        Without `train_samples` indices never repeat across steps (a fresh stream). With it, training sees only the
        first `train_samples` samples of the train split, in epochs: the global batch positions p = step * B ...
        run through epoch p // N in the order `epoch_order(epoch)` (a permutation of 0 .. N-1 drawn from the data
        seed and the epoch), as MAD's DataLoader reshuffles its fixed training set every epoch.
        """
        if batch_size % world_size:
            raise ConfigError("batch_size", f"{batch_size} is not divisible by the world size {world_size}")
        if not 0 <= rank < world_size or step < 0:
            raise ConfigError("rank", f"need 0 <= rank < world_size and step >= 0, got rank={rank}, step={step}")
        local = batch_size // world_size
        start = step * batch_size + rank * local
        if train_samples is None:
            return self.samples("train", start, start + local)
        positions = np.arange(start, start + local, dtype=np.int64)  # (local,) global positions in the epoch stream
        epochs, slots = np.divmod(positions, train_samples)
        index = np.empty(local, dtype=np.int64)
        for epoch in np.unique(epochs).tolist():
            here = epochs == epoch
            index[here] = self.epoch_order(int(epoch), train_samples)[slots[here]]
        return self.samples_at("train", index)

    def epoch_order(self, epoch: int, n: int) -> np.ndarray:
        """The order of train samples 0 .. n-1 in `epoch` of a finite training set: a pure function of (data seed,
        n, epoch), cached for the last two epochs a worker asked for."""
        cache = self._orders
        if (epoch, n) not in cache:
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, n, epoch, 0x45504F43]))  # "EPOC"
            cache[(epoch, n)] = rng.permutation(n)
            while len(cache) > 2:
                cache.pop(next(iter(cache)))
        return cache[(epoch, n)]

    def samples_at(self, split: str, index: np.ndarray) -> dict[str, np.ndarray]:
        """Samples at arbitrary indices of a split, equal to `samples(split, i, i + 1)` for each i."""
        stop = int(index.max()) + 1 if len(index) else 0
        cache = self._keys
        keys = cache.get(split)
        if keys is None or len(keys) < stop:
            keys = keys_for(self.task.name, self.task.version, self._cfg, self.seed, split, 0, stop,
                            self.task.stream_exempt)
            cache[split] = keys
        out = self.task.generate(self.config, keys[index])
        out["sample_id"] = index.astype(np.int64)
        return out
