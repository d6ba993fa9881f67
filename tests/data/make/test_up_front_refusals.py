"""Requests that cannot work are refused before any slow work, in one line (plus a hint), without a traceback
(issue 26, "Slow or misleading messages"): a build larger than the free disk space, a Pathfinder image smaller than
the paths it must hold, a dataset folder that does not exist. (Scored splits smaller than one virtual batch of the
per-batch metrics: tests/harness/test_eval_up_front.py.)"""

from __future__ import annotations

import pytest

from ssmbench.errors import ConfigError
from ssmbench.registry import get_task
from support import cli, refused

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
