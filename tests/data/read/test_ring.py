"""Worker batches through the ring of reusable shared-memory slots (`ssmbench.data.read.ring`): bit for bit the batches of
the slow path, slots reused many times, a busy slot never overwritten, results never aliasing a slot."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

from ssmbench import open_dataset
from ssmbench.data.read import ring
from ssmbench.data.read.loader import ShardAwareSampler


def _slow(ds, order, batch_size):
    return [torch.utils.data.default_collate([ds[i] for i in order[a:a + batch_size]])
            for a in range(0, len(order), batch_size)]


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(w) and all(g[k].dtype == w[k].dtype and torch.equal(g[k], w[k]) for k in w)


@pytest.fixture
def small_ring(monkeypatch):
    """Every batch goes through a ring of 3 slots (forked DataLoader workers inherit these settings)."""
    monkeypatch.setattr(ring, "MIN_BATCH_BYTES", 0)
    monkeypatch.setattr(ring, "MAX_SLOTS", 3)
    monkeypatch.setattr(ring, "MIN_SLOTS", 1)
    monkeypatch.setattr(ring, "_worker_ring", None)
    monkeypatch.setattr(ring, "_held", {})
    monkeypatch.setattr(ring, "in_dataloader_worker", lambda: True)  # for the tests that call ship() here


@pytest.mark.parametrize("transform", ["model", "compact", "numpy"])
@pytest.mark.parametrize("task", ["pathfinder", "listops", "tiny_shift"])
def test_ring_batches_equal_items_one_by_one(task, transform, request, small_ring):
    """Batches of 2 from 2 workers, 3 slots each: every slot is reused several times in one epoch."""
    ds = open_dataset(request.getfixturevalue(task), "train", transform=transform)
    order = ShardAwareSampler(ds, seed=3, rank=0, world_size=1).indices().tolist()
    loader = torch.utils.data.DataLoader(ds, batch_size=2, sampler=order, num_workers=2, collate_fn=ds.collate,
                                         prefetch_factor=4)
    _same(list(loader), _slow(ds, order, 2))
    assert len(ring._held) == 2  # one ring per worker reached this process


@pytest.mark.parametrize("what", ["finished", "stored"])
def test_model_batches_come_finished_or_as_stored_arrays(pathfinder, small_ring, monkeypatch, what):
    """Widened `model` columns travel finished (the main process gets views of the slot) while they fit a slot;
    with a ring too small for them, the stored arrays travel and are widened on arrival (fresh tensors)."""
    if what == "stored":
        monkeypatch.setattr(ring, "RING_BYTES", 10 << 10)  # 24 KiB of float32 / int64 columns, 4 KiB stored
    ds = open_dataset(pathfinder, "train")
    order = list(range(len(ds)))
    batches = list(torch.utils.data.DataLoader(ds, batch_size=2, sampler=order, num_workers=2,
                                               collate_fn=ds.collate))
    _same(batches, _slow(ds, order, 2))
    rings = [held for _, held in ring._held.values()]
    assert len(rings) == 2
    in_ring = [any(r.ctypes.data <= b["inputs"].data_ptr() < r.ctypes.data + r.nbytes for r in rings)
               for b in batches]
    assert any(in_ring) == (what == "finished")


def test_only_dataloader_workers_use_a_ring():
    assert ring.ship(_batch(0), min_bytes=0) is None  # this process is no DataLoader worker


def test_ring_under_forkserver_with_default_settings(tmp_path_factory):
    """Pathfinder-128 batches of 4 (128 KiB stored) take the ring with the shipped thresholds, in fresh workers."""
    from ssmbench.data.make.generate import generate_dataset
    from ssmbench.task_config import resolve_config as resolve

    _, config, _ = resolve("pathfinder", size=128)
    folder = generate_dataset("pathfinder", config, out=tmp_path_factory.mktemp("pf128"), n=24,
                              split={"train": 24, "val": 0, "test": 0}, samples_per_shard=8, quiet=True).path
    ds = open_dataset(folder, "train")
    before = set(ring._held)
    order = list(range(len(ds)))[::-1]
    loader = torch.utils.data.DataLoader(ds, batch_size=4, sampler=order, num_workers=2, collate_fn=ds.collate,
                                         multiprocessing_context="forkserver")
    _same(list(loader), _slow(ds, order, 4))
    assert len(set(ring._held) - before) == 2


def _batch(seed: int) -> dict[str, np.ndarray]:
    g = np.random.default_rng(seed)
    return {"inputs": g.integers(0, 255, (4, 100), dtype=np.uint8), "sample_index": g.integers(0, 99, 4)}


def test_a_slot_is_reused_only_once_its_batch_is_gone(small_ring):
    shipped = [ring.ship(_batch(i)) for i in range(3)]
    assert all(s is not None for s in shipped) and [s[2] for s in shipped] == [0, 1, 2]
    got = ring.receive(*shipped[0])  # views into slot 0
    assert np.array_equal(got["inputs"].numpy(), _batch(0)["inputs"])
    assert ring.ship(_batch(3)) is None  # every slot is held: 1 and 2 by the shipped batches, 0 by `got`
    for s in shipped[1:]:
        ring.receive(*s)  # received and dropped at once: slots 1 and 2 are free again
    gc.collect()
    assert [ring.ship(_batch(5 + i))[2] for i in range(2)] == [1, 2]  # slot 0 skipped while its batch lives
    inputs = got["inputs"]
    del got
    gc.collect()
    assert ring.ship(_batch(3)) is None  # one of its tensors still does
    assert np.array_equal(inputs.numpy(), _batch(0)["inputs"])
    del inputs
    gc.collect()
    again = ring.ship(_batch(4))
    assert again is not None and again[2] == 0 and again[1] is None  # the tensor travelled with the first only
    assert np.array_equal(ring.receive(*again)["inputs"].numpy(), _batch(4)["inputs"])
    assert ring.ship({"inputs": np.zeros((8, 100), np.uint8), "sample_index": np.zeros(8, np.int64)}) is None


def test_received_tensors_are_views_of_the_slot_and_keep_their_values(small_ring):
    first = ring.receive(*ring.ship(_batch(0)))
    for i in range(1, 7):  # the other two slots go round three times; slot 0, still held, is skipped
        got = ring.receive(*ring.ship(_batch(i)))
        assert np.array_equal(got["inputs"].numpy(), _batch(i)["inputs"])
        del got
        gc.collect()
    held = ring._held[next(iter(ring._held))][1]
    assert held.ctypes.data <= first["inputs"].data_ptr() < held.ctypes.data + held.nbytes  # no copy was made
    assert np.array_equal(first["inputs"].numpy(), _batch(0)["inputs"])


def test_rings_of_exited_workers_are_dropped_and_unknown_rings_refused(small_ring):
    ring._held["999999999:gone"] = (None, np.zeros(8, np.uint8))
    ring.receive(*ring.ship(_batch(0)))
    assert "999999999:gone" not in ring._held and len(ring._held) == 1
    with pytest.raises(RuntimeError, match="before the ring itself"):
        ring.receive("123:unknown", None, 0, 64, [])


def test_no_shared_memory_means_no_ring_and_no_lost_batch(small_ring, monkeypatch):
    """ship runs in the worker's queue-feeder thread, where an exception would drop the batch: a ring that cannot be
    made sends every batch the other way instead."""
    def refuse(self, *args):
        raise RuntimeError("unable to write to file </torch_123_0_0>: No space left on device (28)")

    monkeypatch.setattr(ring._Ring, "__init__", refuse)
    assert ring.ship(_batch(0)) is None and ring.ship(_batch(1)) is None


def test_columns_are_made_in_a_slot_and_shipped_without_a_copy(pathfinder, small_ring):
    """In a worker, `model` columns are written straight into a free slot (no copy when the batch is shipped); a
    batch dropped in the worker unshipped gives its slot back; a shipped one is given back by the consumer only."""
    from multiprocessing.reduction import ForkingPickler

    ds = open_dataset(pathfinder, "train")
    made = ds.__getitems__([0, 1])
    worker_ring = ring._worker_ring[1]
    buf = worker_ring.buf
    assert buf.ctypes.data <= made.columns["inputs"].data_ptr() < buf.ctypes.data + buf.nbytes
    assert worker_ring.flags.tolist() == [1, 0, 0]
    del made
    gc.collect()
    assert worker_ring.flags.tolist() == [0, 0, 0]  # dropped in the worker: the slot is free again

    want = _slow(ds, [2, 3], 2)[0]
    gc.collect()
    columns = ds.collate(ds.__getitems__([2, 3]))
    message = ForkingPickler.dumps(columns)
    assert len(message) < 1024  # a slot number and a layout, not 2 x 16 KiB of columns
    del columns
    gc.collect()
    assert worker_ring.flags.tolist().count(1) == 1  # shipped: still held until the consumer is done with it
    got = ForkingPickler.loads(message)
    assert all(torch.equal(got[k], want[k]) for k in want)
    del got
    gc.collect()
    assert worker_ring.flags.tolist() == [0, 0, 0]


def test_a_reserved_batch_ships_once():
    class Ring:
        id, tensor, header, slot_bytes, announced = "1:x", "tensor", 64, 128, False

    reservation = ring.Reservation(Ring(), 1, [])
    assert reservation.ship() == ("1:x", "tensor", 1, 192, []) and reservation.ship() is None


def test_items_taken_by_another_collate_are_copies_not_views_of_a_slot(pathfinder, small_ring):
    """A collate_fn that returns the items themselves (views of columns made in a slot): torch pickles them as
    copies, so batches kept by the consumer keep their values while the workers reuse every slot many times."""
    ds = open_dataset(pathfinder, "train")
    order = ShardAwareSampler(ds, seed=1, rank=0, world_size=1).indices().tolist()
    loader = torch.utils.data.DataLoader(ds, batch_size=2, sampler=order, num_workers=2, collate_fn=list)
    got = [torch.utils.data.default_collate(items) for items in list(loader)]
    _same(got, _slow(ds, order, 2))


def test_ring_budget_follows_free_shared_memory(monkeypatch):
    """A 64 MiB /dev/shm (a container's default) with 40 MiB free: a ring may take 5 MiB, so a 3 MiB batch (PF-128
    `model`, B = 16) gets none and a 512 KiB one (its stored arrays) gets 8 slots' worth."""
    import os
    from types import SimpleNamespace

    monkeypatch.setattr(os, "statvfs", lambda path: SimpleNamespace(f_bavail=10 * 1024, f_frsize=4096))
    monkeypatch.setattr(ring, "_worker_ring", None)
    assert ring.ring_budget() == 5 << 20
    assert not ring.fits(3 << 20) and ring.fits(512 << 10)


