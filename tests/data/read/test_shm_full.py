"""A /dev/shm that fills up while data workers run: no batch is dropped and no run hangs.

torch moves a worker's batch into shared memory while the worker's feeder thread pickles it; when that fails (ENOSPC)
the thread prints the error and drops the batch, and the training process waited for it forever (a 6 MiB /dev/shm
did this to `ssmbench eval`, which then ignored SIGTERM too). Now the failure reaches the training process as
`SharedMemoryUnavailable` and the feeds read the remaining batches themselves: the same batches, one warning.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from ssmbench.data.read import shm_full
from ssmbench.data.read.shm_full import SharedMemoryUnavailable
from ssmbench.harness.feed.batches import TrainFeed, step_loader
from unshareable_datasets import EvalFailsOnce, FailsOnce

CEILING_S = 300.0
"""How long a feed may take before the test calls it hung (each feed here takes about a second)."""


def _within_ceiling(fn):
    """fn() in a thread; its result, or a failed test if it has not returned within CEILING_S (a hung feed)."""
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(CEILING_S)
    assert not t.is_alive(), f"the feed did not finish within {CEILING_S:.0f} s: a batch was lost"
    if "error" in out:
        raise out["error"]
    return out["value"]


def _sums(batches):
    return [(step, float(b["inputs"].double().sum()), float(b["targets"].double().sum())) for step, b in batches]


@pytest.mark.parametrize("how", ["raise", "pickle"])
def test_a_message_that_cannot_be_shared_is_read_here_and_the_rest_follow(how, monkeypatch, caplog):
    args = ("cumsum", {"L": 256}, 1, 8)
    want = _sums(TrainFeed(*args, start_step=0, stop_step=12, workers=0, steps_per_message=2))
    feed = TrainFeed(*args, start_step=0, stop_step=12, workers=1, steps_per_message=2)
    feed.loader = step_loader(FailsOnce(feed.dataset, feed.ranges[3], how), feed.ranges, 1, 2, False)
    monkeypatch.setattr(shm_full, "_said", set())
    with caplog.at_level(logging.WARNING):
        got = _within_ceiling(lambda: _sums(feed))
    assert got == want
    said = [r.getMessage() for r in caplog.records if "/dev/shm" in r.getMessage()]
    assert len(said) == 1 and "reading batches in this process" in said[0] and "No space left" in said[0], said


def test_a_folder_batch_that_cannot_be_shared_is_read_here(pathfinder, monkeypatch, caplog):
    from ssmbench.harness.feed.folder_feed import FolderFeed, FolderSteps

    def feed(workers):
        return FolderFeed(FolderSteps(pathfinder, data_seed=3, batch_size=4), 0, 9, workers=workers)

    want = _sums(feed(0))
    failing = feed(1)
    failing.loader = step_loader(FailsOnce(failing.steps, 5, "pickle"), range(0, 9), 1, 2, False)
    monkeypatch.setattr(shm_full, "_said", set())
    with caplog.at_level(logging.WARNING):
        assert _within_ceiling(lambda: _sums(failing)) == want
    assert any("/dev/shm" in r.getMessage() for r in caplog.records)


def test_an_eval_batch_that_cannot_be_shared_is_read_here(pathfinder, monkeypatch):
    from ssmbench.harness.feed.folder_feed import FolderEvalSet

    def scored(workers, bad=None):
        ev = FolderEvalSet.build(pathfinder, "test", n=8, workers=workers)
        if bad is not None:
            ev.ds = EvalFailsOnce(ev.ds, bad)
        return [(int(i.sum()), float(x.double().sum()), float(y.double().sum())) for x, y, i, _ in ev.batches(3)]

    monkeypatch.setattr(shm_full, "_said", set())
    assert _within_ceiling(lambda: scored(1, bad=3)) == scored(0)  # batches 0-2 | 3-5 (fails) | 6-7


def test_a_collated_batch_without_shared_memory_unpickles_as_the_error(pathfinder, monkeypatch):
    """The pickling hook of a folder batch too large for the pipe packs it into new shared memory; when none can be
    had, the batch pickles as the error (raised where it is unpickled) instead of failing in the feeder thread."""
    from ssmbench.data.read import columns
    from ssmbench.harness.feed.folder_feed import FolderSteps

    monkeypatch.setattr(columns, "_in_worker", lambda: True)  # collated as a worker collates
    batch = FolderSteps(pathfinder, data_seed=3, batch_size=8)[0]
    assert isinstance(batch, columns.Columns)
    monkeypatch.setattr(columns, "PIPE_BYTES", 0)  # pack even this small batch
    assert all(torch.equal(v, batch[k]) for k, v in pickle.loads(pickle.dumps(batch)).items())

    def none_left(shape, dtype):
        raise SharedMemoryUnavailable("unable to allocate shared memory(shm): No space left on device (28)")

    monkeypatch.setattr(columns, "shared_empty", none_left)
    shipped = pickle.dumps(batch)  # in a feeder thread, an error here would drop the batch
    with pytest.raises(SharedMemoryUnavailable, match="No space left"):
        pickle.loads(shipped)


def test_shared_empty_turns_any_allocation_failure_into_the_one_error(monkeypatch):
    assert shm_full.shared_empty((2, 3), torch.float32).is_shared()

    def fail(self):
        raise RuntimeError("unable to allocate shared memory(shm) for file </torch_1_2_3>: No space left on device")

    monkeypatch.setattr(torch.Tensor, "share_memory_", fail)
    with pytest.raises(SharedMemoryUnavailable, match="No space left on device"):
        shm_full.shared_empty((2, 3), torch.float32)


def _can_mount_a_small_dev_shm() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                           capture_output=True, timeout=60)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_mount_a_small_dev_shm(), reason="needs a private mount namespace (root or userns)")
def test_eval_with_a_6_mib_dev_shm_finishes_instead_of_hanging(tmp_path):
    """The real thing: 1 MiB messages (L = 4096), two workers reading ahead, a 6 MiB /dev/shm mounted over the real
    one in a private mount namespace. Before, the run hung at its first dropped message."""
    exe = Path(sys.executable).with_name("ssmbench")
    command = (f"mount -t tmpfs -o size=6m tmpfs /dev/shm && exec {exe} eval --model dlr --task cumsum --length 4096 "
               "-o train.steps=12 -o train.eval_every=12 -o data.workers=2 -o eval.val_samples=16 "
               f"-o eval.test_samples=16 -o model.d_model=8 --out {tmp_path / 'run'}")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(["unshare", "-m", "sh", "-c", command], capture_output=True, text=True, env=env,
                       timeout=CEILING_S * 2, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "reading batches in this process" in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert (tmp_path / "run" / "metrics.json").exists()
