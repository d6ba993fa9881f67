"""One resolver: `ssmbench generate`, `ssmbench eval`, `ssmbench.evaluate(...)` and `RunConfig.with_overrides` (what
`--resume -o` and `--checkpoint -o size=...` use) turn the same values into the same task config, and the folder
`generate` builds is the one `eval` finds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.config.run_config import RunConfig
from ssmbench.task_config import from_plain, rebase, resolve, resolve_config, to_plain
from support import run_main

OVERRIDE = {"num_distractors": "3"}


def ssmbench(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`ssmbench ARGS` in `cwd` with the data root `cwd/data`, in this process (the command line's resolution is
    what counts, not its process)."""
    return run_main(*args, cwd=cwd, env={"SSMBENCH_DATA": str(cwd / "data")})


@pytest.mark.parametrize("size", [100, 200, 384])
def test_generate_eval_and_evaluate_resolve_the_same_pathfinder_config(tmp_path, monkeypatch, size):
    made = ssmbench(tmp_path, "generate", "pathfinder", "--size", str(size), "-o", "num_distractors=3", "--n", "6",
                    "--split", "train=4,val=1,test=1", "--out", "data", "-q", "--json")
    assert made.returncode == 0, made.stderr
    folder = (tmp_path / json.loads(made.stdout)["path"]).resolve()
    built = json.loads((folder / "manifest.json").read_text())["config"]
    # the library resolver, as generate calls it
    assert to_plain(resolve_config("pathfinder", size=size, overrides=["num_distractors=3"])[1]) == built
    # ssmbench.evaluate's resolution finds that folder under the data root and takes its config
    monkeypatch.setenv("SSMBENCH_DATA", str(tmp_path / "data"))
    cfg = resolve_run("dlr", "pathfinder", size=size, overrides={"task.num_distractors": 3,
                                                                       "eval.metric_batch_size": 1})  # 1 val sample
    assert dict(cfg.task_config) == built and Path(cfg.data.path) == folder.resolve()
    # -o size=S on a run of the 128 preset (the --resume / --checkpoint path) gives the same config
    base = RunConfig(task="pathfinder", task_config=to_plain(resolve("pathfinder", {"size": 128})[0]), model="dlr")
    assert dict(base.with_overrides({"size": size, "num_distractors": "3"}).task_config) == built
    # and `ssmbench eval --size S` (scoring the untrained model: resolution and folder lookup, no training)
    run = ssmbench(tmp_path, "eval", "--evaluator", "score_only", "--model", "dlr", "--task", "pathfinder",
                   "--size", str(size), "-o", "num_distractors=3", "-o", "model.d_model=4", "-o", "model.n_layers=1",
                   "-o", "eval.test_samples=1", "-o", "eval.metric_batch_size=1", "-o", "data.workers=0", "--split", "test", "-q", "--out", "run")
    assert run.returncode == 0, run.stderr
    stored = json.loads((tmp_path / "run" / "config.json").read_text())
    assert stored["task_config"] == built and Path(stored["data"]["path"]) == folder.resolve()


def test_rebase_keeps_only_what_the_user_changed():
    """Moving an atomic config to another L keeps a changed field; moving Pathfinder re-derives the geometry."""
    shift = to_plain(resolve("shift", {"L": 512, "num_shifts": 4})[0])
    assert to_plain(rebase("shift", shift, {"L": 1024})) == to_plain(resolve("shift", {"L": 1024, "num_shifts": 4})[0])
    pf = to_plain(resolve("pathfinder", {"size": 128})[0])
    moved = rebase("pathfinder", pf, {"size": 200})
    assert moved == resolve("pathfinder", {"size": 200})[0] != from_plain("pathfinder", {**pf, "size": 200})


@pytest.mark.parametrize("task, length, T", [("cumsum", 64, 64), ("cumsum", 256, 256), ("select", 64, 128)])
def test_a_presets_t_placeholder_becomes_the_tasks_input_length(task, length, T):
    """`"model.d_state" = "${T}"` in the quick preset's DLR row is the task's input length T (the spec's seq_len,
    not L: masked select's input is 2 L long), resolved before the model builder sees it; a user's value wins."""
    cfg = resolve_run("dlr", task, length=length)
    assert cfg.spec().seq_len == T and cfg.model_overrides["d_state"] == T
    assert resolve_run("dlr", task, length=length, overrides={"model.d_state": "8"}).model_overrides["d_state"] == 8
