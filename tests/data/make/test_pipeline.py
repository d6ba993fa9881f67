"""The dataset folder: plan, atomic shard writing, manifest, resume, job arrays, worker invariance, verify."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from ssmbench.data.folder.manifest import load_manifest
from ssmbench.data.hub.verify import verify_dataset
from ssmbench.data.make.generate import generate_dataset
from ssmbench.data.make.shards import auto_samples_per_shard, make_plan, split_sizes
from ssmbench.errors import ConfigError, DatasetError
from ssmbench.generators.select_fixed import SelectFixedConfig
from ssmbench.generators.shift import ShiftConfig
from ssmbench.registry import get_task
from ssmbench.seeding import keys_for


def test_split_sizes_rounding_and_counts():
    assert split_sizes(16000, {"train": .8, "val": .1, "test": .1}) == {"train": 12800, "val": 1600, "test": 1600}
    assert split_sizes(1001, {"train": .8, "val": .1, "test": .1}) == {"train": 801, "val": 100, "test": 100}
    assert split_sizes(10, {"train": 6, "val": 2, "test": 2}) == {"train": 6, "val": 2, "test": 2}
    with pytest.raises(ConfigError):
        split_sizes(10, {"train": .5, "val": .1})
    with pytest.raises(ConfigError):
        split_sizes(10, {"train": .8, "dev": .2})


def test_plan_covers_every_sample_once():
    plan = make_plan({"train": 10, "val": 3, "test": 0}, 4)
    assert [(s.split, s.start, s.stop) for s in plan] == [("train", 0, 4), ("train", 4, 8), ("train", 8, 10),
                                                          ("val", 0, 3)]
    spec = get_task("shift").spec(ShiftConfig(L=4096))
    assert auto_samples_per_shard(spec, 12800) == 128  # >= 64 training shards at the paper size


def test_generate_writes_the_documented_layout(tmp_path):
    result = generate_dataset("shift", ShiftConfig(L=64), out=tmp_path, n=20, samples_per_shard=8)
    root = tmp_path / "shift-64"
    assert result.path == root and result.finalized
    m = load_manifest(root)
    assert m.task == "shift" and m.seeding == {"root_seed": 0, "scheme": "splitmix64-v1"}
    assert {k: v.num_samples for k, v in m.splits.items()} == {"train": 16, "val": 2, "test": 2}
    assert (root / "README.md").read_text().startswith("---\npretty_name: ssmbench shift-64")
    assert json.loads((root / "croissant.json").read_text())["name"] == "shift-64"
    shard = m.splits["train"].shards[1]
    with h5py.File(root / shard.path, "r") as h5:
        assert h5["inputs"].shape == (8, 64, 3) and h5["inputs"].dtype == np.float32
        assert h5["inputs"].chunks == (1, 64, 3) and h5["inputs"].compression == "gzip" and h5["inputs"].fletcher32
        assert h5["sample_id"][...].tolist() == list(range(8, 16)) and h5["sample_id"].chunks == (8,)
        assert h5.attrs["task"] == "shift" and h5.attrs["sample_start"] == 8
        assert json.loads(h5.attrs["config_json"]) == {"L": 64, "num_shifts": 8}
        stored = h5["inputs"][3]
    task = get_task("shift")
    fresh = task.generate(ShiftConfig(L=64), keys_for("shift", "1", {"L": 64, "num_shifts": 8}, 0, "train", 11, 12))
    assert np.array_equal(stored, fresh["inputs"][0])  # streamed and stored samples are byte-identical
    assert verify_dataset(root).ok and verify_dataset(root, deep=True).ok


def test_same_content_for_any_workers_and_shard_size(tmp_path):
    a = generate_dataset("cumsum", get_task("cumsum").Config(L=32), out=tmp_path / "a", n=40, samples_per_shard=16)
    b = generate_dataset("cumsum", get_task("cumsum").Config(L=32), out=tmp_path / "b", n=40, samples_per_shard=4,
                         workers=2)
    assert a.manifest["content_digest"] == b.manifest["content_digest"]
    assert len(b.manifest["splits"]["train"]["shards"]) == 8


def test_fixed_variant_stores_its_object(tmp_path):
    config = SelectFixedConfig(L=40, M=4)
    result = generate_dataset("select_fixed", config, out=tmp_path, n=10, samples_per_shard=4)
    fixed = np.load(result.path / "fixed.npy")
    assert np.array_equal(fixed, get_task("select_fixed").fixed_arrays(config)["positions"])
    for split in ("train", "test"):
        with h5py.File(result.path / result.manifest["splits"][split]["shards"][0]["path"]) as h5:
            assert np.array_equal(h5["fixed/positions"][...], fixed)


def test_job_array_then_finalize_equals_one_run(tmp_path):
    config = ShiftConfig(L=32, num_shifts=2)
    for i in range(3):
        r = generate_dataset("shift", config, out=tmp_path / "jobs", n=30, samples_per_shard=4, shard_index=i,
                             num_shards=3)
        assert not r.finalized and not (r.path / "manifest.json").exists()
    final = generate_dataset("shift", config, out=tmp_path / "jobs", n=30, samples_per_shard=4)
    assert final.shards_written == 0 and final.finalized
    single = generate_dataset("shift", config, out=tmp_path / "one", n=30, samples_per_shard=4)
    assert final.manifest["content_digest"] == single.manifest["content_digest"]


def test_rerun_resumes_and_repairs(tmp_path):
    config = ShiftConfig(L=32, num_shifts=2)
    first = generate_dataset("shift", config, out=tmp_path / "one", n=24, samples_per_shard=4)
    for i in range(2):  # every shard written, not finalized: the build state in .build/ stays
        part = generate_dataset("shift", config, out=tmp_path, n=24, samples_per_shard=4, shard_index=i,
                                num_shards=2)
    root = part.path
    shard = root / first.manifest["splits"]["train"]["shards"][2]["path"]
    (root / ".build" / "train" / (shard.stem + ".json")).unlink()  # died between rename and sidecar
    (shard.parent / (shard.name + ".tmp.deadbeef")).write_bytes(b"partial")  # killed mid-write
    again = generate_dataset("shift", config, out=tmp_path, n=24, samples_per_shard=4)
    assert again.shards_written == 1 and again.shards_skipped == len(first.manifest["splits"]["train"]["shards"]) + 1
    assert not list(root.rglob("*.tmp.*")) and not (root / ".build").exists()
    assert again.manifest["content_digest"] == first.manifest["content_digest"]


def test_refuses_to_mix_builds(tmp_path):
    generate_dataset("shift", ShiftConfig(L=32), out=tmp_path, n=10)
    with pytest.raises(DatasetError, match="different build"):
        generate_dataset("shift", ShiftConfig(L=32), out=tmp_path, n=10, seed=1)
    generate_dataset("shift", ShiftConfig(L=32), out=tmp_path, n=10, seed=1, overwrite=True)
    (tmp_path / "cumsum-32").mkdir()
    (tmp_path / "cumsum-32" / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="not an ssmbench dataset"):
        generate_dataset("cumsum", get_task("cumsum").Config(L=32), out=tmp_path, n=10)


def test_verify_detects_corruption_truncation_and_strays(tmp_path):
    result = generate_dataset("cummax", get_task("cummax").Config(L=64), out=tmp_path, n=12, samples_per_shard=4)
    root, shards = result.path, result.manifest["splits"]["train"]["shards"]
    target = root / shards[0]["path"]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    report = verify_dataset(root)
    assert not report.ok and "sha256 mismatch" in report.problems[0]
    truncated = root / shards[1]["path"]
    truncated.write_bytes(truncated.read_bytes()[:1000])
    (root / "train" / "shard-00099-of-00099.h5").write_bytes(b"")
    problems = " ".join(verify_dataset(root).problems)
    assert "truncated" in problems and "not listed" in problems


@pytest.mark.parametrize("workers", [1, 2])
def test_deep_verify_catches_a_consistent_but_wrong_target(tmp_path, workers):
    """A shard rewritten with a wrong target and a matching sha256 still fails the content check and oracle, in
    this process or in a pool of decoders; the pool's report equals the serial one, problem for problem."""
    from ssmbench.data.make.shards import file_sha256

    result = generate_dataset("cumsum", get_task("cumsum").Config(L=16), out=tmp_path, n=10, samples_per_shard=8)
    root = result.path
    entry = result.manifest["splits"]["train"]["shards"][0]
    with h5py.File(root / entry["path"], "r+") as h5:
        h5["targets"][0, 3, 0] += 1.0
    entry["sha256"], entry["num_bytes"] = file_sha256(root / entry["path"]), (root / entry["path"]).stat().st_size
    (root / "manifest.json").write_text(json.dumps(result.manifest))
    assert verify_dataset(root).ok  # checksums match the doctored manifest
    report = verify_dataset(root, deep=True, workers=workers)
    problems = " ".join(report.problems)
    assert "content of targets differs" in problems and "oracle" in problems
    assert report.to_json() == verify_dataset(root, deep=True).to_json()
    entry_2 = result.manifest["splits"]["val"]["shards"][0]  # a second damaged shard, later in manifest order
    with h5py.File(root / entry_2["path"], "r+") as h5:
        h5["targets"][0, 0, 0] += 1.0
    entry_2["sha256"], entry_2["num_bytes"] = file_sha256(root / entry_2["path"]), (root / entry_2["path"]).stat().st_size
    (root / "manifest.json").write_text(json.dumps(result.manifest))
    pooled, serial = verify_dataset(root, deep=True, workers=workers), verify_dataset(root, deep=True)
    assert pooled.problems == serial.problems and pooled.problems[0].startswith(entry["path"])
    assert pooled.checked_samples == serial.checked_samples == 10


