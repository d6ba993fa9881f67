"""`ssmbench download` against a real loopback HTTP server with Range support (tests/data/conftest.py).

Covers: a full download that verifies; a transfer cut mid-file and resumed with a Range request in the same run; a
server that dies mid-file (exit 1, the partial data kept only as .part, the folder not looking like a dataset) and a
second run that resumes from the kept bytes; a corrupted file rejected and not kept (exit 3); a missing file reported
(exit 1); a catalogue whose pinned manifest hash disagrees (exit 3, nothing written); --split fetching only that
split, which then verifies as partial; dry runs; re-runs doing only the missing work; unreachable hosts.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path

import pytest

from ssmbench.cli import main
from ssmbench.data.hub.catalog import find_entry, load_catalog
from ssmbench.data.hub.download import download_dataset, hf_to_https
from ssmbench.data.hub.get import resolve_dataset
from ssmbench.data.hub.verify import verify_dataset
from ssmbench.errors import DatasetError

NAME = "shift-64"


def cli(*args: str, capsys=None) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr() if capsys else ("", "")
    return exc.value.code, out, err


def shard_paths(manifest: dict, split: str | None = None) -> list[str]:
    return [s["path"] for sp, info in manifest["splits"].items() if split in (None, sp) for s in info["shards"]]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_of(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_full_download_matches_the_source_byte_for_byte(host, tiny_shift, tmp_path, capsys):
    code, out, _ = cli("download", host.url(f"ssm/{NAME}/"), "--to", str(tmp_path / "data"), "--json", "-q",
                       "--workers", "3", capsys=capsys)
    assert code == 0
    info = json.loads(out)
    folder = tmp_path / "data" / NAME
    assert info["path"] == str(folder) and info["absent"] == []
    manifest = manifest_of(tiny_shift)
    wanted = shard_paths(manifest) + ["manifest.json", "README.md", "croissant.json"]
    assert info["fetched_files"] == len(wanted) - 1  # every file but the manifest, which is fetched first
    for rel in wanted:
        assert sha(folder / rel) == sha(tiny_shift / rel), rel
    assert not list(folder.rglob("*.part")) and not (folder / ".build").exists()
    assert verify_dataset(folder, deep=True).ok  # a downloaded folder gets the full treatment, regeneration too
    assert all(status == 200 for _, _, status in host.log)

    # re-running does nothing but fetch (and compare) the manifest
    host.log.clear()
    code, out, _ = cli("download", host.url(f"ssm/{NAME}/manifest.json"), "--to", str(tmp_path / "data"),
                       "--json", "-q", capsys=capsys)
    assert code == 0 and json.loads(out)["fetched_files"] == 0
    assert [p for p, _, _ in host.log] == [f"ssm/{NAME}/manifest.json"]


def test_transfer_cut_mid_file_resumes_with_a_range_request(host, tiny_shift, tmp_path):
    target = shard_paths(manifest_of(tiny_shift), "train")[1]
    size = (tiny_shift / target).stat().st_size
    host.cut[f"ssm/{NAME}/{target}"] = size // 3  # the connection drops after a third of the file
    result = download_dataset(host.url(f"ssm/{NAME}/"), to=tmp_path, backoff=0.0, workers=2)
    assert sha(result.path / target) == sha(tiny_shift / target)
    requests = host.requests_for(f"ssm/{NAME}/{target}")
    assert requests == [(f"ssm/{NAME}/{target}", None, 200), (f"ssm/{NAME}/{target}", size // 3, 206)]
    assert host.bytes_sent[f"ssm/{NAME}/{target}"] == size  # nothing was sent twice


def test_server_dying_mid_file_leaves_a_part_file_and_a_rerun_resumes(host, make_server, tiny_shift, tmp_path,
                                                                     capsys):
    target = shard_paths(manifest_of(tiny_shift), "train")[0]
    size = (tiny_shift / target).stat().st_size
    host.cut[f"ssm/{NAME}/{target}"] = size // 2
    host.die_on_cut = True
    code, _, err = cli("download", host.url(f"ssm/{NAME}/"), "--to", str(tmp_path), "--workers", "1",
                       "--retries", "1", "-q", capsys=capsys)
    assert code == 1 and "could not be downloaded" in err and "Traceback" not in err
    folder = tmp_path / NAME
    part = folder / (target + ".part")
    assert part.stat().st_size == size // 2  # what arrived is kept, under a name nobody mistakes for a shard
    assert not (folder / target).exists()
    assert not (folder / "manifest.json").exists()  # the folder does not look like a dataset
    with pytest.raises(DatasetError):
        verify_dataset(folder)

    # the host comes back (on another port): the second run asks only for the missing tail
    again = make_server(host.root)
    result = download_dataset(again.url(f"ssm/{NAME}/"), to=tmp_path, backoff=0.0)
    assert again.requests_for(f"ssm/{NAME}/{target}") == [(f"ssm/{NAME}/{target}", size // 2, 206)]
    assert again.bytes_sent[f"ssm/{NAME}/{target}"] == size - size // 2
    assert sha(folder / target) == sha(tiny_shift / target) and not part.exists()
    assert verify_dataset(result.path).ok


def test_corrupted_file_is_rejected_and_not_kept(host, tiny_shift, tmp_path, capsys):
    target = shard_paths(manifest_of(tiny_shift), "val")[0]
    good = (tiny_shift / target).read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF  # one bit pattern changed, same length
    host.replace[f"ssm/{NAME}/{target}"] = bytes(flipped)
    code, _, err = cli("download", host.url(f"ssm/{NAME}/"), "--to", str(tmp_path), "-q", capsys=capsys)
    assert code == 3 and "sha256" in err and target in err
    folder = tmp_path / NAME
    assert not (folder / target).exists() and not (folder / (target + ".part")).exists()
    assert not (folder / "manifest.json").exists()
    others = [p for p in shard_paths(manifest_of(tiny_shift)) if p != target]
    assert all(sha(folder / p) == sha(tiny_shift / p) for p in others)  # the good files are kept

    # the host is fixed: a re-run fetches only the one file
    del host.replace[f"ssm/{NAME}/{target}"]
    host.log.clear()
    download_dataset(host.url(f"ssm/{NAME}/"), to=tmp_path)
    assert sorted({p for p, _, _ in host.log if p.endswith(".h5")}) == [f"ssm/{NAME}/{target}"]


def test_missing_file_is_reported(host, tiny_shift, tmp_path, capsys):
    target = shard_paths(manifest_of(tiny_shift), "test")[0]
    host.missing.add(f"ssm/{NAME}/{target}")
    code, _, err = cli("download", host.url(f"ssm/{NAME}/"), "--to", str(tmp_path), "-q", capsys=capsys)
    assert code == 1 and target in err and "missing at the source" in err and "HTTP 404" in err
    assert not (tmp_path / NAME / "manifest.json").exists()


def catalogue(tmp_path: Path, host, manifest_sha256: str, sources: list[str] | None = None) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"format": 1, "datasets": {NAME: {
        "sources": sources or [host.url(f"ssm/{NAME}/")], "manifest_sha256": manifest_sha256,
        "num_bytes": 12345, "task": "shift", "task_version": "1"}}}))
    return path


def test_catalogue_hash_mismatch_is_refused(host, tiny_shift, tmp_path, capsys):
    cat = catalogue(tmp_path, host, "0" * 64)
    code, _, err = cli("download", NAME, "--catalog", str(cat), "--to", str(tmp_path / "data"), capsys=capsys)
    assert code == 3 and "does not match the catalogue" in err and "nothing was downloaded" in err
    assert not (tmp_path / "data" / NAME).exists()
    assert [p for p, _, _ in host.log] == [f"ssm/{NAME}/manifest.json"]


def test_catalogue_name_download_tries_sources_in_order_and_lists(host, tiny_shift, tmp_path, capsys, monkeypatch):
    with socket.socket() as s:  # a port nobody listens on: the first source is unreachable
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/ssm/{NAME}/"
    cat = catalogue(tmp_path, host, sha(tiny_shift / "manifest.json"), [dead, host.url(f"ssm/{NAME}")])
    monkeypatch.setenv("SSMBENCH_CATALOG", str(cat))
    code, out, _ = cli("ls", "datasets", capsys=capsys)
    assert code == 0 and NAME in out and "12.1 KiB" in out and "shift v1" in out and "127.0.0.1" in out
    result = download_dataset(find_entry(NAME), to=tmp_path / "data", retries=0)
    assert result.source == host.url(f"ssm/{NAME}/")
    assert verify_dataset(result.path).ok


def test_split_fetches_only_that_split_and_verifies_as_partial(host, tiny_shift, tmp_path, capsys):
    code, out, _ = cli("download", host.url(f"ssm/{NAME}/"), "--to", str(tmp_path), "--split", "test", "-q",
                       "--json", capsys=capsys)
    assert code == 0
    fetched = {p for p, _, _ in host.log if p.endswith(".h5")}
    manifest = manifest_of(tiny_shift)
    assert fetched == {f"ssm/{NAME}/{p}" for p in shard_paths(manifest, "test")}
    absent = shard_paths(manifest, "train") + shard_paths(manifest, "val")
    assert json.loads(out)["absent"] == absent
    folder = tmp_path / NAME
    code, out, _ = cli("verify", str(folder), "--deep", capsys=capsys)
    assert code == 0 and out.startswith("OK") and "ABSENT 5 shard(s)" in out and "train, val" in out
    report = verify_dataset(folder, deep=True, regenerate=4)
    assert report.ok and report.checked_samples == 4 and report.regenerated == 4 and report.absent == absent

    # a shard that was downloaded and then lost is still an error
    (folder / shard_paths(manifest, "test")[0]).unlink()
    assert "missing" in verify_dataset(folder).problems[0]

    # completing the folder later fetches the rest and clears the record of what was left out
    download_dataset(host.url(f"ssm/{NAME}/"), to=tmp_path)
    report = verify_dataset(folder, deep=True, regenerate=0)
    assert report.ok and not report.absent and report.checked_samples == 40


def test_include_glob_and_dry_run(host, tiny_shift, tmp_path, capsys):
    manifest = manifest_of(tiny_shift)
    first_two = shard_paths(manifest, "train")[:2]
    code, out, _ = cli("download", host.url(f"ssm/{NAME}/"), "--to", str(tmp_path), "--dry-run", "--json",
                       "--include", "train/shard-0000[01]-*", capsys=capsys)
    assert code == 0
    info = json.loads(out)
    assert [p for p in info["to_fetch"] if p.endswith(".h5")] == first_two
    expected = sum(s["num_bytes"] for s in manifest["splits"]["train"]["shards"][:2])
    assert info["bytes_to_fetch"] == expected and info["dry_run"]
    assert not (tmp_path / NAME).exists()
    code, _, err = cli("download", host.url(f"ssm/{NAME}/"), "--to", str(tmp_path), "--include", "nope/*",
                       capsys=capsys)
    assert code == 2 and "selects no shard" in err


def test_unreachable_host_and_bad_sources(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = cli("download", f"http://127.0.0.1:{port}/x/{NAME}/", "--to", str(tmp_path), "--retries", "0",
                       capsys=capsys)
    assert code == 1 and "connection refused" in err and "Traceback" not in err
    code, _, err = cli("download", "no-such-dataset", "--to", str(tmp_path), capsys=capsys)
    assert code == 2 and "no dataset named 'no-such-dataset'" in err
    code, _, err = cli("download", "doi:10.5281/zenodo.1", "--to", str(tmp_path), capsys=capsys)
    assert code == 2 and "not supported" in err
    assert not any(tmp_path.iterdir())


def test_folder_holding_another_build_is_refused(host, tiny_shift, tmp_path):
    folder = tmp_path / NAME
    folder.mkdir()
    other = manifest_of(tiny_shift) | {"created_utc": "1999-01-01T00:00:00Z"}
    (folder / "manifest.json").write_text(json.dumps(other))
    with pytest.raises(DatasetError, match="different build"):
        download_dataset(host.url(f"ssm/{NAME}/"), to=tmp_path)


def test_hf_sources_map_to_hub_file_urls(monkeypatch):
    assert hf_to_https("hf://datasets/org/suite@0a1b/shift-64/") == \
        "https://huggingface.co/datasets/org/suite/resolve/0a1b/shift-64/"
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9/")
    assert hf_to_https("hf://datasets/org/suite") == "http://127.0.0.1:9/datasets/org/suite/resolve/main/"


def test_resolve_dataset_by_path_name_and_catalogue(host, tiny_shift, tmp_path, monkeypatch):
    assert resolve_dataset(tiny_shift) == tiny_shift
    with pytest.raises(DatasetError, match="manifest.json not found"):
        resolve_dataset(tmp_path / "nothing")
    monkeypatch.delenv("SSMBENCH_CATALOG", raising=False)
    with pytest.raises(DatasetError, match=f"no dataset named '{NAME}' in {tmp_path} nor in the catalogues"):
        resolve_dataset(NAME, data_root=tmp_path)
    cat = catalogue(tmp_path, host, sha(tiny_shift / "manifest.json"))
    with pytest.raises(DatasetError, match="is not in") as exc:
        resolve_dataset(NAME, catalog=cat, data_root=tmp_path, download=False)
    assert exc.value.hint == f"fetch it with: ssmbench download {NAME} --to {tmp_path}"
    path = resolve_dataset(NAME, catalog=cat, data_root=tmp_path)  # downloads into the data root
    assert path == tmp_path / NAME and verify_dataset(path).ok
    host.log.clear()
    assert resolve_dataset(NAME, catalog=cat, data_root=tmp_path) == path and host.log == []  # no network now


def test_catalogue_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": 1, "datasets": {"x": {"sources": [], "manifest_sha256": "zz"}}}))
    with pytest.raises(Exception, match="needs `sources`"):
        load_catalog(bad, env=False)
    builtin = load_catalog(None, env=False)  # entries written by ssmbench/data/hub/catalog_build.py from real builds
    assert "shift-4096-ci" in builtin
    for name in builtin:
        e = builtin[name]
        assert e.build["argv"][0] == "generate" and e.shards and e.content_digest and e.num_samples, name
        assert not e.sources, f"{name}: nothing is hosted yet, so no entry names a mirror"



def test_hf_source_downloads_through_a_mocked_hub_endpoint(tiny_shift, make_server, tmp_path, monkeypatch):
    served = tmp_path / "hub"
    shutil.copytree(tiny_shift, served / "datasets/org/suite/resolve/0a1b2c/shift-64",
                    ignore=shutil.ignore_patterns(".build"))
    hub = make_server(served)
    monkeypatch.setenv("HF_ENDPOINT", hub.url())
    result = download_dataset("hf://datasets/org/suite@0a1b2c/shift-64", to=tmp_path / "data", splits=["val"])
    assert result.path == tmp_path / "data" / NAME and verify_dataset(result.path).ok
    assert {p for p, _, _ in hub.log if p.endswith(".h5")} == {
        f"datasets/org/suite/resolve/0a1b2c/shift-64/{p}" for p in shard_paths(manifest_of(tiny_shift), "val")}


def test_a_second_concurrent_download_into_the_same_folder_is_refused(host, tmp_path):
    from filelock import FileLock

    with FileLock(str(tmp_path / f".{NAME}.download.lock")):  # as another process's download would hold it
        with pytest.raises(DatasetError, match="another download"):
            download_dataset(host.url(f"ssm/{NAME}/"), to=tmp_path)
    assert not (tmp_path / NAME / "manifest.json").exists()


def test_open_dataset_by_catalogue_name_downloads_into_the_data_root(host, tiny_shift, tmp_path, monkeypatch):
    import ssmbench

    cat = catalogue(tmp_path, host, sha(tiny_shift / "manifest.json"))
    monkeypatch.setenv("SSMBENCH_CATALOG", str(cat))
    monkeypatch.setenv("SSMBENCH_DATA", str(tmp_path / "data"))
    test = ssmbench.open_dataset(NAME, split="test")
    assert len(test) == 4 and (tmp_path / "data" / NAME / "manifest.json").exists()
    host.log.clear()
    assert len(ssmbench.open_dataset(NAME, split="test")) == 4 and host.log == []  # found locally the second time
    assert len(ssmbench.open_dataset(NAME, split="val")) == 4  # only the test split came first: val now
    assert {p for p, _, _ in host.log if p.endswith(".h5")} == {f"ssm/{NAME}/val/shard-00000-of-00001.h5"}
