"""The eval command's one request and its one resolver: the selector settled once however it is given, refused when
two spellings disagree, the dataset folder's config compared with the resolved one, and the mode decided (and run)
in one place."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ssmbench.task_config
from ssmbench.errors import ConfigError, DatasetError
from ssmbench.harness import dispatch, evaluation
from ssmbench.harness.config.resolver import resolve_request, resolve_run
from ssmbench.harness.config.run_request import RunOptions, RunRequest, RunSettings, TaskSelector
from ssmbench.harness.dispatch import choose_mode, plan, run_request

SMALL = {"eval.metric_batch_size": 1}  # the folders below hold one val and one test sample


def request(task: str = "pathfinder", *, size: int | None = None, length: int | None = None,
            data: str | Path | None = None, keys: dict[str, object] | None = None) -> RunRequest:
    """The request of `ssmbench eval --task TASK [--size S] [--length L] [--data D] -o KEY=VALUE ...`."""
    return RunRequest("single", "dlr", TaskSelector(task, length=length, size=size),
                      RunSettings(overrides={**SMALL, **(keys or {})}), RunOptions(data=data))


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    """A data root with one tiny Pathfinder folder: side 32, num_distractors 3."""
    root = tmp_path_factory.mktemp("data")
    exe = Path(sys.executable).with_name("ssmbench")
    made = subprocess.run([str(exe), "generate", "pathfinder", "--size", "32", "-o", "num_distractors=3", "--n", "6",
                           "--split", "train=4,val=1,test=1", "--out", str(root), "-q", "--json"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONSAFEPATH": "1"}, timeout=600)
    assert made.returncode == 0, made.stderr
    return root


@pytest.fixture
def on_root(data_root, monkeypatch) -> Path:
    monkeypatch.setenv("SSMBENCH_DATA", str(data_root))
    return data_root


def folder(root: Path) -> Path:
    return next(root.glob("pathfinder-32-*"))


def test_size_option_and_size_key_give_the_same_config(on_root):
    by_option = resolve_request(request(size=32, keys={"num_distractors": "3"}))
    by_key = resolve_request(request(keys={"size": "32", "num_distractors": "3"}))
    by_task_key = resolve_request(request(keys={"task.size": 32, "task.num_distractors": 3}))
    assert by_option == by_key == by_task_key
    assert by_option.task_config["size"] == 32 and Path(by_option.data.path) == folder(on_root).resolve()
    # the resolver `resolver.resolve_run` and ssmbench.evaluate go through
    assert resolve_run("dlr", "pathfinder", size=32, overrides={**SMALL, "num_distractors": 3}) == by_option


def test_length_option_and_L_key_give_the_same_config():
    by_option = resolve_request(request("shift", length=64))
    assert by_option == resolve_request(request("shift", keys={"L": "64"}))
    assert by_option.task_config["L"] == 64


def test_disagreeing_selectors_are_refused_as_before(on_root):
    with pytest.raises(ConfigError, match="--size: 32 disagrees with size = 64 given as a config value"):
        resolve_request(request(size=32, keys={"size": "64"}))
    with pytest.raises(ConfigError, match="--length: pathfinder takes no --length; use --size"):
        resolve_request(request(length=64))


def test_the_selector_is_resolved_once(on_root, monkeypatch):
    """One task-config resolution for the run (the quick preset adds no task keys) and none for the folder: the
    folder found under the data root holds exactly the resolved config, and is compared, not re-resolved."""
    calls = []
    real = ssmbench.task_config.resolve

    def counting(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(ssmbench.task_config, "resolve", counting)
    cfg = resolve_request(request(size=32, keys={"num_distractors": 3}))
    assert len(calls) == 1 and calls[0][1]["size"] == 32
    assert dict(cfg.task_config) == json.loads((folder(on_root) / "manifest.json").read_text())["config"]


def test_the_folder_config_is_compared_with_the_resolved_one(on_root):
    path = folder(on_root)
    # --data: the folder's config becomes the run's (its num_distractors, though none was asked for) ...
    cfg = resolve_request(request(size=32, data=path))
    assert cfg.task_config["num_distractors"] == 3 and Path(cfg.data.path) == path.resolve()
    # ... and --data alone takes the folder's size as the selector
    assert resolve_request(request(data=path)).task_config == cfg.task_config
    # a key the user asked for that the folder does not hold is refused, naming both values
    with pytest.raises(DatasetError, match="num_distractors = 3, not 5"):
        resolve_request(request(size=32, data=path, keys={"num_distractors": 5}))
    # no folder under the data root with the resolved config: refused with the command that makes it
    with pytest.raises(DatasetError, match="no pathfinder dataset folder with this configuration") as refused:
        resolve_request(request(size=32, keys={"num_distractors": 5}))
    assert "ssmbench generate pathfinder --size 32 -o num_distractors=5" in refused.value.hint


def test_choose_mode_and_plan():
    assert [choose_mode("shift"), choose_mode("atomic"), choose_mode(None), choose_mode("shift", seeds=(0, 1)),
            choose_mode(None, data="data/pathfinder-32"), choose_mode(None, resume_dir="r"),
            choose_mode("shift", checkpoint="c.pt")] == ["single", "suite", "suite", "suite", "single", "resume",
                                                        "checkpoint"]
    with pytest.raises(ConfigError, match="give one of them"):
        choose_mode(None, resume_dir="r", checkpoint="c.pt")
    r = plan(model="dlr", selector=TaskSelector("shift", length=64), settings=RunSettings(seeds=(0, 1)))
    assert r.mode == "suite" and (r.selector.length, r.selector.size) == (64, None)


def test_a_suite_member_is_a_single_run_with_the_tasks_own_time_limit():
    """`member()` (what a suite runs for each task): mode single, the task, the seed and the folder of that member,
    and the time limit the suite gives that task (what is left of the suite's), replacing the suite's own."""
    from ssmbench.harness.runtime.time_limit import Deadline

    suite_limit, task_limit = Deadline(3600), Deadline(600)
    r = RunRequest("suite", "dlr", TaskSelector("atomic", length=64), RunSettings(seeds=(0, 1)),
                   RunOptions(time_limit=suite_limit, device="cpu"))
    m = r.member("shift", out="suite/shift-seed1", seed=1, time_limit=task_limit)
    assert (m.mode, m.selector.task, m.selector.length, m.settings.seed) == ("single", "shift", 64, 1)
    assert m.options.out == "suite/shift-seed1" and m.options.device == "cpu"
    assert m.options.time_limit is task_limit
    assert r.member("shift", out="x", seed=None).options.time_limit is None


def test_run_request_dispatches_on_the_mode(monkeypatch, tmp_path):
    seen: list[tuple[str, object]] = []
    monkeypatch.setattr(evaluation, "resume", lambda run_dir, overrides, **kw: seen.append(("resume", overrides)))
    monkeypatch.setattr(evaluation, "evaluate_request", lambda r: seen.append(("single", r)) or r)
    import ssmbench.harness.scoring as scoring

    monkeypatch.setattr(scoring, "score_checkpoint", lambda ckpt, **kw: seen.append(("checkpoint", kw["size"])))
    options = RunOptions(device="cpu", data="d", out=str(tmp_path / "suite"), quiet=True)
    keys = RunSettings(overrides={"train.steps": "9"}, seeds=(3, 4))
    run_request(RunRequest("resume", None, options=options, settings=keys, resume_dir="r"))
    run_request(RunRequest("checkpoint", None, TaskSelector(size=64), options=options, checkpoint="c.pt"))
    single = RunRequest("single", "dlr", TaskSelector("shift"), options=options)
    run_request(single)
    assert seen[0] == ("resume", {"train.steps": "9", "hardware.device": "cpu", "data.path": "d"})
    assert seen[1] == ("checkpoint", 64) and seen[2] == ("single", single)

    seen.clear()
    monkeypatch.setattr(evaluation, "evaluate_request",
                        lambda r: seen.append(("member", r)) or evaluation.EvalResult(Path(r.options.out), None, {}))
    suite = RunRequest("suite", None, TaskSelector("shift,cumsum"), settings=keys, options=options)
    outcome = dispatch.run_request(suite)
    members = [r for _, r in seen]
    assert sorted((m.mode, m.model, m.selector.task, m.settings.seed) for m in members) == \
        [("single", "dlr", t, s) for t in ("cumsum", "shift") for s in (3, 4)]
    assert outcome.suite == tmp_path / "suite" and all(Path(m.options.out).parent == outcome.suite for m in members)
    assert all(m.settings.overrides == {"train.steps": "9"} and m.options.device == "cpu" for m in members)


def test_the_eval_command_refuses_disagreeing_selectors_in_one_line(tmp_path):
    """`--size` and `-o size=` both reach the one resolver through the request: exit 2, one line, no traceback."""
    exe = Path(sys.executable).with_name("ssmbench")
    run = subprocess.run([str(exe), "eval", "--model", "dlr", "--task", "pathfinder", "--size", "32", "-o", "size=64",
                          "-q"], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                         env={**os.environ, "PYTHONSAFEPATH": "1", "SSMBENCH_DATA": str(tmp_path)})
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "--size: 32 disagrees with size = 64 given as a config value; give one of them" in run.stderr
