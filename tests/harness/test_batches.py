"""Training batches stacked several steps per worker message equal the one-step-at-a-time batches."""

from __future__ import annotations

import time

import pytest
import torch

from ssmbench.data.read.streaming import TaskStream
from ssmbench.harness.batches import TrainFeed, auto_steps_per_message, iterate_loader


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


def test_large_messages_travel_through_the_workers_ring_and_equal_the_stream(monkeypatch):
    """Messages of 256 KiB are made in a slot of the worker's shared-memory ring and arrive as views of it; a
    consumer that holds on to every batch runs the ring out of free slots, and the later messages take the other way
    (fresh shared memory) without waiting. Either way the batches equal the stream's."""
    from ssmbench.data.read import ring

    received = []
    real = ring.receive
    monkeypatch.setattr(ring, "receive", lambda *a: received.append(a[2]) or real(*a))  # unpickling looks it up
    args = ("cumsum", {"L": 1024}, 2, 8)  # 8 x 1024 x (3 + 1) float32 = 128 KiB a step
    held = list(TrainFeed(*args, start_step=0, stop_step=24, workers=1, steps_per_message=2))  # 12 messages
    assert 0 < len(received) < 12
    stream = TaskStream("cumsum", {"L": 1024}, seed=2)
    for step, batch in held:
        direct = stream.train_batch(step, 8, 0, 1)
        assert all(torch.equal(batch[k], torch.from_numpy(direct[k])) for k in ("inputs", "targets")), step
    received.clear()
    sums = [float(b["targets"].sum()) for _, b in TrainFeed(*args, start_step=0, stop_step=24, workers=1,
                                                             steps_per_message=2)]  # each batch dropped in turn
    assert len(received) == 12 and len(set(received)) < 12  # every message, slots used again
    assert sums == [float(b["targets"].sum()) for _, b in held]


def test_rank_shares_are_stacked_per_rank():
    args = ("cumsum", {"L": 16}, 0, 6)
    whole = dict(TrainFeed(*args, start_step=0, stop_step=4, workers=0, steps_per_message=1))
    parts = [dict(TrainFeed(*args, start_step=0, stop_step=4, rank=r, world_size=2, workers=0, steps_per_message=4))
             for r in (0, 1)]
    for step in range(4):
        assert torch.equal(torch.cat([p[step]["inputs"] for p in parts]), whole[step]["inputs"])


def test_message_size_is_bounded():
    assert auto_steps_per_message("cumsum", {"L": 64}, 16) == 16
    # MIPS at L = 4096, batch 256: a step is above the 16 MiB message target, so one step a message
    assert auto_steps_per_message("mips", {"L": 4096}, 256) == 1


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
