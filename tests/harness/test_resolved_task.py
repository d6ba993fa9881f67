"""One resolved task per run: the resolver settles the task, its config and its Spec once (`ResolvedTask`), and
the run carries it to the trainer's setup, the feeds, `TaskStream` and the message sizing. Counted here by
wrapping the task class's `spec`: a new run, a folder task's run, a resumed run and a scored checkpoint each compute
the Spec once, and a length sweep once per length. Counted are the computations outside the task's own code: a
task's `generate` may build its Spec to allocate its outputs (plug-in code, the Task contract's business)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

import ssmbench
from ssmbench.data.read.streaming import TaskStream
from ssmbench.harness.config.resolver import resolve_run, resolve_saved
from ssmbench.registry import get_task
from ssmbench.task_config import ResolvedTask

TINY = {"train.steps": 2, "train.eval_every": 2, "model.d_model": 4, "model.n_layers": 1, "eval.val_samples": 4,
        "eval.test_samples": 4, "eval.metric_batch_size": 2, "data.workers": 0}


@pytest.fixture
def spec_calls(monkeypatch):
    """Install a counter on a task class's `spec`; returns {task name: calls}."""
    calls: dict[str, int] = {}

    def count(name: str) -> None:
        cls = type(get_task(name))
        original = cls.spec

        def counted(self, config):
            if not sys._getframe(1).f_globals.get("__name__", "").startswith("ssmbench.generators"):
                calls[name] = calls.get(name, 0) + 1
            return original(self, config)

        monkeypatch.setattr(cls, "spec", counted)
        calls[name] = 0

    return count, calls


def test_a_streamed_run_computes_its_spec_once(spec_calls, tmp_path):
    count, calls = spec_calls
    count("cumsum")
    result = ssmbench.evaluate("dlr", "cumsum", overrides={"L": 32, **TINY}, out=tmp_path / "run", quiet=True)
    assert result.metrics["test"]["n"] == 4 * 32  # 4 samples of 32 positions scored
    assert calls["cumsum"] == 1


def test_a_resumed_run_and_a_scored_checkpoint_compute_it_once_each(spec_calls, tmp_path, monkeypatch):
    run = ssmbench.evaluate("dlr", "cumsum", overrides={"L": 32, **TINY}, out=tmp_path / "run", quiet=True)
    count, calls = spec_calls
    count("cumsum")
    from ssmbench.harness.evaluation import resume
    from ssmbench.harness.results import checkpoints

    reads: list[str] = []
    load = checkpoints.load_checkpoint
    monkeypatch.setattr(checkpoints, "load_checkpoint", lambda path, **kw: reads.append(Path(path).name) or
                        load(path, **kw))
    resume(run.run_dir, {"train.steps": 4}, quiet=True)
    assert calls["cumsum"] == 1
    assert reads.count("last.pt") == 1  # read once: the step check and the restore share it
    calls["cumsum"] = 0
    from ssmbench.harness.scoring import score_checkpoint

    score_checkpoint(run.run_dir / "checkpoints" / "best.pt", "val", length=64, out=tmp_path / "score")
    assert calls["cumsum"] == 1  # at the scored length, made by the resolver's resolve_saved
    calls["cumsum"] = 0
    from ssmbench.harness.length_sweep import sweep_lengths

    sweep_lengths(run.run_dir / "checkpoints" / "best.pt", [16, 32], out=tmp_path / "sweep", quiet=True)
    assert calls["cumsum"] == 2  # one run per length


def test_a_folder_run_computes_its_spec_once(spec_calls, tmp_path):
    from ssmbench.data.make.generate import generate_dataset
    from ssmbench.task_config import resolve_config

    _, config, _ = resolve_config("pathfinder", size=32)
    folder = generate_dataset("pathfinder", config, out=tmp_path / "data", n=12,
                              split={"train": 4, "val": 4, "test": 4}, quiet=True).path
    count, calls = spec_calls
    count("pathfinder")
    ssmbench.evaluate("dlr", "pathfinder", data=folder, overrides={**TINY, "train.batch_size": 2, "train.warmup_steps": 0},
                      out=tmp_path / "run", quiet=True)
    assert calls["pathfinder"] == 1


def test_the_resolver_hands_over_the_task_it_settled():
    cfg = resolve_run("dlr", "shift", length=64)
    rt = cfg.resolved_task
    assert rt is cfg.resolved and rt.name == "shift" and rt.spec.seq_len == 64
    assert cfg.with_overrides({"train.steps": 3}).resolved is rt  # other keys: the same object carried
    assert cfg.with_overrides({"L": 128}).resolved_task.spec.seq_len == 128  # another config: made anew
    again = resolve_saved(cfg.to_json(), {"L": 128})
    assert again.resolved is not None and again.resolved.spec.seq_len == 128
    assert "resolved" not in cfg.to_json()


def test_the_stream_and_the_workers_take_it_as_it_is(spec_calls):
    rt = ResolvedTask.of("cumsum", {"L": 16})
    count, calls = spec_calls
    count("cumsum")
    stream = TaskStream(rt, seed=0)
    copy = pickle.loads(pickle.dumps(rt))  # what a data worker receives
    assert copy == rt and copy.spec == rt.spec and stream.spec is rt.spec
    assert calls["cumsum"] == 0
    by_name = TaskStream("cumsum", {"L": 16}, seed=0)
    assert calls["cumsum"] == 1  # a name is resolved once, in the stream
    assert (stream.samples("val", 0, 4)["inputs"] == by_name.samples("val", 0, 4)["inputs"]).all()
    with pytest.raises(TypeError, match="carries its config"):
        TaskStream(rt, {"L": 32})


def test_a_config_changed_behind_its_back_is_made_anew():
    import dataclasses

    cfg = resolve_run("dlr", "shift", length=64)
    other = dataclasses.replace(cfg, task_config={**cfg.task_config, "L": 32})
    assert other.resolved_task.spec.seq_len == 32

