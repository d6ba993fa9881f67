"""Training batches stacked several steps per worker message equal the one-step-at-a-time batches."""

from __future__ import annotations

import time

import pytest
import torch

from ssmbench.data.read.streaming import TaskStream
from ssmbench.harness.feed.batches import TrainFeed, iterate_loader
from ssmbench.harness.feed.message_size import auto_steps_per_message
from ssmbench.task_config import ResolvedTask


def _spec(task: str, L: int):
    return ResolvedTask.of(task, {"L": L}).spec


def test_stacked_messages_yield_the_same_steps_as_single_ones():
    args = ("shift", {"L": 32}, 3, 4)
    single = list(TrainFeed(*args, start_step=5, stop_step=12, workers=0, steps_per_message=1))
    stacked = list(TrainFeed(*args, start_step=5, stop_step=12, workers=1, steps_per_message=3))  # 3 + 3 + 1
    assert [s for s, _ in stacked] == [s for s, _ in single] == list(range(5, 12))
    stream = TaskStream("shift", {"L": 32}, seed=3)
    for (step, a), (_, b) in zip(single, stacked, strict=True):
        direct = stream.train_batch(step, 4, 0, 1)  # the slow obvious path
        for key in ("inputs", "targets"):
            assert torch.equal(a[key], b[key]) and torch.equal(a[key], torch.from_numpy(direct[key]))


def _in_a_ring(t: torch.Tensor) -> bool:
    """Whether a tensor's data lies in a shared-memory ring this process was sent by a worker."""
    from ssmbench.data.read import ring

    return any(r.data_ptr() <= t.data_ptr() < r.data_ptr() + r.numel() for r, _ in ring._held.values())


def test_large_messages_travel_through_the_workers_ring_and_equal_the_stream():
    """Messages of 256 KiB are made in a slot of the worker's shared-memory ring and arrive as views of it; a
    consumer that holds on to every batch runs the ring out of free slots, and the later messages take the other way
    (fresh shared memory) without waiting. Either way the batches equal the stream's."""
    args = ("cumsum", {"L": 1024}, 2, 8)  # 8 x 1024 x (3 + 1) float32 = 128 KiB a step
    held = list(TrainFeed(*args, start_step=0, stop_step=24, workers=1, steps_per_message=2))  # 12 messages
    through_ring = [_in_a_ring(batch["inputs"]) for step, batch in held if step % 2 == 0]
    assert through_ring[0] and not through_ring[-1]
    stream = TaskStream("cumsum", {"L": 1024}, seed=2)
    for step, batch in held:
        direct = stream.train_batch(step, 8, 0, 1)
        assert all(torch.equal(batch[k], torch.from_numpy(direct[k])) for k in ("inputs", "targets")), step
    places, sums = [], []
    for step, batch in TrainFeed(*args, start_step=0, stop_step=24, workers=1, steps_per_message=2):
        if step % 2 == 0:  # each batch dropped in turn: every message through the ring, its slots used again
            places.append((_in_a_ring(batch["inputs"]), batch["inputs"].data_ptr()))
        sums.append(float(batch["targets"].sum()))
    assert all(ok for ok, _ in places) and len({p for _, p in places}) < len(places)
    assert sums == [float(b["targets"].sum()) for _, b in held]


def test_a_feed_sizes_its_messages_for_a_ring_slot_per_message_in_flight():
    """At the paper's setting (1 MiB a step) and 4 messages read ahead, a 64 MiB ring holds 6 messages of 10 steps:
    those read ahead, the one consumed and the one being made (with 16-step messages and 4 slots, 28 of 97 went the
    slow way to a consumer slower than the worker)."""
    from ssmbench.harness.feed.message_size import message_bytes

    assert message_bytes(4, ring_bytes=64 << 20) == (63 << 20) // 6  # 1/64 of the ring to spare
    assert auto_steps_per_message(_spec("cumsum", 4096), 16, message_bytes(4, ring_bytes=64 << 20)) == 10
    assert message_bytes(1, ring_bytes=1 << 30) == 16 << 20  # a large ring: MESSAGE_BYTES


