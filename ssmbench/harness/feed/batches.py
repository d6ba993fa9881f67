"""Training batches produced ahead of the step, and the fixed validation / test sets, for streamed (atomic) tasks.

The paper's protocol draws a fresh batch every step. Batch `s` is a pure function of (task, config, data seed, s)
(`TaskStream.train_batch`), so background workers can produce steps s+1, s+2, ... while the model trains on s,
and a resumed run continues with exactly the batches it would have seen. Workers are DataLoader processes over a
map-style dataset indexed by a range of steps: a worker stacks several consecutive steps into one message
(`steps_per_message`, automatic: up to 16 steps and about 16 MiB, or less so that the worker's shared-memory ring has
a slot for every message in flight), because handing a message from a worker to the training process costs more
than generating a small atomic batch. A message is stacked straight into a slot of the worker's ring and arrives as a
view of it (`stacked`). Validation and test samples come from the same keys `ssmbench generate` uses; each rank holds
only its contiguous slice.

Example:
    >>> feed = TrainFeed("cumsum", {"L": 16}, data_seed=0, batch_size=4, start_step=2, stop_step=4, workers=0)
    >>> [(step, tuple(b["inputs"].shape)) for step, b in feed]
    [(2, (4, 16, 3)), (3, (4, 16, 3))]
    >>> ev = EvalSet.build("cumsum", {"L": 16}, data_seed=0, split="val", n=10, rank=1, world_size=2)
    >>> ev.sample_index.tolist()
    [5, 6, 7, 8, 9]
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import torch

from ...data.read.ring import RING_BYTES
from ...task_config import ResolvedTask
from .message_size import auto_steps_per_message, message_bytes, node_workers

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


def worker_options(workers: int) -> dict[str, Any]:
    """DataLoader keyword arguments for `workers` background processes: the start method (fork, or a fork server
    when GNU OpenMP already runs in this process), `threads.data_worker_init` (one thread, signals ignored), and a
    generator of its own: a DataLoader otherwise draws its base seed from torch's global generator whenever it
    starts iterating, which would shift the dropout masks of a resumed run against an uninterrupted one (the data
    itself is keyed by step, not by that seed)."""
    import numba

    from ..runtime.threads import data_worker_init

    generator = torch.Generator().manual_seed(0)
    if workers <= 0:
        return {"num_workers": 0, "generator": generator}
    try:
        method = "forkserver" if numba.threading_layer() == "omp" else "fork"
    except ValueError:
        method = "fork"
    return {"num_workers": workers, "multiprocessing_context": method, "worker_init_fn": data_worker_init,
            "generator": generator}


def step_loader(dataset: Any, sampler: Any, workers: int, prefetch: int, pin_memory: bool) -> Any:
    """A DataLoader whose items are whole batches (`dataset[item]` for each item of `sampler`), read ahead by
    `workers` background processes (0: in this process), each keeping `prefetch` items ready."""
    return torch.utils.data.DataLoader(
        dataset, batch_size=None, sampler=sampler, prefetch_factor=prefetch if workers > 0 else None,
        pin_memory=pin_memory, persistent_workers=False, **worker_options(workers))


def iterate_loader(loader: Any) -> Iterator[Any]:
    """Iterate a DataLoader and shut its worker processes down as soon as the iteration ends, also on an error.

    The first item is handed out only once every worker has delivered its first item (the DataLoader gives the
    first items to the workers in turn): the start-up of all workers (process start, imports, the first batch)
    falls before the first training step, which the trainer does not time, instead of into a later step as a data
    wait. On a fast GPU step the later workers' start-up otherwise showed as one ~100 ms wait in the first
    messages (issue 25). Holding those items costs one item per worker more memory, at start only.

    Workers ignore SIGTERM (`threads.data_worker_init`), so they must never be left to the interpreter's exit,
    whose clean-up terminates them with SIGTERM and then waits for them: an iterator kept alive by an exception's
    traceback would hang the exit. `_shutdown_workers` is what the iterator's own `__del__` calls.
    """
    from ...data.read.shm_full import start_workers_or_read_here

    start_workers_or_read_here(loader)  # a full /dev/shm: read in this process, with a warning, not a traceback
    it = iter(loader)
    try:
        started = collections.deque(itertools.islice(it, max(1, loader.num_workers)))  # every worker's first item
        while started:
            yield started.popleft()
        yield from it
    finally:
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


def iterate_or_read_here(loader: Any, rest: Callable[[int], Iterable[Any]]) -> Iterator[Any]:
    """`iterate_loader(loader)`, and if a worker could not put an item in shared memory (a full /dev/shm:
    `SharedMemoryUnavailable`), one warning and then `rest(n)`: the items after the first n, read in this process
    (the workers are shut down by then). The items are functions of their index, so they are the same either way."""
    from ...data.read.shm_full import SharedMemoryUnavailable, say_reading_here

    done = 0
    try:
        for item in iterate_loader(loader):
            yield item
            done += 1
    except SharedMemoryUnavailable as exc:
        say_reading_here(loader.num_workers, str(exc).strip().splitlines()[-1], "later")
        yield from rest(done)


class _StepDataset:
    """Map-style dataset: item `(a, b)` stacks this rank's shares of the global batches of steps a .. b-1. With
    `lengths` (`runtime.lengths.TrainLengths`), step s is drawn from the task's stream at the length of step s."""

    def __init__(self, task: ResolvedTask, data_seed: int, batch_size: int, rank: int, world_size: int,
                 train_samples: int | None = None, lengths: Any = None) -> None:
        self.task, self.data_seed = task, data_seed  # pickled to each worker with its config and Spec
        self.batch_size, self.rank, self.world_size = batch_size, rank, world_size
        self.train_samples = train_samples
        self.lengths = lengths
        self._stream = None
        self._streams: dict[int, Any] = {}  # length -> TaskStream, made once per worker process

    def __len__(self) -> int:  # steps are unbounded; the sampler decides which ones are drawn
        return 2 ** 62

    def __getitem__(self, steps: tuple[int, int]) -> dict[str, torch.Tensor]:
        if self._stream is None:  # built lazily, once per worker process
            from ...data.read.streaming import TaskStream

            self._stream = TaskStream(self.task, seed=self.data_seed)
        batches = [self._stream_of(step).train_batch(step, self.batch_size, self.rank, self.world_size,
                                                     self.train_samples) for step in range(*steps)]
        if self.lengths is not None:  # steps of several lengths: each padded to the message's longest
            return stacked({key: padded([b[key] for b in batches]) for key in MODEL_FIELDS})
        return stacked({key: [b[key] for b in batches] for key in MODEL_FIELDS})

    def _stream_of(self, step: int) -> Any:
        """The stream step `step` draws from: the run's, or the one at the step's length."""
        if self.lengths is None:
            return self._stream
        length = self.lengths.at(step)
        if length not in self._streams:
            from ...data.read.streaming import TaskStream
            from ..runtime.lengths import at_length

            self._streams[length] = TaskStream(at_length(self.task, length), seed=self.data_seed)
        return self._streams[length]


