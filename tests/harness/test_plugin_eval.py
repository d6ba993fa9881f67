"""Plug-in tasks defined outside the package are generated and evaluated with no edit to the harness: they are
found through the `ssmbench.tasks` entry-point group of an installed distribution, and train with the `generic`
quick preset sized from their Spec (a regression task and a classification task). The smallest task of
docs/plugins.md runs as the page shows it: its code block is the plug-in module, its TOML block the entry point."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from support import REPO, TESTS

PLUGIN_DOC = REPO / "docs" / "plugins.md"


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


def tiny(steps: int, eval_every: int) -> list[str]:
    """`eval` options for a few-second CPU run."""
    return ["-o", f"train.steps={steps}", "-o", f"train.eval_every={eval_every}", "-o", "eval.val_samples=8",
            "-o", "eval.test_samples=8", "-o", "eval.metric_batch_size=4", "-o", "model.d_model=8",
            "-o", "data.workers=0", "-q", "--json"]


TINY = tiny(6, 3)


# The classification plug-in (three processes, 9 s) is slow, in CI's `pytest -m slow`; the regression one and
# docs/plugins.md's classification task take the same path in the default run.
@pytest.mark.parametrize("task, metric", [("running_mean", "r2"),
                                          pytest.param("residues", "accuracy", marks=pytest.mark.slow)])
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


# ------------------------------------------------------------------------------- docs/plugins.md's smallest task

def documented_plugin() -> tuple[str, str, dict[str, str]]:
    """(module name, module source, entry points) of the smallest task exactly as docs/plugins.md shows them: the
    Python block that starts with `# <module>.py` and the TOML block of the `ssmbench.tasks` entry points."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", PLUGIN_DOC.read_text(), flags=re.S | re.M)
    module, source = next((m.group(1), body) for lang, body in blocks
                          if lang == "python" and (m := re.match(r"# (\w+)\.py\n", body)))
    toml = next(body for lang, body in blocks if lang == "toml")
    return module, source, tomllib.loads(toml)["project"]["entry-points"]["ssmbench.tasks"]


def test_the_documented_smallest_task_declares_the_required_members_only(tmp_path):
    from ssmbench.api import Task, TrainingPolicy, undeclared_names

    module_name, source, entries = documented_plugin()
    (tmp_path / f"{module_name}.py").write_text(source)
    spec = importlib.util.spec_from_file_location(f"doc_{module_name}", tmp_path / f"{module_name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (name, target), = entries.items()
    cls = getattr(module, target.split(":")[1])
    assert issubclass(cls, Task) and cls.name == name and undeclared_names(cls) == []
    assert {n for n in vars(cls) if not n.startswith("_")} == {
        "name", "version", "Config", "presets", "default_preset", "default_n", "spec", "generate", "oracle"}
    assert cls.policy == TrainingPolicy()  # declared nowhere: the default training rules
    task, config = cls(), cls.presets[cls.default_preset]
    keys = np.arange(5, dtype=np.uint64)
    rows = task.generate(config, keys)
    assert {k: (v.dtype.name, v.shape[1:]) for k, v in rows.items()} == {
        k: (f.dtype, f.shape) for k, f in task.spec(config).fields.items()}
    alone = task.generate(config, keys[3:4])  # row i depends on keys[i] alone
    assert all(np.array_equal(alone[k][0], rows[k][3]) for k in rows)
    assert np.array_equal(task.oracle(config, {"inputs": rows["inputs"][2]})["targets"], rows["targets"][2])


@pytest.fixture(scope="module")
def documented_plugin_env(tmp_path_factory) -> dict[str, str]:
    """An installed distribution holding docs/plugins.md's module, with the page's entry points."""
    module_name, source, entries = documented_plugin()
    site = tmp_path_factory.mktemp("doc_site")
    (site / f"{module_name}.py").write_text(source)
    info = site / "ssmbench_doc_plugin-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ssmbench-doc-plugin\nVersion: 0.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[ssmbench.tasks]\n{lines}")
    return {**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": str(site)}


def test_the_documented_smallest_task_is_generated_verified_and_evaluated(documented_plugin_env, tmp_path):
    env = documented_plugin_env
    (name, _), = documented_plugin()[2].items()
    made = ssmbench(env, tmp_path, "generate", name, "--n", "40", "--out", "data", "-q")
    assert made.returncode == 0, made.stderr
    (folder,) = (tmp_path / "data").iterdir()
    checked = ssmbench(env, tmp_path, "verify", str(folder), "--deep")
    assert checked.returncode == 0, checked.stderr + checked.stdout
    run = ssmbench(env, tmp_path, "eval", "--model", "dlr", "--task", name, *tiny(1, 1), "--out", "run")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["test"]["n"] > 0 and 0.0 <= result["test"]["accuracy"] <= 1.0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["preset"] == "quick" and config["train"]["steps"] == 1
    assert config["data"].get("path") is None  # the default policy: fresh samples, not the folder beside the run
