"""Requests that cannot work are refused before any slow work, in one line (plus a hint), without a traceback
(issue 26, "Slow or misleading messages"): a build larger than the free disk space, a Pathfinder image smaller than
the paths it must hold, a dataset folder that does not exist, and scored splits smaller than one virtual batch of
the per-batch metrics."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssmbench.errors import ConfigError
from ssmbench.registry import get_task


def cli(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ssmbench", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "PYTHONSAFEPATH": "1"})


def refused(result: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    """The first stderr line of a refusal with exit status `code` (at most a hint line after it)."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and 1 <= len(lines) <= 2, result.stderr
    assert len(lines) == 1 or lines[1].startswith("hint: "), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)
    return lines[0]


# ------------------------------------------------------------------------------------------ free disk space


def test_a_build_larger_than_the_disk_is_refused_before_its_plan(tmp_path):
    """The issue's 10^11 shift-512 samples (about 651 TiB): planning their 12 million shards took minutes (195 s
    on a busy machine) before an unrelated error. Now one line naming the size and the free space within seconds,
    exit 1 (as the free-space check of a planned build), nothing written."""
    result = cli("generate", "shift", "--length", "512", "--n", str(10**11), "--out", str(tmp_path / "data"),
                 timeout=300)
    line = refused(result, 1, f"not enough free space for {tmp_path / 'data' / 'shift-512'}: about",
                   "TiB needed", "free; free some space or choose another --out")
    assert line.startswith("error: ")
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("*.h5"))


def _fake_disk(monkeypatch, free: int, per_sample: float | None) -> list:
    """`free` bytes free; the written probe stores `per_sample` bytes a sample (None: the probe must not run)."""
    from ssmbench.data.make import estimate, space

    probes: list = []

    def probe(task, config, plan, workers=1, probe=None, **options):  # options: later, say
        assert per_sample is not None, "the probe ran although the raw size fits"
        probes.append(sum(plan.sizes.values()))
        return {"per_sample_bytes": per_sample}

    monkeypatch.setattr(space, "free_bytes", lambda path: free)
    monkeypatch.setattr(estimate, "estimate_build", probe)
    return probes


def test_the_disk_check_before_the_plan_counts_stored_bytes_and_finished_shards(tmp_path, monkeypatch):
    """Raw size within the free space: no probe. Raw size over it: the probe's stored bytes per sample decide
    (1,000 samples x 10 B = 10 kB fits 100 kB; x 1,000 B = 1 MB does not), less the finished shards already in the
    folder (a resumed build: 1 MB - 950 kB = 50 kB fits)."""
    from ssmbench.data.make.generate import check_fits
    from ssmbench.data.make.space import DiskFullError

    config = get_task("shift").Config(L=64)
    raw = get_task("shift").spec(config).bytes_per_sample() * 1000
    assert raw > 100_000  # the premise: the raw samples do not fit 100 kB
    _fake_disk(monkeypatch, free=raw, per_sample=None)
    check_fits("shift", config, tmp_path, n=1000)
    probes = _fake_disk(monkeypatch, free=100_000, per_sample=10.0)
    check_fits("shift", config, tmp_path, n=1000)
    assert probes == [64]  # a small plan of its own, not the build's
    _fake_disk(monkeypatch, free=100_000, per_sample=1000.0)
    with pytest.raises(DiskFullError, match=r"shift-64: about 976\.6 KiB needed, 97\.7 KiB free"):
        check_fits("shift", config, tmp_path, n=1000)
    shard = tmp_path / "shift-64" / "train" / "shard-00000-of-00002.h5"
    shard.parent.mkdir(parents=True)
    shard.write_bytes(b"\0" * 950_000)
    check_fits("shift", config, tmp_path, n=1000)


# ---------------------------------------------------------------------------------------- Pathfinder sizes