def test_a_full_dev_shm_at_start_reads_the_same_batches_in_process_with_one_warning(pathfinder, monkeypatch, caplog):
    """The DataLoader's queues first make a POSIX semaphore in /dev/shm; a /dev/shm already full makes that an
    OSError (ENOSPC) from multiprocessing, which ended a run with a traceback. Now the feed reads its batches in
    this process: the same batches as data.workers=0, and one warning per process naming /dev/shm and
    `-o data.workers=0` (a second loader says nothing more)."""
    import errno
    import logging
    import multiprocessing.synchronize

    from ssmbench.data.read import shm_full
    from ssmbench.harness.feed.folder_feed import FolderFeed, FolderSteps

    def want(workers):
        steps = FolderSteps(pathfinder, data_seed=3, batch_size=4)
        return [b for _, b in FolderFeed(steps, 0, 9, workers=workers)]

    reference = want(0)

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(multiprocessing.synchronize.SemLock, "__init__", full)
    monkeypatch.setattr(shm_full, "_said", set())
    with caplog.at_level(logging.WARNING):
        got = want(1)
        again = want(2)
    _same(got, reference)
    _same(again, reference)
    said = [r.getMessage() for r in caplog.records if "/dev/shm" in r.getMessage()]
    assert len(said) == 1 and "-o data.workers=0" in said[0] and "No space left on device" in said[0], said
    monkeypatch.undo()
    loader = torch.utils.data.DataLoader(list(range(4)), num_workers=1)
    assert shm_full.start_workers_or_read_here(loader) and loader.num_workers == 1  # room: the workers start
