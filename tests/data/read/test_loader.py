"""`open_dataset` / `FolderDataset` and the samplers, against tiny builds read back with plain h5py.

The oracle reads every shard of a split with h5py in the manifest's order and applies the documented transforms
independently: pixels flattened row-major to (T, 1) and scaled as the backbone scales them (`a * x.float() + b`
in torch), masks flattened to (T,), integer fields widened to int64, float fields kept.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from ssmbench import DatasetError, open_dataset
from ssmbench.data.read.loader import EvalShardSampler, ShardAwareSampler
from support import REPO


def _raw(folder: Path, split: str) -> dict[str, np.ndarray]:
    """Every stored field of a split, concatenated over its shards in the manifest's order (plain h5py)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    parts: dict[str, list[np.ndarray]] = {}
    for shard in manifest["splits"][split]["shards"]:
        with h5py.File(folder / shard["path"], "r") as f:
            for name, dset in f.items():
                if isinstance(dset, h5py.Dataset):
                    parts.setdefault(name, []).append(dset[()])
    return {k: np.concatenate(v) for k, v in parts.items()}


def _collect(ds, workers: int, sampler=None, batch_size: int = 5) -> dict[str, torch.Tensor]:
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, num_workers=workers, sampler=sampler)
    batches = list(loader)
    return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}


@pytest.mark.parametrize("workers", [0, 2])
def test_pathfinder_items_are_the_stored_arrays_after_the_documented_transform(pathfinder, workers):
    raw = _raw(pathfinder, "train")
    ds = open_dataset(pathfinder, "train", fields=("label",))
    got = _collect(ds, workers, sampler=ShardAwareSampler(ds, seed=3, rank=0, world_size=1))
    order = got["sample_index"].numpy()
    assert sorted(order.tolist()) == list(range(25)) and order.tolist() != list(range(25))
    image = torch.from_numpy(raw["inputs"][order])  # (B, 32, 32) uint8
    a, b = 1 / 127.5, -1.0  # the Spec's input_scale
    assert got["inputs"].shape == (25, 1024, 1) and got["inputs"].dtype == torch.float32
    assert torch.equal(got["inputs"], a * image.reshape(25, 1024, 1).float() + b)
    assert torch.allclose(got["inputs"].double(), image.reshape(25, 1024, 1).double() / 127.5 - 1, atol=2e-7)
    assert got["inputs"].min() == -1.0 and got["inputs"].max() == 1.0  # black background, 255 strokes
    assert got["targets"].dtype == torch.int64
    assert torch.equal(got["targets"], torch.from_numpy(raw["targets"][order].reshape(25, 1024)).long())
    assert set(got["targets"].unique().tolist()) <= {0, 1, 2}
    assert torch.equal(got["label"], torch.from_numpy(raw["label"][order]).long())
    assert torch.equal(got["sample_index"], torch.from_numpy(raw["sample_id"][order]))
    assert ds.spec.input_scale is None and ds.stored_spec.input_scale == pytest.approx((a, b))


@pytest.mark.parametrize("workers", [0, 2])
def test_listops_items_keep_the_ignore_index_and_extra_fields(listops, workers):
    raw = _raw(listops, "train")
    ds = open_dataset(listops, "train", fields=("node_height", "node_op"), expect_task="listops_subtrees")
    got = _collect(ds, workers)
    t = raw["inputs"].shape[1]
    assert got["inputs"].dtype == torch.int64 and got["inputs"].shape == (16, t)
    assert torch.equal(got["inputs"], torch.from_numpy(raw["inputs"].astype(np.int64)))
    assert torch.equal(got["targets"], torch.from_numpy(raw["targets"].astype(np.int64)))
    assert (got["targets"] == -100).sum() == int((raw["targets"] == -100).sum()) > 0
    for name in ("node_height", "node_op"):
        assert got[name].dtype == torch.int64
        assert torch.equal(got[name], torch.from_numpy(raw[name].astype(np.int64)))
    assert got["sample_index"].tolist() == list(range(16))


@pytest.mark.parametrize("workers", [0, 2])
def test_atomic_items_are_the_stored_floats(tiny_shift, workers):
    raw = _raw(tiny_shift, "train")
    ds = open_dataset(tiny_shift, "train")
    got = _collect(ds, workers, batch_size=7)
    assert got["inputs"].dtype == torch.float32 and got["targets"].dtype == torch.float32
    assert torch.equal(got["inputs"], torch.from_numpy(raw["inputs"]))
    assert torch.equal(got["targets"], torch.from_numpy(raw["targets"]))
    assert ds.spec == ds.stored_spec  # nothing to scale


