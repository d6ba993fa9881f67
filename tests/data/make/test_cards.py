"""Data cards the ecosystem accepts: the README's YAML front matter as a Hugging Face dataset card (and
`datasets.load_dataset(folder)` giving train/validation/test with the stored dtypes and shapes), and croissant.json
passing mlcroissant's validator with no error and no warning. Both libraries come from the `[validate]` extra; the
tests are skipped where it is not installed.

The oracles are independent of the card code: the expected columns, dtypes, shapes and values are read from the
shards with h5py, and the checksums recomputed with hashlib.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from ssmbench.data.make.generate import generate_dataset

datasets = pytest.importorskip("datasets", reason="needs the [validate] extra (pip install -e '.[validate]')")
mlc = pytest.importorskip("mlcroissant", reason="needs the [validate] extra (pip install -e '.[validate]')")

HF_SIZE_CATEGORIES = {"n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M", "100M<n<1B",
                      "1B<n<10B", "10B<n<100B", "100B<n<1T", "n>1T"}
HF_SPLIT = {"train": "train", "validation": "val", "test": "test"}


@pytest.fixture(scope="module")
def folders(tiny_shift, tmp_path_factory) -> dict[str, Path]:
    """shift (plain float arrays), select_fixed (a `fixed/` group in every shard), pathfinder (uint8 images,
    rank-3 per-sample arrays, a preview.png)."""
    from support import tiny_config

    out = tmp_path_factory.mktemp("cards")
    built = {"shift": tiny_shift}
    for task, n, per in (("select_fixed", 24, 8), ("pathfinder", 12, 4)):
        built[task] = generate_dataset(task, tiny_config(task), out=out, n=n, samples_per_shard=per, quiet=True).path
    return built


def front_matter(folder: Path) -> dict:
    import yaml
    from datasets.utils.metadata import _NoDuplicateSafeLoader, _split_yaml_from_readme

    head, _ = _split_yaml_from_readme((folder / "README.md").read_text())
    return yaml.load(head, Loader=_NoDuplicateSafeLoader)  # rejects duplicate keys, as the Hub does


def shard_columns(folder: Path) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """Per-sample datasets at the root of the first shard, read with h5py."""
    manifest = json.loads((folder / "manifest.json").read_text())
    with h5py.File(folder / manifest["splits"]["train"]["shards"][0]["path"], "r") as h5:
        return {k: (v.dtype, v.shape[1:]) for k, v in h5.items() if isinstance(v, h5py.Dataset)}


def arrow_dtype_shape(feature) -> tuple[str, tuple[int, ...]]:
    if isinstance(feature, datasets.Value):
        return feature.dtype, ()
    if isinstance(feature, datasets.List):
        inner, rest = arrow_dtype_shape(feature.feature)
        return inner, (feature.length, *rest)
    return feature.dtype, tuple(feature.shape)  # Array2D .. Array5D


@pytest.mark.parametrize("task", ["shift", "select_fixed", "pathfinder"])
def test_front_matter_is_a_valid_hugging_face_dataset_card(folders, task):
    from datasets.utils.metadata import DatasetInfosDict, MetadataConfigs, known_task_ids
    from huggingface_hub import DatasetCard, DatasetCardData

    folder = folders[task]
    meta = front_matter(folder)
    assert meta["license"] == "cc-by-4.0"
    assert set(meta["size_categories"]) <= HF_SIZE_CATEGORIES
    assert set(meta["task_categories"]) <= set(known_task_ids)
    card = DatasetCard.load(folder / "README.md")
    assert isinstance(card.data, DatasetCardData) and card.data.pretty_name == f"ssmbench {folder.name}"
    configs = MetadataConfigs.from_dataset_card_data(card.data)  # raises on malformed data_files
    assert list(configs) == [folder.name]
    infos = DatasetInfosDict.from_dataset_card_data(card.data)
    features = infos[folder.name].features
    stored = shard_columns(folder)
    assert set(features) == set(stored)  # every per-sample column, and no `fixed/` group
    manifest = json.loads((folder / "manifest.json").read_text())
    assert meta["ssmbench"]["manifest_sha256"] == hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()
    assert meta["ssmbench"]["dataset_id"] == manifest["dataset_id"]


@pytest.mark.parametrize("task", ["shift", "select_fixed", "pathfinder"])
def test_load_dataset_gives_the_splits_with_stored_dtypes_shapes_and_values(folders, task, tmp_path):
    folder = folders[task]
    manifest = json.loads((folder / "manifest.json").read_text())
    ds = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf"))
    assert set(ds) == {"train", "validation", "test"}
    for hf_name, split in HF_SPLIT.items():
        assert ds[hf_name].num_rows == manifest["splits"][split]["num_samples"]
    stored = shard_columns(folder)
    for name, (dtype, shape) in stored.items():  # as stored in Arrow (numpy formatting widens ints to int64)
        assert arrow_dtype_shape(ds["validation"].features[name]) == (dtype.name, shape), name
    val = ds["validation"].with_format("numpy")[:]  # every column as one array
    for name, (_, shape) in stored.items():
        assert val[name].shape == (manifest["splits"]["val"]["num_samples"], *shape), name
    # the last validation sample, read both ways
    last = manifest["splits"]["val"]["shards"][-1]
    with h5py.File(folder / last["path"], "r") as h5:
        for name in stored:
            assert np.array_equal(val[name][-1], h5[name][-1]), name
    assert val["sample_id"].tolist() == list(range(manifest["splits"]["val"]["num_samples"]))


@pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")  # rdflib, under mlcroissant
@pytest.mark.parametrize("task", ["shift", "select_fixed", "pathfinder"])
def test_croissant_passes_mlcroissant_with_no_error_or_warning(folders, task):
    folder = folders[task]
    dataset = mlc.Dataset(jsonld=str(folder / "croissant.json"))  # raises ValidationError on any error
    issues = dataset.metadata.ctx.issues
    assert not issues.errors and not issues.warnings, issues.report()
    doc = json.loads((folder / "croissant.json").read_text())
    manifest = json.loads((folder / "manifest.json").read_text())
    objects = {d["contentUrl"]: d for d in doc["distribution"] if d["@type"] == "cr:FileObject"}
    expected = {"manifest.json", "README.md", *(f["path"] for f in manifest["files"])}
    assert set(objects) == expected
    for rel, obj in objects.items():  # the chain of trust starts here: recomputed, not copied
        assert obj["sha256"] == hashlib.sha256((folder / rel).read_bytes()).hexdigest(), rel
        assert obj["contentSize"] == f"{(folder / rel).stat().st_size} B"
    sets = {d["@id"]: d for d in doc["distribution"] if d["@type"] == "cr:FileSet"}
    for split in ("train", "val", "test"):
        fileset = sets[f"{split}-shards"]
        assert fileset["encodingFormat"] == "application/x-hdf5"
        on_disk = sorted(p.relative_to(folder).as_posix() for p in folder.glob("*/*.h5")
                         if fnmatch.fnmatch(p.relative_to(folder).as_posix(), fileset["includes"]))
        assert on_disk == [s["path"] for s in manifest["splits"][split]["shards"]]
    assert {v["name"] for v in doc["variableMeasured"]} == set(shard_columns(folder))
    assert "recordSet" not in doc  # Croissant cannot address arrays inside HDF5; the card says how to read them
    assert "## Reading the data" in (folder / "README.md").read_text()