MANY_WORKERS = pytest.mark.filterwarnings("ignore:This DataLoader will create")  # more workers than this VM's cores


@MANY_WORKERS
@pytest.mark.parametrize("free_mib", [16, 64, 100, 512, 700, 2048])
@pytest.mark.parametrize("workers", [1, 4, 8])
@pytest.mark.parametrize("prefetch", [1, 2, 4])
def test_messages_sized_in_the_training_process_fit_every_workers_ring(monkeypatch, free_mib, workers, prefetch):
    """Messages are sized before the workers start; each worker makes its ring later, from a /dev/shm that the
    DataLoader's queues and the earlier workers' rings have already taken from. Every ring must still be made (room
    for 4 slots of a message) and, where the sizing was free to choose (more than one step a message), hold a slot
    for each message in flight. (Sized from the training process's free space alone, a 64 MiB /dev/shm and 2 messages
    read ahead gave 2-step messages of exactly 2 MiB, which no worker's ring could hold 4 of: none was made.)"""
    from ssmbench.data.read import ring

    free = free_mib << 20
    monkeypatch.setattr(ring, "shm_free", lambda: free)
    feed = TrainFeed("cumsum", {"L": 4096}, 0, 16, 0, 100, workers=workers, prefetch=prefetch)  # 1 MiB a step
    k = feed.steps_per_message
    layout, total = ring.layout_for({"inputs": ("<f4", (k, 16, 4096, 3)), "targets": ("<f4", (k, 16, 4096, 1))})
    queues = 64 << 10  # the DataLoader's semaphores: a page each
    for budget in ring.ring_budgets(workers, free - queues):
        if budget // (1 << 20) >= ring.MIN_SLOTS:  # a ring of one-step messages can exist at all
            assert budget // total >= ring.MIN_SLOTS, (k, budget)
        if k > 1:
            assert budget // total >= prefetch + 2, (k, budget)
    assert (feed.shm_note() is None) == (k == feed.steps_per_message_full)


@MANY_WORKERS
def test_a_small_dev_shm_is_named_with_the_fix_before_a_gpu_run(monkeypatch, caplog):
    """A container's 64 MiB /dev/shm makes one-step messages at the paper's setting: a CUDA run says so once, naming
    the /dev/shm size that gives full messages; a CPU run (where a step dwarfs a message's cost) says nothing."""
    import logging
    from types import SimpleNamespace

    from ssmbench.data.read import ring
    from ssmbench.harness.config.resolver import resolve_run
    from ssmbench.harness.feed.device_feed import train_feed

    cfg = resolve_run("dlr", "cumsum", "paper", overrides={"data.workers": 4, "train.steps": 40})
    monkeypatch.setattr(ring, "shm_free", lambda: 64 << 20)
    cuda = SimpleNamespace(device=torch.device("cuda"), is_main=True, rank=0, world_size=1, local_world_size=1)
    with caplog.at_level(logging.WARNING):
        feed = train_feed(cfg, 0, cuda)
    assert feed.feed.steps_per_message == 1 and feed.feed.steps_per_message_full == 10
    [line] = [r.getMessage() for r in caplog.records]
    assert "/dev/shm has 64 MiB free" in line and "1 step(s) a message instead of 10" in line and "704 MiB" in line
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        train_feed(cfg, 0, SimpleNamespace(device=torch.device("cpu"), is_main=True, rank=0, world_size=1,
                                           local_world_size=1))
    assert not caplog.records
    monkeypatch.setattr(ring, "shm_free", lambda: 2 << 30)
    with caplog.at_level(logging.WARNING):
        feed = train_feed(cfg, 0, cuda)
    assert feed.feed.steps_per_message == 10 and not caplog.records