def test_compact_keeps_stored_dtypes_and_the_device_scaling_gives_the_model_tensors(pathfinder):
    model, compact = open_dataset(pathfinder, "val"), open_dataset(pathfinder, "val", transform="compact")
    m, c = model[3], compact[3]
    assert c["inputs"].dtype == torch.uint8 and c["inputs"].shape == m["inputs"].shape == (1024, 1)
    assert c["targets"].dtype == torch.uint8 and c["targets"].shape == (1024,)
    a, b = compact.spec.input_scale
    assert torch.equal(a * c["inputs"].float() + b, m["inputs"]) and torch.equal(c["targets"].long(), m["targets"])
    raw = open_dataset(pathfinder, "val", transform="numpy", fields=("tips",))[6]
    assert raw["inputs"].shape == (32, 32) and raw["tips"].dtype == np.int16 and int(raw["sample_index"]) == 6


def test_batched_fetch_equals_single_items_in_any_order(pathfinder):
    ds = open_dataset(pathfinder, "train")
    idx = [24, 3, 17, 3, -1, 8]
    many = ds.__getitems__(idx)
    for i, item in zip(idx, many, strict=True):
        one = ds[i]
        assert int(item["sample_index"]) == (i % 25)
        assert all(torch.equal(item[k], one[k]) for k in one)
    with pytest.raises(IndexError):
        ds[25]
    fast = next(iter(torch.utils.data.DataLoader(ds, batch_size=6, sampler=idx, collate_fn=ds.collate)))
    slow = next(iter(torch.utils.data.DataLoader(ds, batch_size=6, sampler=idx)))
    assert fast.keys() == slow.keys() and all(torch.equal(fast[k], slow[k]) for k in slow)
    assert fast["sample_index"].tolist() == [24, 3, 17, 3, 24, 8]


def test_an_item_takes_one_integer_index(tiny_shift):
    """ds[[1, 2, 3]] used to return item 1 alone; now a list is refused, integer scalars of any kind are items."""
    ds = open_dataset(tiny_shift, "train")
    with pytest.raises(TypeError, match="one integer index"):
        ds[[1, 2, 3]]
    assert int(ds[np.int64(2)]["sample_index"]) == int(ds[torch.tensor(2)]["sample_index"]) == 2
    assert [int(x["sample_index"]) for x in ds.__getitems__([3, 1])] == [3, 1]


def test_handles_are_per_process_and_dropped_when_pickled(pathfinder):
    ds = open_dataset(pathfinder, "train", max_open_files=2)
    first = ds[0]["inputs"]
    handle = ds._files[0][0]
    ds._pid = -1  # as a forked child sees it: the parent's handles must not be used
    assert torch.equal(ds[0]["inputs"], first) and ds._files[0][0] is not handle
    for i in (8, 16, 24):
        ds[i]
    assert len(ds._files) == 2  # LRU bound on open files
    copy = pickle.loads(pickle.dumps(ds))
    assert len(copy._files) == 0 and torch.equal(copy[0]["inputs"], first)


def test_eval_sampler_gives_every_sample_exactly_once_across_ranks(pathfinder):
    ds = open_dataset(pathfinder, "val")  # 7 samples: ranks get 3 and 4
    for world in (2, 3):
        seen = [_collect(ds, 0, sampler=EvalShardSampler(ds, rank=r, world_size=world), batch_size=2)
                ["sample_index"].tolist() for r in range(world)]
        assert sorted(sum(seen, [])) == list(range(7))
        assert all(s == list(range(s[0], s[0] + len(s))) for s in seen)  # contiguous slices, in order
    assert [len(EvalShardSampler(ds, rank=r, world_size=2)) for r in range(2)] == [3, 4]


def test_training_sampler_shares_are_disjoint_and_shard_local(pathfinder):
    ds = open_dataset(pathfinder, "train")  # 25 samples in shards [0, 8) [8, 16) [16, 24) [24, 25)
    shares = [ShardAwareSampler(ds, seed=5, epoch=1, rank=r, world_size=2).indices().tolist() for r in range(2)]
    assert len(shares[0]) == len(shares[1]) == 12 and not set(shares[0]) & set(shares[1])  # one sample dropped
    padded = [ShardAwareSampler(ds, seed=5, epoch=1, rank=r, world_size=2, drop_last=False).indices().tolist()
              for r in range(2)]
    assert len(padded[0]) == len(padded[1]) == 13 and set(padded[0]) | set(padded[1]) == set(range(25))
    sampler = ShardAwareSampler(ds, seed=5, window=2, rank=0, world_size=1)
    order = sampler.indices()
    shard = (np.searchsorted(ds.shard_starts, order, side="right") - 1).tolist()
    sizes, seen, current, windows = np.diff(ds.shard_starts), np.zeros(4, int), set(), []
    for i, s in enumerate(shard):  # cut the order where the shards seen so far are complete, two at a time
        current.add(s)
        seen[s] += 1
        if all(seen[t] == sizes[t] for t in current) and (len(current) == 2 or i == len(shard) - 1):
            windows.append(current)
            current = set()
    assert len(windows) == 2 and sorted(map(len, windows)) == [2, 2]  # two windows of two whole shards each
    mixed = [s for s in range(3) if max(np.flatnonzero(np.equal(shard, s))) - min(np.flatnonzero(np.equal(
        shard, s))) + 1 > sizes[s]]
    assert mixed  # shards of one window are shuffled together, not read one after the other
    sampler.set_epoch(1)
    assert sorted(sampler.indices().tolist()) == list(range(25)) and sampler.indices().tolist() != order.tolist()
    assert ShardAwareSampler(ds, seed=5, window=2, rank=0, world_size=1).indices().tolist() == order.tolist()


