"""`ssmbench eval --task a,b` / `--task GROUP`: one run folder per task inside one suite folder that the same command
finds again (finished tasks skipped, an interrupted one resumed), progress on stderr, the compare table at the end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ssmbench.harness.config.task_groups import expand_tasks, task_groups
from support import run_main

TINY = ["-o", "L=32", "-o", "model.d_model=8", "-o", "model.d_state=32", "-o", "train.steps=4",
        "-o", "train.eval_every=2", "-o", "eval.val_samples=8", "-o", "eval.test_samples=8", "-o", "eval.metric_batch_size=4", "-o", "data.workers=0",
        ]


def ssmbench(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`ssmbench ARGS` in `cwd`, in this process (what a suite prints and writes needs no process of its own)."""
    return run_main(*args, cwd=cwd)


def test_groups_come_from_the_tasks():
    groups = task_groups()
    assert groups["atomic"] == groups["table1"] and len(groups["atomic"]) == 11
    assert groups["atomic"][:5] == ["shift", "cumsum", "cummax", "select_fixed", "solve_fixed"]  # Table 1's order
    assert set(groups["all"]) >= {*groups["atomic"], *groups["higher_order"], "listops"}
    assert expand_tasks("cumsum,atomic")[:2] == ["cumsum", "shift"] and len(expand_tasks("cumsum,atomic")) == 11


def test_a_suite_runs_each_task_once_and_a_rerun_continues_it(tmp_path):
    first = ssmbench(tmp_path, "eval", "--model", "dlr", "--task", "shift,cumsum", *TINY)
    assert first.returncode == 0, first.stderr
    suites = list((tmp_path / "runs").iterdir())
    assert len(suites) == 1 and sorted(p.name for p in suites[0].iterdir() if p.is_dir()) == ["cumsum", "shift"]
    suite = suites[0]
    assert "[0/2 done] shift: starting" in first.stderr and "[1/2 done] cumsum: starting (about" in first.stderr
    assert "shift" in first.stdout and "cumsum" in first.stdout  # the compare table
    # an interrupted task (no metrics.json, a last.pt) resumes; a finished one is skipped
    (suite / "cumsum" / "metrics.json").unlink()
    again = ssmbench(tmp_path, "eval", "--model", "dlr", "--task", "shift,cumsum", *TINY)
    assert again.returncode == 0, again.stderr
    assert "shift: finished earlier, skipped" in again.stderr and "cumsum: resuming from its last.pt" in again.stderr
    assert list((tmp_path / "runs").iterdir()) == [suite]
    assert json.loads((suite / "cumsum" / "metrics.json").read_text())["steps"] == 4
    # a finished task's metrics.json damaged after the fact: one line naming it and what to do, exit 3, no traceback
    metrics = suite / "shift" / "metrics.json"
    metrics.write_text(metrics.read_text()[:100])
    damaged = ssmbench(tmp_path, "eval", "--model", "dlr", "--task", "shift,cumsum", *TINY)
    assert damaged.returncode == 3 and "Traceback" not in damaged.stderr, damaged.stderr
    assert "shift/metrics.json is damaged" in damaged.stderr and "re-run the same command" in damaged.stderr


def test_an_unknown_task_or_group_gets_a_did_you_mean(tmp_path):
    result = ssmbench(tmp_path, "eval", "--task", "atomc", *TINY, "-q")
    assert result.returncode == 2 and "did you mean 'atomic'" in result.stderr and "Traceback" not in result.stderr
