"""`DeviceFeed`: batches reach the device unchanged through pinned buffers that are allocated once and never
rewritten before the copies out of them have run; the wait it reports is the wait for the workers only.

The CUDA operations (pinned allocation, non-blocking copy, event) are replaced by a fake device whose copies run
only when an event recorded after them is waited on, as a GPU running behind the host would."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from ssmbench.data.read.streaming import TaskStream
from ssmbench.harness.feed.batches import TrainFeed
from ssmbench.harness.feed.device_feed import DeviceFeed


class _LateCopies(DeviceFeed):
    """A device that runs the copies queued before an event only when someone waits on that event."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, stage=True, **kwargs)
        self.queue: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.done = 0

    def _pinned(self, nbytes: int) -> torch.Tensor:
        return torch.full((nbytes,), 255, dtype=torch.uint8)

    def _to_device(self, host: torch.Tensor) -> torch.Tensor:
        out = torch.full_like(host, -1) if host.is_floating_point() else torch.zeros_like(host)
        self.queue.append((host, out))  # read from the host buffer later, when the "GPU" gets there
        return out

    def _record(self, event):
        feed = self

        class Event:
            upto = len(self.queue)

            def synchronize(self) -> None:
                feed.run(self.upto)

        return Event()

    def run(self, upto: int | None = None) -> None:
        upto = len(self.queue) if upto is None else upto
        for host, out in self.queue[self.done:upto]:
            out.copy_(host)
        self.done = max(self.done, upto)


def _direct(task, config, seed, batch, step):
    b = TaskStream(task, config, seed=seed).train_batch(step, batch)
    return {k: torch.from_numpy(b[k]) for k in ("inputs", "targets")}


@pytest.mark.parametrize("slots", [1, 2, 3])
def test_staged_batches_equal_the_stream_with_a_gpu_running_behind(slots):
    feed = _LateCopies(TrainFeed("cumsum", {"L": 32}, 5, 4, start_step=0, stop_step=7, workers=0,
                                 steps_per_message=3), "cpu", slots=slots)
    it = iter(feed)
    got = [next(it)]
    assert feed.allocations == 2 * slots  # inputs and targets of every slot at the first step (not timed)
    got += list(it)
    feed.run()  # the GPU finishes
    assert [s for s, _ in got] == list(range(7))
    for step, batch in got:
        for key, want in _direct("cumsum", {"L": 32}, 5, 4, step).items():
            assert torch.equal(batch[key], want), (step, key)
    assert feed.allocations == 2 * slots  # never again