def _copy(folder: Path, dest: Path) -> Path:
    return Path(shutil.copytree(folder, dest / folder.name, ignore=shutil.ignore_patterns(".build")))


def test_refuses_other_task_config_version_and_broken_folders(tiny_shift, tmp_path):
    with pytest.raises(DatasetError, match="holds task 'shift', not 'pathfinder'"):
        open_dataset(tiny_shift, "train", expect_task="pathfinder")
    with pytest.raises(DatasetError, match="L = 64, not 128"):
        open_dataset(tiny_shift, "train", expect_config={"L": 128})
    with pytest.raises(DatasetError, match="no extra field 'node_op'"):
        open_dataset(tiny_shift, "train", fields=("node_op",))

    folder = _copy(tiny_shift, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "task_version": "999"}))
    with pytest.raises(DatasetError, match="made by shift version 999, the installed shift is version") as info:
        open_dataset(folder, "train")
    assert "ssmbench generate shift" in info.value.hint

    text = json.dumps(manifest)
    (folder / "manifest.json").write_text(text[: len(text) // 2])  # truncated
    with pytest.raises(DatasetError, match="not valid JSON"):
        open_dataset(folder, "train")
    (folder / "manifest.json").write_text(json.dumps({k: v for k, v in manifest.items() if k != "splits"}))
    with pytest.raises(DatasetError, match="incomplete"):
        open_dataset(folder, "train")

    (folder / "manifest.json").write_text(text)
    shard = folder / manifest["splits"]["train"]["shards"][1]["path"]
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(DatasetError, match="truncated or replaced") as info:
        open_dataset(folder, "train")
    assert info.value.exit_code == 3  # damaged data, as `ssmbench verify` says it (not 2, a usage error)
    open_dataset(folder, "val")  # other splits are still usable
    shard.unlink()
    with pytest.raises(DatasetError, match="is missing") as info:
        open_dataset(folder, "train")
    assert info.value.exit_code == 3
    with pytest.raises(DatasetError, match="no dataset at"):
        open_dataset(tmp_path / "nowhere", "train")


def test_a_shard_that_cannot_be_opened_says_why(tiny_shift, tmp_path):
    """Held open by another h5py handle with other locking flags: named as such, not as a damaged file. A shard of
    the right size whose header is garbage: not a readable HDF5 file, with the verify command."""
    folder = _copy(tiny_shift, tmp_path)
    ds = open_dataset(folder, "train")
    shard = sorted((folder / "train").glob("*.h5"))[0]
    with h5py.File(shard, "r"):  # default locking: the loader's locking=False open must refuse
        with pytest.raises(DatasetError, match="already holds it through another h5py handle") as info:
            ds[0]
    assert "damaged" not in str(info.value)
    ds.close()
    shard.write_bytes(b"\0" * shard.stat().st_size)
    with pytest.raises(DatasetError, match="not a readable HDF5 file; run `ssmbench verify"):
        open_dataset(folder, "train")[0]


def test_a_damaged_shard_is_exit_3_in_one_line_also_from_a_worker_and_check_files_finds_it_unread(pathfinder,
                                                                                                   tmp_path):
    """One bit flipped in the stored chunk of train row 2 (shard 0 of 8-sample shards). Reading the row fails
    fletcher32: a DamagedDataError (a DatasetError and a VerificationError, exit 3), also through a DataLoader
    worker, where `worker_errors_in_one_line` gives back the one line of the same type. `check_files` finds the
    damage by sha256 without decoding a row, names the shard and `ssmbench verify`, and passes the other shards."""
    from ssmbench.data.read.loader import DamagedDataError
    from ssmbench.errors import VerificationError
    from ssmbench.harness.feed.folder_feed import worker_errors_in_one_line

    folder = _copy(pathfinder, tmp_path)
    shard = folder / json.loads((folder / "manifest.json").read_text())["splits"]["train"]["shards"][0]["path"]
    with h5py.File(shard, "r") as f:
        offset = f["inputs"].id.get_chunk_info(2).byte_offset
    data = bytearray(shard.read_bytes())
    data[offset + 40] ^= 0x10
    shard.write_bytes(bytes(data))
    ds = open_dataset(folder, "train")
    assert ds.shards_of([2, 9, 24]).tolist() == [0, 1, 3] and ds.shards_of([3, 0]).tolist() == [0]
    ds.check_files([1, 2, 3])  # the undamaged shards pass
    with pytest.raises(DamagedDataError) as info:
        ds.check_files(ds.shards_of([5]))  # row 5 is intact, its shard is not
    assert info.value.exit_code == 3 and isinstance(info.value, VerificationError)
    assert f"shard train/{shard.name} is damaged" in info.value.message
    assert f"run `ssmbench verify {folder}`" in info.value.message and "\n" not in info.value.message
    ds[5]  # what check_files refuses is decoded without complaint: only the sha256 sees it
    with pytest.raises(DamagedDataError, match=f"cannot read .*{shard.name}.*the file is damaged") as info:
        ds[2]
    assert info.value.exit_code == 3
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=1)
    with pytest.raises(DamagedDataError) as info, worker_errors_in_one_line():
        list(loader)
    assert info.value.message.startswith("cannot read ") and "\n" not in info.value.message
    assert info.value.exit_code == 3


def test_import_ssmbench_stays_light_until_open_dataset_is_used():
    code = ("import sys, ssmbench; from ssmbench import open_dataset; "
            "print(sorted(m for m in ('torch', 'h5py', 'numba') if m in sys.modules), open_dataset.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONSAFEPATH": "1"}).stdout
    assert out.strip() == "[] ssmbench.data.hub.open"