def test_streamed_batches_equal_stored_samples(tmp_path):
    from ssmbench.data.read.streaming import TaskStream

    result = generate_dataset("sort", get_task("sort").Config(L=16), out=tmp_path, n=40, samples_per_shard=8)
    stream = TaskStream("sort", {"L": 16}, seed=0)
    with h5py.File(result.path / result.manifest["splits"]["train"]["shards"][1]["path"]) as h5:
        stored = h5["inputs"][...]  # train samples 8..15
    batch = stream.train_batch(step=2, batch_size=4)  # indices 8..11
    assert np.array_equal(batch["inputs"], stored[:4])
    halves = [stream.train_batch(step=3, batch_size=4, rank=r, world_size=2)["sample_id"].tolist() for r in (0, 1)]
    assert halves == [[12, 13], [14, 15]]
    with h5py.File(result.path / result.manifest["splits"]["test"]["shards"][0]["path"]) as h5:
        assert np.array_equal(stream.samples("test", 0, 4)["targets"], h5["targets"][:4])


def test_process_pool_runs_more_shards_than_any_per_worker_limit(tmp_path):
    """Regression: max_tasks_per_child deadlocked the pool after workers * 64 shards on Python 3.11."""
    result = generate_dataset("cumsum", get_task("cumsum").Config(L=8), out=tmp_path, n=200, samples_per_shard=1,
                              workers=2)
    assert result.shards_written == 200 and result.finalized