def test_rank_shares_are_stacked_per_rank():
    args = ("cumsum", {"L": 16}, 0, 6)
    whole = dict(TrainFeed(*args, start_step=0, stop_step=4, workers=0, steps_per_message=1))
    parts = [dict(TrainFeed(*args, start_step=0, stop_step=4, rank=r, world_size=2, workers=0, steps_per_message=4))
             for r in (0, 1)]
    for step in range(4):
        assert torch.equal(torch.cat([p[step]["inputs"] for p in parts]), whole[step]["inputs"])


def test_message_size_is_bounded():
    assert auto_steps_per_message(_spec("cumsum", 64), 16) == 16
    # MIPS at L = 4096, batch 256: a step is above the 16 MiB message target, so one step a message
    assert auto_steps_per_message(_spec("mips", 4096), 256) == 1


class _SlowSecondWorker:
    """Item i marks `folder/i` once made; item 1 (the second worker's first item) is made late."""

    def __init__(self, folder) -> None:
        self.folder = folder

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> int:
        if i == 1:
            time.sleep(0.5)  # only makes the old behaviour visible; the assertion below does not depend on it
        (self.folder / str(i)).touch()
        return i


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_first_item_comes_once_every_worker_has_started(tmp_path, workers):
    loader = torch.utils.data.DataLoader(_SlowSecondWorker(tmp_path), batch_size=None, num_workers=workers,
                                         multiprocessing_context="fork" if workers else None)
    items = iterate_loader(loader)
    assert next(items) == 0
    made = {int(p.name) for p in tmp_path.iterdir()}
    assert set(range(max(1, workers))) <= made  # each worker's first item is in before the first step starts
    assert list(items) == [1, 2, 3, 4, 5]


@MANY_WORKERS
def test_under_torchrun_messages_are_sized_for_the_workers_of_every_local_rank(monkeypatch):
    """The ranks on one machine share its /dev/shm: with LOCAL_WORLD_SIZE=8 and 4 workers a rank, messages are sized
    for 32 rings (one step in a 1 GiB /dev/shm, not the ten that 4 rings alone would allow: 29 rings made instead of
    12), and the note names the size that gives every one of the 32 workers a full ring."""
    from ssmbench.data.read import ring
    from ssmbench.harness.config.resolver import resolve_run
    from ssmbench.harness.feed.device_feed import train_feed
    from ssmbench.harness.runtime.distributed import init_distributed

    monkeypatch.setattr(ring, "shm_free", lambda: 1 << 30)
    alone = TrainFeed("cumsum", {"L": 4096}, 0, 16, 0, 100, workers=4)
    assert alone.steps_per_message == 10 and alone.shm_note() is None
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")  # what torchrun --nproc-per-node 8 sets; WORLD_SIZE unset: no group
    env = init_distributed("cpu")
    cfg = resolve_run("dlr", "cumsum", "paper", overrides={"data.workers": 4, "train.steps": 40})
    assert train_feed(cfg, 0, env).feed.node_workers == 32  # what a run's feed is given
    rank = TrainFeed("cumsum", {"L": 4096}, 0, 16, 0, 100, workers=4, local_processes=env.local_world_size)
    assert rank.steps_per_message == 1 and rank.steps_per_message_full == 10
    assert "32 data worker(s)" in rank.shm_note() and f"{ring.shm_for_full_rings(32) >> 20} MiB" in rank.shm_note()

    def rings_made(k: int) -> int:  # of the 32 workers' rings, those with room for MIN_SLOTS messages of k steps
        _, total = ring.layout_for({"inputs": ("<f4", (k, 16, 4096, 3)), "targets": ("<f4", (k, 16, 4096, 1))})
        return sum(b // total >= ring.MIN_SLOTS for b in ring.ring_budgets(32, 1 << 30))

    assert (rings_made(rank.steps_per_message), rings_made(alone.steps_per_message)) == (29, 12)