def stacked(parts: Mapping[str, list[np.ndarray]]) -> Any:
    """{key: (k, ...) tensor}: each key's k arrays stacked, e.g. (k, B_rank, T, d_input) inputs and (k, B_rank,
    l_output, d_output) targets. In a DataLoader worker the stack is made straight in a free slot of the worker's
    shared-memory ring (`ring.reserve`), when the message is large enough and a slot is free, and travels as (ring,
    slot): the training process then maps no new shared memory, takes no file descriptor over a socket, and unmaps
    nothing per message (on a 1-layer step at the paper setting those held the GIL for about 2 ms a message, stalling
    a host-bound training thread; `benchmarks/harness/feed_host_cost.py --beside-step`). In a worker without a free slot,
    the stack is made in new shared memory allocated here (`shm_full.shared_empty`: a full /dev/shm then raises in
    the worker and reaches the training process, instead of dropping the message); in the training process, plain
    tensors.

    >>> {k: tuple(v.shape) for k, v in stacked({"inputs": [np.zeros((2, 5, 1), np.float32)] * 3}).items()}
    {'inputs': (3, 2, 5, 1)}
    """
    from ...data.read import ring
    from ...data.read.shm_full import shared_empty

    layout, total = ring.layout_for({k: (v[0].dtype.str, (len(v), *v[0].shape)) for k, v in parts.items()})
    reserved = ring.reserve(layout, total)
    if reserved is None and ring.in_dataloader_worker():  # too small, too large, or every slot still in use
        shared = {key: shared_empty((len(v), *v[0].shape), torch.from_numpy(v[0][:0]).dtype)
                  for key, v in parts.items()}  # here, not in the feeder thread, where a failure drops the message
        for key, v in parts.items():
            np.stack(v, out=shared[key].numpy())
        return shared
    if reserved is None:  # in this process
        return {key: torch.from_numpy(np.stack(v)) for key, v in parts.items()}
    reservation, out = reserved
    for key, v in parts.items():
        np.stack(v, out=out[key])
    return _InRing(reservation, out)


