"""`data.train_samples`: a streamed task trained on a fixed set of N train samples reshuffled every epoch (MAD's
protocol), against a slow obvious reading of the same rule."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ssmbench.data.read.streaming import TaskStream
from ssmbench.errors import ConfigError
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.results.compare import config_group
from ssmbench.registry import get_task
from ssmbench.task_config import to_plain

TASK = "mad_in_context_recall"


def ids(stream, steps, batch, n, rank=0, world=1):
    return [stream.train_batch(s, batch, rank, world, train_samples=n)["sample_id"].tolist() for s in steps]


def test_each_epoch_visits_every_sample_once_in_a_new_order():
    stream = TaskStream(TASK, None, seed=3)
    flat = sum(ids(stream, range(9), batch=4, n=12), [])  # 36 positions = 3 epochs of 12, two batches straddle
    epochs = [flat[i:i + 12] for i in range(0, 36, 12)]
    assert all(sorted(e) == list(range(12)) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3


def test_samples_equal_the_stored_ones_and_ranks_split_the_global_batch():
    stream = TaskStream(TASK, None, seed=1)
    batch = stream.train_batch(5, 6, train_samples=20)
    for row, i in enumerate(batch["sample_id"].tolist()):  # the slow obvious path: one sample at its index
        one = stream.samples("train", i, i + 1)
        assert np.array_equal(one["inputs"][0], batch["inputs"][row])
        assert np.array_equal(one["targets"][0], batch["targets"][row])
    halves = ids(stream, [5], 6, 20, rank=0, world=2)[0] + ids(stream, [5], 6, 20, rank=1, world=2)[0]
    assert halves == batch["sample_id"].tolist()


def test_a_batch_is_a_pure_function_of_seed_and_step():
    a, b = TaskStream(TASK, None, seed=7), TaskStream(TASK, None, seed=7)
    assert ids(a, [0, 1, 2, 3], 5, 8) == [ids(b, [s], 5, 8)[0] for s in (0, 1, 2, 3)]  # a resumed run, step by step
    assert ids(a, [3], 5, 8) != ids(TaskStream(TASK, None, seed=8), [3], 5, 8)
    fresh = a.train_batch(2, 5)["sample_id"].tolist()
    assert fresh == list(range(10, 15)) and ids(a, [2], 5, 10**6)[0] != fresh  # shuffled, not the fresh stream


def test_the_key_is_checked_and_recorded():
    cfg = resolve_run("dlr", TASK, "quick", overrides={"data.train_samples": 256})
    assert cfg.data.train_samples == 256 and cfg.to_json()["data"]["train_samples"] == 256
    with pytest.raises(ConfigError, match="data.train_samples"):
        resolve_run("dlr", TASK, "quick", overrides={"data.train_samples": 0})
    with pytest.raises(ConfigError, match="streamed tasks"):  # a folder task reads its whole train split
        listops = to_plain(get_task("listops_subtrees").presets["dlr"])
        dataclasses.replace(cfg, task="listops_subtrees", task_config=listops).validate()


def test_a_run_made_before_the_key_existed_shares_its_column():
    new = resolve_run("dlr", TASK, "quick").to_json()
    old = {**new, "data": {k: v for k, v in new["data"].items() if k != "train_samples"}}
    assert config_group(old) == config_group(new)
    finite = resolve_run("dlr", TASK, "quick", overrides={"data.train_samples": 64}).to_json()
    assert config_group(finite) != config_group(new)


def test_the_feed_draws_from_the_fixed_set(tmp_path):
    """The training feed passes the key down: its batches are the stream's finite-set batches, step by step."""
    from ssmbench.harness.feed.batches import TrainFeed

    stream = TaskStream(TASK, None, seed=0)
    feed = TrainFeed(TASK, {}, data_seed=0, batch_size=4, start_step=2, stop_step=5, workers=0, train_samples=6)
    for step, batch in feed:
        expect = stream.train_batch(step, 4, train_samples=6)
        assert np.array_equal(batch["inputs"].numpy(), expect["inputs"])