def test_the_readme_loader_snippet_runs_as_written(pathfinder, tmp_path):
    """The README's "Loading a dataset folder in PyTorch" block, run unchanged in a fresh process (two DataLoader
    workers, three epochs, the eval sampler) with its `data/pathfinder-128` a tiny Pathfinder folder: every name it
    uses is defined (it used `rank` and `world_size` without defining them)."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Loading a dataset folder in PyTorch", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'open_dataset("data/pathfinder-128"' in code
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "pathfinder-128").symlink_to(pathfinder, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("SSMBENCH_DATA", "SSMBENCH_CATALOG")}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**env, "PYTHONSAFEPATH": "1"})
    assert done.returncode == 0, done.stderr


def test_check_folder_over_several_splits_checks_every_one(tiny_shift, tmp_path):
    """The harness checks train, val and test in one call: a truncated shard of the last split is refused too."""
    from ssmbench.data.folder.checks import DamagedDataError, check_folder
    from ssmbench.data.folder.manifest import load_manifest

    folder = tmp_path / "shift"
    shutil.copytree(tiny_shift, folder)
    manifest = load_manifest(folder)
    check_folder(folder, manifest, ("train", "val", "test"), expect_task="shift")  # intact: no error
    shard = folder / manifest.splits["test"].shards[-1].path
    shard.write_bytes(shard.read_bytes()[:-1])
    with pytest.raises(DamagedDataError, match="truncated or replaced"):
        check_folder(folder, manifest, ("train", "val", "test"), expect_task="shift")


@pytest.mark.parametrize("case", ["gap", "overlap", "short", "long"])
def test_check_folder_refuses_shards_that_are_not_contiguous_or_do_not_cover_the_split(tiny_shift, tmp_path, case):
    """Sample ranges come from the manifest: a gap or an overlap between shards, or shards covering fewer (or more)
    samples than the split has, would index the wrong rows; each is refused in one line naming the fix."""
    from ssmbench.data.folder.checks import check_folder
    from ssmbench.data.folder.manifest import load_manifest

    folder = _copy(tiny_shift, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    train = manifest["splits"]["train"]  # 32 samples in 4 shards of 8
    if case in ("gap", "overlap"):
        train["shards"][1]["sample_start"] = 9 if case == "gap" else 7
        expected = f"starts at sample {train['shards'][1]['sample_start']}, expected 8"
    else:
        train["num_samples"] = 40 if case == "short" else 24
        expected = f"the train shards cover 32 samples, the split has {train['num_samples']}"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match=expected) as info:
        check_folder(folder, load_manifest(folder), "train")
    assert info.value.hint == "re-download or regenerate the dataset"
    check_folder(folder, load_manifest(folder), ("val", "test"))  # the other splits are unaffected
