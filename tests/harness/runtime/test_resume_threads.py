"""A resumed run keeps the intra-op thread count its run started with (issue 26: the folder-task resume test failed
on 2-core machines).

Root cause: torch's CPU reductions split their work by thread, so the same step with 1 and with 2 intra-op threads
differs in the last bits. The harness picks threads = usable CPUs - data workers, so on a 2-core machine a run with
data.workers=0 trains with 2 threads and one with data.workers=1 with 1; on a 1-CPU runner both get 1. The run now
records the count it started with in config.json (`hardware.threads`) and a resume uses it, whatever data.workers,
OMP_NUM_THREADS or the machine say then. OMP_NUM_THREADS (which the rule obeys) stands in for another machine here,
so the test does not depend on how many CPUs this one has.
"""

from __future__ import annotations

import json

import torch

import ssmbench
from ssmbench.harness.evaluation import resume

KEYS = {"L": 1024, "model.d_model": 16, "model.d_state": 32, "train.steps": 6, "train.eval_every": 3,
        "train.log_every": 1, "train.batch_size": 4, "eval.val_samples": 8, "eval.test_samples": 8,
        "eval.metric_batch_size": 4, "data.workers": 0}
"""Large enough (4 x 1024 x 16 activations) that torch splits the reductions between threads: with 1 and with 2
threads these runs end with different weights (checked below, so the equality test has teeth)."""


def weights(run_dir, name="last.pt"):
    return torch.load(run_dir / "checkpoints" / name, weights_only=True)["model"]


def same(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_resumed_run_keeps_the_thread_count_it_started_with(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    full = ssmbench.evaluate("dlr", "cumsum", overrides=KEYS, out=tmp_path / "full", quiet=True)
    part = ssmbench.evaluate("dlr", "cumsum", overrides={**KEYS, "train.steps": 3}, out=tmp_path / "part",
                             quiet=True)
    recorded = json.loads((part.run_dir / "config.json").read_text())["hardware"]["threads"]
    assert recorded == 1 and part.metrics["threads_rule"] == "OMP_NUM_THREADS"
    assert part.metrics["environment"]["dev_shm_free_mib"] > 0  # what sized the data workers' messages

    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the resume runs "elsewhere": the rule would now choose 2 threads
    done = resume(part.run_dir, {"train.steps": 6, "data.workers": 1}, quiet=True)
    assert done.metrics["threads"] == 1
    assert same(weights(full.run_dir), weights(part.run_dir))
    assert same(weights(full.run_dir, "best.pt"), weights(part.run_dir, "best.pt"))

    other = ssmbench.evaluate("dlr", "cumsum", overrides=KEYS, out=tmp_path / "two", quiet=True)
    assert other.metrics["threads"] == 2
    assert not same(weights(full.run_dir), weights(other.run_dir))  # what the resume would have given unpinned


def test_an_explicit_thread_count_on_resume_still_wins(tmp_path, monkeypatch):
    """-o hardware.threads=N on --resume is the user's choice (it may change the last bits): used and recorded."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    part = ssmbench.evaluate("dlr", "cumsum", overrides={**KEYS, "L": 32, "train.steps": 3}, out=tmp_path / "part",
                             quiet=True)
    done = resume(part.run_dir, {"train.steps": 4, "hardware.threads": 2}, quiet=True)
    assert done.metrics["threads"] == 2 and done.metrics["threads_rule"] == "hardware.threads"
    assert json.loads((part.run_dir / "config.json").read_text())["hardware"]["threads"] == 2
