"""The typed manifest (`ssmbench.data.folder.manifest`): every manifest.json a build writes loads into a `Manifest`
and dumps back to the very same bytes; the typed view says what the JSON says; odd hand-made manifests (keys
missing, null values, unknown keys) round-trip too, and an incomplete one is one line naming what it lacks."""

from __future__ import annotations

import json
import shutil

import pytest

from ssmbench import DatasetError
from ssmbench.data.folder.manifest import Manifest, ShardInfo, dump_manifest, load_manifest
from ssmbench.data.hub.repack import repack


@pytest.fixture(scope="module")
def built(tiny_shift, pathfinder, listops, tmp_path_factory):
    """Every kind of manifest a build makes: plain, with a preview file and fixed arrays, de-duplicated (with its
    `deduplication` block), and a repacked copy (`repacked_from`, `repack_codec`)."""
    copy = tmp_path_factory.mktemp("repacked")
    repacked = repack(tiny_shift, codec="gzip:1", out=copy).path
    return {"shift": tiny_shift, "pathfinder": pathfinder, "listops": listops, "repacked": repacked}


@pytest.mark.parametrize("kind", ["shift", "pathfinder", "listops", "repacked"])
def test_every_built_manifest_dumps_back_byte_for_byte(built, kind):
    folder = built[kind]
    on_disk = (folder / "manifest.json").read_bytes()
    manifest = load_manifest(folder)
    assert dump_manifest(manifest) == on_disk
    assert manifest.to_json() == json.loads(on_disk)


def test_the_typed_view_says_what_the_json_says(built):
    raw = json.loads((built["listops"] / "manifest.json").read_text())
    m = load_manifest(built["listops"])
    assert (m.task, m.version, m.name, m.dataset_id) == (raw["task"], str(raw["task_version"]), raw["name"],
                                                         raw["dataset_id"])
    assert "deduplication" in raw and m.extra["deduplication"] == raw["deduplication"]
    for split, info in raw["splits"].items():
        assert m.splits[split].num_samples == info["num_samples"]
        assert [s.path for s in m.shards(split)] == [s["path"] for s in info["shards"]]
        assert [(s.sample_start, s.sample_stop, s.num_bytes, s.sha256) for s in m.shards(split)] == \
            [(s["sample_start"], s["sample_stop"], s["num_bytes"], s["sha256"]) for s in info["shards"]]
    assert sum(s.num_samples for s in m.all_shards()) == sum(i["num_samples"] for i in raw["splits"].values())
    repacked = load_manifest(built["repacked"])
    assert repacked.extra["repack_codec"] == "gzip:1" and "repacked_from" in repacked.extra


def test_odd_hand_made_manifests_round_trip_exactly():
    odd = {"format": 1, "task": "shift", "task_version": 1, "config": {"L": 64}, "spec": {"fields": {}},
           "name": None, "unknown_block": {"a": [1, 2]}, "files": [],
           "splits": {"train": {"num_samples": None, "note": "x"}, "val": {"shards": [
               {"path": "val/a.h5", "sample_start": 0, "sample_stop": 2, "sha256": None, "extra_key": 3}]}}}
    m = Manifest.from_json(odd)
    assert m.to_json() == odd
    assert m.name is None and m.version == "1" and m.files == [] and m.shards("train") == ()
    assert m.splits["val"].shards[0] == ShardInfo("val/a.h5", 0, 2, extra={"sha256": None, "extra_key": 3})


@pytest.mark.parametrize("obj, says", [
    ([], "is not a JSON object"),
    ({"format": 1, "task": "shift"}, "incomplete (no 'task_version')"),
    ({"format": 1, "task": "s", "task_version": "1", "config": {}, "spec": {}, "splits": {"train": {"shards": [
        {"path": "train/a.h5", "sample_start": 0}]}}}, "has no 'sample_stop'"),
])
def test_an_incomplete_manifest_is_one_line_naming_what_it_lacks(obj, says):
    with pytest.raises(DatasetError, match=says.replace("(", r"\(").replace(")", r"\)")):
        Manifest.from_json(obj, "data/x/manifest.json")


def test_load_manifest_refuses_invalid_json_and_names_a_missing_folder(tiny_shift, tmp_path):
    folder = tmp_path / "shift-64"
    shutil.copytree(tiny_shift, folder)
    (folder / "manifest.json").write_text('{"format": 1,')
    with pytest.raises(DatasetError, match="is not valid JSON"):
        load_manifest(folder)
    with pytest.raises(DatasetError, match=r"does not exist; did you mean .*shift-64\?"):
        load_manifest(tmp_path / "shift-46")
