"""The loader's fast path against the slow obvious one, bit for bit.

Fast: `DataLoader(ds, batch_size=B, collate_fn=ds.collate)`: one batched read per batch, the transform applied to
whole columns, items cut from them, and, from a worker, the batch shipped in its stored dtypes (`Columns`) and
transformed again on arrival. Slow: every item fetched on its own in this process (`ds[i]`) and stacked by torch's
`default_collate`. (`test_loader.py` checks the slow path against the stored arrays read with plain h5py.)
"""

from __future__ import annotations

import copy
import functools
import pickle

import pytest
import torch

from ssmbench import open_dataset
from ssmbench.data.read import columns, ring
from ssmbench.data.read.columns import Columns
from ssmbench.data.read.loader import ShardAwareSampler

FIELDS = {"pathfinder": ("label", "tips"), "listops": ("node_height", "node_op"), "tiny_shift": ()}


def _slow(ds, order: list[int], batch_size: int) -> list[dict[str, torch.Tensor]]:
    return [torch.utils.data.default_collate([ds[i] for i in order[a:a + batch_size]])
            for a in range(0, len(order), batch_size)]


def _fast(ds, order: list[int], batch_size: int, workers: int, **kwargs) -> list[dict[str, torch.Tensor]]:
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, sampler=order, num_workers=workers,
                                         collate_fn=ds.collate, **kwargs)
    return list(loader)


def _assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert type(g) is dict and list(g) == list(w)
        for k in w:
            assert g[k].dtype == w[k].dtype and g[k].shape == w[k].shape, k
            assert torch.equal(g[k], w[k]), k


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("transform", ["model", "compact", "numpy"])
@pytest.mark.parametrize("task", ["pathfinder", "listops", "tiny_shift"])
def test_fast_path_equals_items_one_by_one(task, transform, workers, request):
    ds = open_dataset(request.getfixturevalue(task), "train", transform=transform, fields=FIELDS[task])
    order = ShardAwareSampler(ds, seed=1, rank=0, world_size=1).indices().tolist()  # shuffled across shards
    _assert_same(_fast(ds, order, 5, workers), _slow(ds, order, 5))


@pytest.mark.parametrize("transform", ["model", "compact", "numpy"])
def test_large_batches_travel_in_one_shared_tensor(pathfinder, listops, transform, monkeypatch):
    from multiprocessing.reduction import ForkingPickler

    monkeypatch.setattr(columns, "PIPE_BYTES", 0)  # every batch is "large" (forked workers inherit this)
    monkeypatch.setattr(ring, "MIN_BATCH_BYTES", 1 << 40)  # and none goes through a ring (tests/data/read/test_ring.py)
    for folder, fields in ((pathfinder, ("label", "tips")), (listops, ("node_height",))):
        ds = open_dataset(folder, "train", transform=transform, fields=fields)
        order = ShardAwareSampler(ds, seed=2, rank=0, world_size=1).indices().tolist()
        _assert_same(_fast(ds, order, 5, 2), _slow(ds, order, 5))
    monkeypatch.setattr(columns, "_in_worker", lambda: True)
    shipped = ds.collate(ds.__getitems__(range(8)))
    blob = ForkingPickler.dumps(shipped)
    assert len(blob) < 2000  # the layout and a descriptor, not the arrays
    monkeypatch.setattr(columns, "_in_worker", lambda: False)
    _assert_same([ForkingPickler.loads(blob)], [ds.collate(ds.__getitems__(range(8)))])


def test_fast_path_under_forkserver(pathfinder):
    ds = open_dataset(pathfinder, "train", fields=("label",))
    order = list(range(len(ds)))[::-1]
    _assert_same(_fast(ds, order, 6, 2, multiprocessing_context="forkserver"), _slow(ds, order, 6))


def _probe(ds, items):
    """collate_fn reporting what ds.collate returns where it runs (a worker)."""
    return {"type": type(ds.collate(items)).__name__}


def test_worker_batches_travel_in_the_stored_dtypes(pathfinder, monkeypatch):
    ds = open_dataset(pathfinder, "train", fields=("label",))
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=functools.partial(_probe, ds))
    assert {b["type"] for b in loader} == {"Columns"}
    assert type(ds.collate(ds.__getitems__([3, 1]))) is dict  # the main process keeps plain dicts

    plain = ds.collate(ds.__getitems__(range(8)))
    monkeypatch.setattr(columns, "_in_worker", lambda: True)
    shipped = ds.collate(ds.__getitems__(range(8)))
    assert isinstance(shipped, Columns) and shipped.unchanged()
    blob = pickle.dumps(shipped)
    widened = sum(t.numel() * t.element_size() for t in plain.values())  # float32 pixels, int64 targets
    assert len(blob) < widened / 5  # uint8 pixels and targets: 2 bytes per pixel instead of 12
    _assert_same([pickle.loads(blob)], [plain])
    clone = copy.copy(shipped)  # what default_convert does to a DataLoader item (batch_size=None)
    clone.update({k: v for k, v in shipped.items()})
    assert isinstance(clone, Columns) and clone.unchanged() and len(pickle.dumps(clone)) == len(blob)


def _change(ds, how, items):
    """collate_fn that changes the collated batch in the worker, as an augmentation would."""
    batch = ds.collate(items)
    if how == "in place":
        batch["inputs"].add_(1)
    elif how == "item in place":
        items[0]["targets"].fill_(7)  # items are views into the columns
    elif how == "replaced":
        batch["targets"] = batch["targets"] * 2
    else:
        batch["extra"] = batch["sample_index"] + 100
    return batch


@pytest.mark.parametrize("how", ["in place", "item in place", "replaced", "added"])
def test_a_batch_changed_in_the_worker_arrives_changed(pathfinder, how):
    ds = open_dataset(pathfinder, "train")
    order = list(range(len(ds)))
    got = list(torch.utils.data.DataLoader(ds, batch_size=5, sampler=order, num_workers=2,
                                           collate_fn=functools.partial(_change, ds, how)))
    want = [_change(ds, how, ds.__getitems__(order[a:a + 5])) for a in range(0, len(order), 5)]
    _assert_same(got, want)