def test_pathfinder_sizes_below_32_are_refused_up_front(tmp_path):
    """`--size 8` passed validation and failed in generation after 10,000 pair attempts per image; sizes below 32
    do not fit the paths reliably (generators/pathfinder.py MIN_SIZE), so one rule refuses them when the config is
    made, for both Pathfinder tasks and `-o size=` alike, and the --size help says the same."""
    from ssmbench.generators.pathfinder import MIN_SIZE
    from ssmbench.task_config import resolve

    assert MIN_SIZE == 32
    refused(cli("generate", "pathfinder", "--size", "8", "--n", "10", "--out", str(tmp_path)), 2,
            "size: must be an integer in [32, 8192], got 8", "hint: choose a size of 32 or more")
    refused(cli("generate", "pathfinder_lra", "--size", "16", "--n", "10", "--out", str(tmp_path)), 2,
            "got 16")
    assert not any(tmp_path.iterdir())
    with pytest.raises(ConfigError, match=r"size: must be an integer in \[32, 8192\], got 31"):
        resolve("pathfinder", {"size": "31"})
    assert resolve("pathfinder", {"size": "32"})[0].size == 32
    assert resolve("pathfinder_lra", {}, size=32)[0].size == 32
    assert "from 32 up" in " ".join(cli("generate", "--help").stdout.split())


# ------------------------------------------------------------------------------------------------- verify


def test_verify_of_a_missing_folder_says_it_does_not_exist(tmp_path):
    """Not "manifest.json not found" for a folder that is not there; a near name among the dataset folders beside
    it is suggested. A folder without a manifest still says so."""
    (tmp_path / "shift-512").mkdir()
    (tmp_path / "shift-512" / "manifest.json").write_text("{}")
    line = refused(cli("verify", str(tmp_path / "nope")), 2, "does not exist")
    assert line == f"error: {tmp_path / 'nope'} does not exist" and "manifest.json" not in line
    refused(cli("verify", str(tmp_path / "shift-521")), 2, f"did you mean {tmp_path / 'shift-512'}?")
    (tmp_path / "empty").mkdir()
    refused(cli("verify", str(tmp_path / "empty")), 2, "manifest.json not found")


# ----------------------------------------------------------------------------- per-batch metrics of eval


def test_eval_refuses_fewer_scored_samples_than_one_metric_batch(tmp_path):
    """`macro_f1_batchavg nan` (every virtual batch incomplete and dropped) is refused before the run starts:
    one line naming both values and the fix; no run folder."""
    out = tmp_path / "run"
    args = ["eval", "--model", "dlr", "--task", "cumsum", "-o", "L=32", "-o", "model.d_model=8", "-o",
            "train.steps=2", "-o", "data.workers=0", "-q", "--out", str(out)]
    line = refused(cli(*args, "-o", "eval.val_samples=8"), 2,
                   "hint: pass -o eval.metric_batch_size=8 (or less), or -o eval.val_samples=16 (or more)")
    assert line == ("invalid option: eval.metric_batch_size: 16 is more than the 8 val samples scored "
                    "(eval.val_samples = 8): no complete virtual batch, so every per-batch metric (*_batchavg) "
                    "would read nan")
    refused(cli(*args, "-o", "eval.test_samples=5", "-o", "eval.metric_batch_size=6"), 2,
            "6 is more than the 5 test samples scored (eval.test_samples = 5)")
    assert not out.exists()


def test_a_folder_with_fewer_samples_than_one_metric_batch_is_refused(tmp_path):
    """A folder task scores min(eval.val_samples, the split's samples): a folder holding 4 val samples under the
    quick preset's metric batch of 16 is refused naming the folder; a metric batch of 4 runs."""
    from ssmbench.data.make.generate import generate_dataset
    from ssmbench.harness.config.resolver import resolve_run
    from support import tiny_config

    folder = generate_dataset("pathfinder", tiny_config("pathfinder"), out=tmp_path, n=12,
                              split={"train": 4, "val": 4, "test": 4}, quiet=True).path
    with pytest.raises(ConfigError) as caught:
        resolve_run("dlr", "pathfinder", data=folder)
    assert str(caught.value) == (f"eval.metric_batch_size: 16 is more than the 4 val samples scored (all 4 of "
                                 f"{folder}): no complete virtual batch, so every per-batch metric (*_batchavg) "
                                 "would read nan")
    assert caught.value.hint == ("pass -o eval.metric_batch_size=4 (or less), or use a folder with at least 16 val "
                                 "samples")
    cfg = resolve_run("dlr", "pathfinder", data=folder, overrides={"eval.metric_batch_size": 4})
    assert cfg.eval.metric_batch_size == 4
