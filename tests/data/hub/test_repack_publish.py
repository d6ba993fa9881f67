"""`ssmbench repack` (Zstd and back, to a copy or in place, resumable, same content) and `ssmbench publish`
(release folder with SHA256SUMS, collection card, upload commands). Oracles: arrays decoded with h5py and content
hashes recomputed here with hashlib, SHA256SUMS checked line by line as `sha256sum -c` would."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401  (reads the Zstd copies)
import numpy as np
import pytest

from ssmbench.cli import main
from ssmbench.data.hub import repack as repack_module
from ssmbench.data.hub.publish import publish, upload_release
from ssmbench.data.hub.repack import repack
from ssmbench.data.hub.verify import verify_dataset
from ssmbench.errors import ConfigError, DatasetError, VerificationError

ZSTD_FILTER = "32015"  # the registered HDF5 filter id of Zstandard


def manifest_of(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def content_sha256(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(f"{a.dtype.str}|{','.join(map(str, a.shape))}|".encode() + a.tobytes()).hexdigest()


def shards(manifest: dict) -> list[dict]:
    return [s for split in ("train", "val", "test") for s in manifest["splits"][split]["shards"]]


def assert_same_content(src: Path, dst: Path, filter_id: str | None) -> None:
    original = manifest_of(src)
    for shard in shards(original):
        with h5py.File(src / shard["path"], "r") as a, h5py.File(dst / shard["path"], "r") as b:
            for name, expected in shard["content_sha256"].items():
                assert content_sha256(b[name][...]) == expected, (shard["path"], name)
                assert np.array_equal(a[name][...], b[name][...])
                compressed = original["storage"]["fields"][name]["codec"] != "none"
                if filter_id and compressed:
                    assert filter_id in b[name]._filters, (name, b[name]._filters)
                if not compressed:
                    assert set(b[name]._filters) == {"fletcher32"}
                assert b[name].chunks == a[name].chunks and b[name].fletcher32
            assert list(a.attrs) == list(b.attrs)
            assert all(np.array_equal(a.attrs[k], b.attrs[k]) for k in a.attrs)


def test_repack_to_zstd_and_back_keeps_every_content_hash(tiny_shift, tmp_path, capsys):
    src = shutil.copytree(tiny_shift, tmp_path / "shift-64")
    with pytest.raises(SystemExit) as exc:
        main(["repack", str(src), "--codec", "zstd", "--json", "-q"])
    assert exc.value.code == 0
    info = json.loads(capsys.readouterr().out)
    zstd = Path(info["path"])
    assert zstd == tmp_path / "shift-64-zstd" and info["codec"] == "zstd:3" and info["shards"] == 6
    assert_same_content(src, zstd, ZSTD_FILTER)
    new = manifest_of(zstd)
    assert new["repacked_from"] == sha(src / "manifest.json")
    assert new["content_digest"] == manifest_of(src)["content_digest"]
    assert all(s["sha256"] == sha(zstd / s["path"]) for s in shards(new))  # the new file hashes
    assert all(s["sha256"] != o["sha256"] for s, o in zip(shards(new), shards(manifest_of(src)), strict=True))
    assert {f["codec"] for k, f in new["storage"]["fields"].items() if k != "sample_id"} == {"zstd:3"}
    assert "import hdf5plugin" in (zstd / "README.md").read_text()
    report = verify_dataset(zstd, deep=True, regenerate=3)
    assert report.ok and report.checked_samples == 40 and report.regenerated == 3

    back = repack(zstd, codec="gzip:4", out=tmp_path / "back")
    assert back.path == tmp_path / "back" / "shift-64"
    assert_same_content(src, back.path, "gzip")
    assert manifest_of(back.path)["repacked_from"] == sha(zstd / "manifest.json")
    assert verify_dataset(back.path, deep=True, regenerate=0).ok
    again = repack(zstd, codec="gzip:4", out=tmp_path / "back")  # done already: nothing rewritten
    assert again.bytes_before == 0 and again.shards == 6


def test_repack_in_place_and_resume_after_an_interruption(tiny_shift, tmp_path, monkeypatch):
    folder = shutil.copytree(tiny_shift, tmp_path / "shift-64", ignore=shutil.ignore_patterns(".build"))
    original = manifest_of(folder)
    original_sha = sha(folder / "manifest.json")
    calls: list[str] = []
    real = repack_module.repack_shard

    def dies_on_the_third(src, dst, codec, expected):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(dst.relative_to(folder).as_posix())
        real(src, dst, codec, expected)

    monkeypatch.setattr(repack_module, "repack_shard", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        repack(folder, codec="zstd:1", in_place=True)
    journal = json.loads((folder / ".repack.json").read_text())
    assert sorted(journal["done"]) == sorted(calls) and len(calls) == 2
    assert manifest_of(folder) == original  # the manifest is rewritten only at the end

    monkeypatch.setattr(repack_module, "repack_shard", lambda *a: (calls.append(a[1].name), real(*a)))
    result = repack(folder, codec="zstd:1", in_place=True)
    assert result.path == folder and len(calls) == 6  # the two done shards were not repacked again
    assert not (folder / ".repack.json").exists() and not list(folder.rglob("*.tmp.*"))
    new = manifest_of(folder)
    assert new["repacked_from"] == original_sha
    assert [s["content_sha256"] for s in shards(new)] == [s["content_sha256"] for s in shards(original)]
    assert verify_dataset(folder, deep=True, regenerate=0).ok


def test_repack_refuses_content_that_disagrees_with_the_manifest(tiny_shift, tmp_path):
    folder = shutil.copytree(tiny_shift, tmp_path / "shift-64", ignore=shutil.ignore_patterns(".build"))
    manifest = manifest_of(folder)
    victim = manifest["splits"]["val"]["shards"][0]
    victim["content_sha256"]["inputs"] = "0" * 64
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(VerificationError, match="inputs"):
        repack(folder, codec="zstd")
    assert not (tmp_path / "shift-64-zstd" / victim["path"]).exists()
    assert not (tmp_path / "shift-64-zstd" / "manifest.json").exists()
    with pytest.raises(ConfigError, match="zstd"):
        repack(folder, codec="lz4")
    with pytest.raises(ConfigError, match="level"):
        repack(folder, codec="gzip:12")


def test_repack_of_a_partial_download_keeps_what_is_absent_absent(tiny_shift, tmp_path):
    folder = shutil.copytree(tiny_shift, tmp_path / "shift-64", ignore=shutil.ignore_patterns(".build"))
    absent = [s["path"] for s in manifest_of(folder)["splits"]["train"]["shards"]]
    for rel in absent:
        (folder / rel).unlink()
    (folder / ".download.json").write_text(json.dumps({"absent": absent}))
    result = repack(folder, codec="zstd")
    assert result.shards == 2
    report = verify_dataset(result.path, deep=True, regenerate=2)
    assert report.ok and report.absent == absent and report.checked_samples == 8


def check_sums(folder: Path) -> list[str]:
    """`sha256sum -c SHA256SUMS`, in Python: every listed file exists and matches."""
    listed = []
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, rel = line.split("  ", 1)
        assert sha(folder / rel) == digest, rel
        listed.append(rel)
    return listed


def test_publish_writes_a_verified_release_folder(tiny_shift, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["publish", str(tiny_shift), "--to", str(tmp_path / "release"), "--repo-id", "me/ssm"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    release = tmp_path / "release"
    dest = release / tiny_shift.name
    assert f"hf upload me/ssm {release} . --repo-type dataset --commit-message 'ssmbench shift-64'" in out
    assert "HfApi().upload_folder(repo_id='me/ssm', repo_type='dataset'" in out
    listed = check_sums(dest)
    on_disk = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert sorted(listed) == [p for p in on_disk if p != "SHA256SUMS"]
    assert not (dest / ".build").exists() and not (dest / ".download.json").exists()
    assert sha(dest / "manifest.json") == sha(tiny_shift / "manifest.json")
    assert verify_dataset(dest).ok
    croissant = json.loads((dest / "croissant.json").read_text())
    assert croissant["url"] == "https://huggingface.co/datasets/me/ssm/tree/main/shift-64"
    card = (release / "README.md").read_text()
    assert "config_name: shift-64" in card and '"path": "shift-64/train/*.h5"' in card
    again = publish(tiny_shift, release)  # idempotent
    assert check_sums(again.path) == listed


@pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")  # rdflib, under mlcroissant
def test_published_cards_load_and_validate(tiny_shift, tmp_path):
    datasets = pytest.importorskip("datasets", reason="needs the [validate] extra")
    mlc = pytest.importorskip("mlcroissant", reason="needs the [validate] extra")
    result = publish(tiny_shift, tmp_path / "release", repo_id="me/ssm")
    ds = datasets.load_dataset(str(tmp_path / "release"), "shift-64", cache_dir=str(tmp_path / "hf"))
    assert {k: v.num_rows for k, v in ds.items()} == {"train": 32, "validation": 4, "test": 4}
    issues = mlc.Dataset(jsonld=str(result.path / "croissant.json")).metadata.ctx.issues
    assert not issues.errors and not issues.warnings


def test_publish_refuses_what_must_not_be_published(tiny_shift, tmp_path):
    zstd = repack(tiny_shift, codec="zstd", out=tmp_path / "z").path
    with pytest.raises(DatasetError, match="Zstd copy"):
        publish(zstd, tmp_path / "release")
    partial = shutil.copytree(tiny_shift, tmp_path / "p" / "shift-64")
    (partial / ".download.json").write_text(json.dumps({"absent": ["train/shard-00000-of-00004.h5"]}))
    with pytest.raises(DatasetError, match="only part"):
        publish(partial, tmp_path / "release")
    broken = shutil.copytree(tiny_shift, tmp_path / "b" / "shift-64")
    shard = broken / "val" / "shard-00000-of-00001.h5"
    shard.write_bytes(shard.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(VerificationError):
        publish(broken, tmp_path / "release")
    other = tmp_path / "release" / "shift-64"
    other.mkdir(parents=True)
    (other / "manifest.json").write_text("{}")
    with pytest.raises(DatasetError, match="another build"):
        publish(tiny_shift, tmp_path / "release")


def test_upload_uses_huggingface_hub_only_when_asked(tiny_shift, tmp_path, monkeypatch):
    hub = pytest.importorskip("huggingface_hub")
    release = publish(tiny_shift, tmp_path / "release").release_root
    monkeypatch.setattr(hub, "get_token", lambda: None)
    with pytest.raises(DatasetError, match="not logged in"):
        upload_release(release, "me/ssm")
    seen = {}

    class Commit:
        commit_url = "https://hub.example/commit/abc"

    monkeypatch.setattr(hub, "get_token", lambda: "hf_x")
    monkeypatch.setattr(hub.HfApi, "upload_folder", lambda self, **kw: seen.update(kw) or Commit())
    assert upload_release(release, "me/ssm") == Commit.commit_url
    assert seen["repo_id"] == "me/ssm" and seen["repo_type"] == "dataset" and seen["folder_path"] == str(release)