def test_a_workers_message_is_copied_once_and_not_kept_after_its_steps():
    """A feed with `messages()` (TrainFeed): one copy into a pinned buffer per message, not per step (each copy is a
    few takes of the GIL from the training thread); the steps are the message's rows, in order, intact with a GPU
    running behind; and no message is kept once copied (a kept one holds its worker's ring slot)."""
    import gc
    import weakref

    made = []

    class Messages:
        def messages(self):
            for m in range(3):  # 4 steps each, rows 10 * step + column
                rows = torch.arange(4 * 5, dtype=torch.float32).reshape(4, 5) + 20 * m
                rows = (rows // 5) * 10 + rows % 5  # step s: 10 s + [0..4]
                made.append(weakref.ref(rows))
                yield range(4 * m, 4 * m + 4), {"inputs": rows, "targets": rows[:, :1] * -1}

    feed = _LateCopies(Messages(), "cpu", slots=1)
    copies = []
    real = feed._copy_in
    feed._copy_in = lambda fields, slot: copies.append(slot) or real(fields, slot)
    got = []
    for step, batch in feed:
        got.append((step, batch))
        if step == 8:  # the last message arrived: the first is gone (the one buffer was copied into again)
            gc.collect()
            assert made[0]() is None
    feed.run()
    assert len(copies) == 3
    assert [s for s, _ in got] == list(range(12))
    for step, batch in got:
        assert batch["inputs"].tolist() == [10.0 * step + c for c in range(5)], step
        assert batch["targets"].tolist() == [-10.0 * step]


def test_a_larger_batch_grows_the_buffers_and_smaller_ones_reuse_them():
    small, large, half = torch.arange(6.0).reshape(2, 3), torch.arange(70000.0), torch.ones(3, dtype=torch.bfloat16)
    steps = [(0, {"inputs": small, "targets": half}), (1, {"inputs": large, "targets": half}),
             (2, {"inputs": (small + 1).t(), "targets": half, "sample_index": torch.tensor([3, 4])})]
    feed = _LateCopies(steps, "cpu", slots=2)
    got = list(feed)
    feed.run()
    assert feed.allocations == 2 * 2 + 1  # both fields of both slots at step 0; step 1 grows its `inputs` only
    for (_, want), (_, batch) in zip(steps, got, strict=True):
        assert all(torch.equal(batch[k], want[k]) for k in want)
    assert got[2][1]["sample_index"] is steps[2][1]["sample_index"]  # not a model field: passes through


def test_cpu_batches_pass_through_and_the_wait_is_the_workers_only():
    def slow():
        for step in range(3):
            time.sleep(0.05)  # the workers
            yield step, {"inputs": torch.zeros(2), "targets": torch.zeros(2)}

    feed = DeviceFeed(slow(), "cpu")
    waits = []
    for _, _batch in feed:
        waits.append(feed.last_wait)
        time.sleep(0.1)  # the model step: not waiting for data
    assert all(0.04 < w < 0.09 for w in waits), waits
    assert feed.waited == pytest.approx(sum(waits)) and feed.allocations == 0


def test_an_error_of_the_feed_reaches_the_training_thread_and_an_early_stop_closes_the_feed():
    closed = []

    def feed(fail_at):
        try:
            for step in range(100):
                if step == fail_at:
                    raise ValueError("damaged shard")
                yield step, {"inputs": torch.full((3,), float(step)), "targets": torch.zeros(1)}
        finally:
            closed.append(fail_at)

    staged = _LateCopies(feed(2), "cpu", slots=2)
    with pytest.raises(ValueError, match="damaged shard"):
        for _ in staged:
            pass
    it = iter(_LateCopies(feed(None), "cpu", slots=2))
    assert [next(it)[0] for _ in range(3)] == [0, 1, 2]
    it.close()  # what the trainer's loop does when it stops early (an exception, a signal, the time limit)
    assert closed == [2, None]
    assert not [t for t in threading.enumerate() if t.name == "ssmbench-staging"]


def test_staged_waits_count_the_workers_but_not_the_gpu():
    def feed(seconds):
        for step in range(5):
            time.sleep(seconds)  # the workers
            yield step, {"inputs": torch.zeros(4), "targets": torch.zeros(1)}

    class SlowGpu(_LateCopies):
        def _record(self, event):
            inner = super()._record(event)

            class Event:
                def synchronize(self) -> None:
                    time.sleep(0.08)  # the GPU still runs the step that read this buffer
                    inner.synchronize()

            return Event()

    def waits(staged, step_seconds):
        out = []
        for _ in staged:
            out.append(staged.last_wait)
            time.sleep(step_seconds)  # the model step
        return out[1:]  # the first step waits for start-up

    assert all(w > 0.04 for w in waits(_LateCopies(feed(0.1), "cpu", slots=2), 0.02))  # slow workers: ~0.08 s
    assert all(w < 0.03 for w in waits(_LateCopies(feed(0.02), "cpu", slots=2), 0.08))  # read ahead: ~0
    busy_gpu = SlowGpu(feed(0.0), "cpu", slots=1)
    assert all(w < 0.03 for w in waits(busy_gpu, 0.0)), busy_gpu.gpu_waited  # ~0.08 s each, for the GPU
    assert busy_gpu.gpu_waited > 0.25


def test_the_trainer_takes_its_data_wait_from_the_feed(tmp_path, monkeypatch):
    import ssmbench
    from ssmbench.harness.feed import device_feed

    class FixedWait(device_feed.DeviceFeed):
        def __iter__(self):
            for item in super().__iter__():
                self.last_wait = 0.5  # more than any real step here: the share must come from this value
                yield item

    monkeypatch.setattr(device_feed, "DeviceFeed", FixedWait)
    r = ssmbench.evaluate("dlr", "cumsum", out=tmp_path / "run", quiet=True, overrides={
        "L": 16, "model.d_model": 4, "model.d_state": 8, "train.steps": 4, "train.eval_every": 4,
        "eval.val_samples": 4, "eval.test_samples": 4, "eval.metric_batch_size": 4, "data.workers": 0})
    timed = 3  # the first step is not timed
    assert r.metrics["data_wait_share"] * r.metrics["train_time_s"] == pytest.approx(0.5 * timed)


def test_the_helper_thread_works_on_the_feeds_gpu(monkeypatch):
    """A new thread's current CUDA device is 0: under torchrun, rank 1's helper must not touch (and so open a
    context on) GPU 0, as the DataLoader's pin thread also sets its device."""
    seen = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: seen.append((threading.current_thread().name, d)))
    steps = [(s, {"inputs": torch.zeros(2), "targets": torch.zeros(1)}) for s in range(3)]
    assert [s for s, _ in _LateCopies(steps, torch.device("cuda", 1), slots=2)] == [0, 1, 2]
    assert seen == [("ssmbench-staging", torch.device("cuda", 1))]


def test_start_up_goes_to_startup_s_not_to_the_timed_steps(tmp_path, monkeypatch):
    import ssmbench
    from ssmbench.harness.feed import device_feed

    class SlowStart(device_feed.DeviceFeed):  # workers that take 0.3 s to deliver the first batch
        def __iter__(self):
            for step, batch in super().__iter__():
                if step == 0:
                    time.sleep(0.3)
                    self.last_wait += 0.3
                yield step, batch

    monkeypatch.setattr(device_feed, "DeviceFeed", SlowStart)
    r = ssmbench.evaluate("dlr", "cumsum", out=tmp_path / "run", quiet=True, overrides={
        "L": 16, "model.d_model": 4, "model.d_state": 8, "train.steps": 4, "train.eval_every": 4,
        "eval.val_samples": 4, "eval.test_samples": 4, "eval.metric_batch_size": 4, "data.workers": 0})
    m = r.metrics
    assert m["startup_s"] >= 0.3
    assert m["data_wait_share"] * m["train_time_s"] < 0.3  # the timed steps' waits do not include it
