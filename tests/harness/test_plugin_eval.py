"""Plug-in tasks defined outside the package are generated and evaluated with no edit to the harness: they are
found through the `ssmbench.tasks` entry-point group of an installed distribution, and train with the `generic`
quick preset sized from their Spec (a regression task and a classification task)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory) -> dict[str, str]:
    """An installed distribution (a dist-info folder on the path) whose entry points name the test plug-ins."""
    site = tmp_path_factory.mktemp("site")
    info = site / "ssmbench_test_plugins-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ssmbench-test-plugins\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[ssmbench.tasks]\nresidues = plugin_tasks:Residues\n"
                                           "running_mean = plugin_tasks:RunningMean\n")
    return {**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": os.pathsep.join([str(site), str(TESTS)])}


def ssmbench(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ssmbench")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=900)


TINY = ["-o", "train.steps=6", "-o", "train.eval_every=3", "-o", "eval.val_samples=8", "-o", "eval.test_samples=8",
        "-o", "eval.metric_batch_size=4", "-o", "model.d_model=8", "-o", "data.workers=0", "-q", "--json"]


@pytest.mark.parametrize("task, metric", [("running_mean", "r2"), ("residues", "accuracy")])
def test_a_plugin_task_is_generated_and_evaluated(plugin_env, tmp_path, task, metric):
    made = ssmbench(plugin_env, tmp_path, "generate", task, "--n", "40", "--out", "data", "-q")
    assert made.returncode == 0, made.stderr
    listed = ssmbench(plugin_env, tmp_path, "ls")
    assert task in listed.stdout
    run = ssmbench(plugin_env, tmp_path, "eval", "--model", "dlr", "--task", task, *TINY, "--out", "run")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert metric in result["test"] and result["test"]["n"] > 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["preset"] == "quick" and config["train"]["lr"] == 1e-4  # the generic section's DLR row
    assert config["model_overrides"]["d_state"] == config["task_config"].get("L", 6)  # ${T} from the Spec