def padded(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The arrays zero-padded at the end of each axis to the largest shape among them, so that they stack (the
    steps of one message at different lengths; `TrainFeed.trim` cuts each back to its own length).

    >>> [a.shape for a in padded([np.ones((2, 3)), np.ones((2, 5))])]
    [(2, 5), (2, 5)]
    """
    shape = tuple(max(sizes) for sizes in zip(*(a.shape for a in arrays), strict=True))
    out = []
    for a in arrays:
        if a.shape != shape:  # (np.pad costs ~10x more for these small arrays)
            grown = np.zeros(shape, a.dtype)
            grown[tuple(slice(0, n) for n in a.shape)] = a
            a = grown
        out.append(a)
    return out


class _InRing:
    """A message made in a slot of the worker's ring: it pickles as the slot's handle, which `ring.receive` turns
    into {key: tensor}, views of the slot, in the training process (the slot is free again once they are gone)."""

    def __init__(self, reservation: Any, arrays: dict[str, np.ndarray]) -> None:
        self.reservation, self.arrays = reservation, arrays

    def __reduce__(self) -> tuple[Any, ...]:
        from ...data.read import ring

        shipped = self.reservation.ship()
        if shipped is not None:
            return ring.receive, shipped
        return _tensors, ({k: np.array(v) for k, v in self.arrays.items()},)  # pickled again: copies


def _tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


class StepRanges(Sequence[tuple[int, int]]):
    """The (a, b) step ranges of the messages of steps [start, stop), k steps each (the last one shorter): computed
    when asked for, so a run of a billion steps holds no list of them (an eager list of a huge `train.steps`
    filled the memory before the first step).

    >>> r = StepRanges(range(0, 10, 4), 10)
    >>> list(r), len(r), r[-1], list(r[1:])
    ([(0, 4), (4, 8), (8, 10)], 3, (8, 10), [(4, 8), (8, 10)])
    >>> len(StepRanges(range(0, 10 ** 18, 16), 10 ** 18))
    62500000000000000
    """

    def __init__(self, starts: range, stop: int) -> None:
        self.starts, self.stop = starts, stop

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, i: slice) -> StepRanges: ...

    def __getitem__(self, i: int | slice) -> tuple[int, int] | StepRanges:
        if isinstance(i, slice):
            return StepRanges(self.starts[i], self.stop)
        a = self.starts[i]
        return a, min(a + self.starts.step, self.stop)


class TrainFeed:
    """Iterate (step, batch) for steps [start_step, stop_step), produced by `workers` background processes.

    `task`: a run's `ResolvedTask` (with `task_config` None), or a name and its config values (resolved here, once,
    as `TaskStream` resolves them)."""

    def __init__(self, task: str | ResolvedTask, task_config: Mapping[str, Any] | None, data_seed: int,
                 batch_size: int, start_step: int,
                 stop_step: int, rank: int = 0, world_size: int = 1, workers: int = 1, prefetch: int = 4,
                 pin_memory: bool = False, steps_per_message: int | None = None,
                 train_samples: int | None = None, local_processes: int = 1, lengths: Any = None) -> None:
        task = ResolvedTask.settle(task, task_config)
        self.start, self.stop = start_step, stop_step
        self.workers = workers
        self.node_workers = node_workers(workers, local_processes)
        """The data workers of every training process on this machine (`local_processes`, torchrun's
        LOCAL_WORLD_SIZE): their rings share one /dev/shm, and messages are sized for the smallest."""
        self.task, self.lengths = task, lengths
        self._shapes: dict[int, tuple[int, int]] = {}  # length -> (seq_len, l_output) of its steps
        longest = task.spec if lengths is None else self._at(lengths.high).spec  # messages padded up to it
        k = steps_per_message or auto_steps_per_message(longest, batch_size,
                                                        message_bytes(prefetch, workers=self.node_workers))
        self.steps_per_message = k
        self.steps_per_message_full = steps_per_message or auto_steps_per_message(
            longest, batch_size, message_bytes(prefetch, ring_bytes=RING_BYTES))
        """What a message would hold with a full-sized ring for every worker (enough free /dev/shm)."""
        self.ranges = StepRanges(range(start_step, stop_step, k), stop_step)
        self.dataset = _StepDataset(task, data_seed, batch_size, rank, world_size, train_samples, lengths)
        self.loader = step_loader(self.dataset, self.ranges, workers, prefetch, pin_memory)

    def shm_note(self) -> str | None:
        """One line when a small /dev/shm (a container's default 64 MiB) made the workers' messages smaller than a
        full ring gives them: each message costs the training process some host time, which a fast GPU step feels
        (on a host-bound proxy step, `benchmarks/harness/feed_small_shm.sh`, the staged feed cost a median +34 % with one-step
        messages against +6 % with ten-step ones, the training thread sleeping 0.44 against 0.05 ms a step); None
        otherwise."""
        if self.workers <= 0 or self.steps_per_message >= self.steps_per_message_full:
            return None
        from ...data.read.ring import shm_for_full_rings, shm_free

        free, need = shm_free() or 0, shm_for_full_rings(self.node_workers)
        return (f"/dev/shm has {free >> 20} MiB free, so the {self.node_workers} data worker(s) of this machine send "
                f"{self.steps_per_message} step(s) a message instead of {self.steps_per_message_full}, which costs a "
                f"fast GPU step host time; give /dev/shm at least {-(-need >> 20)} MiB (in a container: docker run "
                "--shm-size=1g, or --ipc=host)")

    def __iter__(self) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
        for steps, message in self.messages():
            for j, step in enumerate(steps):
                yield step, self.trim(step, {key: value[j] for key, value in message.items()})

    def _at(self, length: int) -> ResolvedTask:
        from ..runtime.lengths import at_length

        return at_length(self.task, length)

    def trim(self, step: int, batch: dict[str, Any]) -> dict[str, Any]:
        """Step `step`'s batch cut to its own length, when the run draws a length per step (`runtime.lengths`): a
        worker pads the steps of a message to the longest among them so that they stack (`padded`); the batch
        unchanged otherwise. `DeviceFeed` calls it after sending a step to the device."""
        if self.lengths is None:
            return batch
        length = self.lengths.at(step)
        if length not in self._shapes:
            spec = self._at(length).spec
            self._shapes[length] = spec.seq_len, spec.l_output
        rows = dict(zip(MODEL_FIELDS, self._shapes[length], strict=True))
        return {k: v[:, :rows[k]].contiguous() if k in rows and v.shape[1] != rows[k] else v
                for k, v in batch.items()}

    def messages(self) -> Iterator[tuple[range, dict[str, torch.Tensor]]]:
        """(steps, {key: (len(steps), B_rank, ...) tensor}) as the workers send them (`DeviceFeed` copies a whole
        message to pinned memory at once)."""
        def rest(done: int) -> Iterator[Any]:
            return (self.dataset[r] for r in self.ranges[done:])

        for (a, b), message in zip(self.ranges, iterate_or_read_here(self.loader, rest), strict=True):
            yield range(a, b), message


@dataclass
class EvalSet:
    """This rank's contiguous slice of a fixed evaluation split, as CPU tensors."""

    inputs: torch.Tensor
    targets: torch.Tensor
    sample_index: torch.Tensor
    num_samples: int
    """Size of the whole split (all ranks)."""

    @classmethod
    def build(cls, task: str | ResolvedTask, task_config: Mapping[str, Any] | None, data_seed: int, split: str,
              n: int, rank: int = 0, world_size: int = 1, chunk: int = 256) -> EvalSet:
        """Samples [0, n) of `split`, this rank's slice; `task` and `task_config` as `TrainFeed` takes them."""
        from ...data.read.streaming import TaskStream

        stream = TaskStream(task, task_config, seed=data_seed)
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
