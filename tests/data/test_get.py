"""`ssmbench get`: rebuild or download a catalogue dataset and check every shard; `verify --catalog`; `ls datasets`.

The first test rebuilds the packaged catalogue's reduced twin of shift-4096 and checks its shard hashes, so every
machine that runs the suite (CI on each submission) tests that the bytes do not depend on where they are made.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ssmbench.data.catalog import load_catalog
from ssmbench.data.get import entry_from_folder, get_dataset
from ssmbench.errors import VerificationError

ARGV = ["generate", "shift", "--length", "64", "--n", "40", "--samples-per-shard", "8"]  # tiny_shift's command


def ssmbench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ssmbench")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from ssmbench.cli import main; main()"]
    env = {k: v for k, v in os.environ.items() if k not in ("SSMBENCH_CATALOG", "SSMBENCH_DATA")}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env={**env, "PYTHONSAFEPATH": "1"})


def write_catalog(path: Path, **entries: dict) -> Path:
    path.write_text(json.dumps({"format": 1, "datasets": entries}))
    return path


def test_the_packaged_twin_rebuilds_to_the_catalogued_bytes_here(tmp_path):
    entry = load_catalog(env=False)["shift-4096-ci"]
    full = load_catalog(env=False).get("shift-4096")
    if full is not None:  # a twin: the same config (so the same folder name) and command, fewer samples
        assert entry.folder == full.folder and entry.build["argv"] == [*full.build["argv"], "--n", "200"]
    done = ssmbench("get", "shift-4096-ci", "--to", str(tmp_path), "-q", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["how"] == "built" and result["checked_shards"] == len(entry.shards) == 5
    folder = tmp_path / "shift-4096-ci"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["content_digest"] == entry.content_digest
    assert [sh["sha256"] for s in ("train", "val", "test") for sh in manifest["splits"][s]["shards"]] == \
        [sh["sha256"] for sh in entry.shards]
    assert not (tmp_path / ".get-shift-4096-ci").exists()
    checked = ssmbench("verify", str(folder), "--catalog")
    assert checked.returncode == 0 and "5 shard(s) match catalogue entry 'shift-4096-ci'" in checked.stdout
    again = ssmbench("get", "shift-4096-ci", "--to", str(tmp_path), "--json")  # present: checked, not rebuilt
    assert json.loads(again.stdout)["how"] == "present"


def test_a_differing_shard_is_exit_3_naming_shard_field_and_machine_and_nothing_is_replaced(tiny_shift, tmp_path):
    good = entry_from_folder(tiny_shift, ARGV, 1)
    bad = copy.deepcopy(good)
    shard = bad["shards"][2]
    shard["sha256"] = "0" * 64
    shard["content"]["targets"] = "0" * 16
    bad["environment"]["numpy"] = "1.0.0"
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64-bad": bad})
    root = tmp_path / "data"
    (root / "shift-64-bad").mkdir(parents=True)  # something already there that must survive: not a dataset yet
    (root / "shift-64-bad" / "keep.txt").write_text("mine")
    done = ssmbench("get", "shift-64-bad", "--catalog", str(cat), "--to", str(root), "-q")
    assert done.returncode == 3, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert f"{shard['path']} differs from catalogue entry 'shift-64-bad' in field 'targets'" in line
    assert "numpy" in line and "(catalogue: 1.0.0)" in line and "numba" in line and "CPU" in line
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in (root / "shift-64-bad").iterdir()) == ["keep.txt"]
    kept = root / ".get-shift-64-bad"  # the rebuilt copy stays aside for inspection
    assert (next(kept.iterdir()) / "manifest.json").exists()


def test_equal_content_with_other_file_bytes_is_accepted_with_a_note(tiny_shift, tmp_path):
    entry = entry_from_folder(tiny_shift, ARGV, 1)
    entry["shards"][0]["sha256"] = "f" * 64  # as if its attributes recorded other library versions
    entry["environment"]["h5py"] = "0.0.1"
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64-old": entry})
    result = get_dataset("shift-64-old", tmp_path / "data", catalog=cat, quiet=True)
    assert result.how == "built" and (tmp_path / "data" / "shift-64-old" / "manifest.json").exists()
    assert len(result.notes) == 1 and "equal content but other file bytes" in result.notes[0]
    assert "h5py" in result.notes[0] and "(catalogue: 0.0.1)" in result.notes[0]


@pytest.mark.parametrize("ranges", [True, False])
def test_an_entry_with_a_mirror_is_downloaded_then_checked(tiny_shift, tmp_path, make_server, ranges):
    served = tmp_path / "served"
    shutil.copytree(tiny_shift, served / "shift-64", ignore=shutil.ignore_patterns(".build"))
    server = make_server(served)
    server.ranges = ranges
    entry = {**entry_from_folder(tiny_shift, ARGV, 1), "sources": [server.url("shift-64/")]}
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry})
    result = get_dataset("shift-64", tmp_path / "data", catalog=cat, quiet=True)
    assert result.how == "downloaded" and len(result.checked) == 6 and not result.notes
    assert server.requests_for("shift-64/train/shard-00000-of-00004.h5")
    shard = served / "shift-64" / entry["shards"][1]["path"]  # a mirror serving other (self-consistent) bytes
    entry["shards"][1]["sha256"] = "1" * 64
    entry["shards"][1]["content"]["inputs"] = "1" * 16
    cat = write_catalog(tmp_path / "cat2.json", **{"shift-64": entry})
    shutil.rmtree(tmp_path / "data")
    with pytest.raises(VerificationError, match=f"{entry['shards'][1]['path']} differs .* field 'inputs'"):
        get_dataset("shift-64", tmp_path / "data", catalog=cat, quiet=True)
    assert shard.exists()


def test_verify_catalog_fails_on_a_folder_that_differs_from_its_entry(tiny_shift, tmp_path):
    entry = entry_from_folder(tiny_shift, ARGV, 1)
    entry["shards"][-1]["sha256"] = "2" * 64
    entry["shards"][-1]["content"]["sample_id"] = "2" * 16
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry})
    done = ssmbench("verify", str(tiny_shift), "--catalog", str(cat))
    assert done.returncode == 3
    assert "test/shard-00000-of-00001.h5 differs from catalogue entry 'shift-64' in field 'sample_id'" in done.stderr


def test_ls_datasets_lists_size_samples_and_measured_build_time(tiny_shift, tmp_path):
    entry = entry_from_folder(tiny_shift, ARGV, 2, {"wall_s": 95.0, "cpu_s": 150.0})
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry})
    done = ssmbench("ls", "--catalog", str(cat))
    assert done.returncode == 0, done.stderr
    row = next(ln for ln in done.stdout.splitlines() if ln.startswith("shift-64 "))
    assert "40" in row and "1.6 min (2.5 min CPU, 2 workers)" in row and "rebuilt here" in row
    twin = next(ln for ln in done.stdout.splitlines() if ln.startswith("shift-4096-ci "))
    assert "200" in twin and "built-in" in twin
    assert ssmbench("download", "shift-64", "--catalog", str(cat), "--split", "test").returncode == 2
