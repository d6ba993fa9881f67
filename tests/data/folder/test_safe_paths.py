"""Paths read from outside stay inside (issue 37): a hostile server's manifest, a hostile catalogue, a shard that is a
symlink out of its folder or a manifest naming `../x.h5` are refused in one line, and nothing is written outside.

The hostile server is tests/data/conftest.py's loopback `DataServer` (127.0.0.1, port 0, in a thread, stopped by
the `make_server` fixture) over a copy of the tiny Shift dataset whose manifest was edited.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ssmbench.cli import main
from ssmbench.data.folder.checks import check_folder
from ssmbench.data.folder.manifest import load_manifest
from ssmbench.data.folder.safe_paths import UnsafePathError, check_name, inside, unsafe_reason
from ssmbench.data.hub.catalog import load_catalog
from ssmbench.data.hub.download import download_dataset
from ssmbench.data.hub.get import check_against_entry, entry_from_folder, get_dataset
from ssmbench.data.hub.open import open_dataset
from ssmbench.data.hub.transfer import FileItem, Http, fetch_file
from ssmbench.data.hub.verify import verify_dataset
from ssmbench.data.read.loader import check_shard_files
from ssmbench.errors import ConfigError, VerificationError

ARGV = ["generate", "shift", "--length", "64", "--n", "40", "--samples-per-shard", "8"]  # tiny_shift's command
SHARD = "train/shard-00001-of-00004.h5"
HOSTILE = ["/abs/evil.npy", "../evil.npy", "../../evil.npy", "sub\\..\\..\\evil.npy", "C:evil.npy", "a//evil.npy",
           "./evil.npy", ""]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def files_under(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*")}


def copy_of(tiny_shift: Path, where: Path, name: str = "shift-64") -> Path:
    folder = where / name
    shutil.copytree(tiny_shift, folder, ignore=shutil.ignore_patterns(".build"))
    return folder


def edit_manifest(folder: Path, edit) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def write_catalog(path: Path, **entries: dict) -> Path:
    path.write_text(json.dumps({"format": 1, "datasets": entries}))
    return path


def test_the_rule_accepts_plain_relative_paths_and_nothing_else(tmp_path):
    for ok in ("manifest.json", "train/shard-00000-of-00001.h5", "a..b/c", ".hidden/x"):
        assert unsafe_reason(ok) is None, ok
    for bad in [*HOSTILE, "/", "a/", "a/./b", "x\x00y", None, 3]:
        assert unsafe_reason(bad) is not None, bad
    for bad_name in ("a/b", ".hidden", "..", ".", "", "/abs", "C:x", "a\\b"):
        with pytest.raises(UnsafePathError, match="is not a plain folder name"):
            check_name(bad_name, "name")
    # inside: a symlink within the folder is fine, one leading out is not; a folder reached through a link is fine
    folder = tmp_path / "real"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "f").write_text("x")
    (folder / "b").symlink_to(folder / "a")
    (folder / "out").symlink_to(tmp_path)
    (tmp_path / "link").symlink_to(folder)
    assert inside(folder, "b/f", "file") == folder / "b" / "f"
    assert inside(tmp_path / "link", "a/f", "file") == tmp_path / "link" / "a" / "f"
    assert inside(folder, "a/not-yet", "file") == folder / "a" / "not-yet"
    with pytest.raises(UnsafePathError, match="'out/x' leads out of the dataset folder"):
        inside(folder, "out/x", "file")


# --- a hostile server -----------------------------------------------------------------------------------------------

@pytest.fixture
def hostile(tiny_shift, tmp_path, make_server):
    """(server, served folder): a copy of tiny_shift served at /ssm/shift-64/, its manifest edited by the test."""
    served = copy_of(tiny_shift, tmp_path / "served" / "ssm")
    return make_server(tmp_path / "served"), served


@pytest.mark.parametrize("bad", HOSTILE)
def test_a_manifest_naming_a_file_outside_the_folder_is_refused_and_nothing_is_written(hostile, tmp_path, bad):
    server, served = hostile
    if bad.startswith("/"):
        bad = str(tmp_path / "abs" / "evil.npy")
    (served / "evil.npy").write_bytes(b"evil")
    entry = {"path": bad, "num_bytes": 4, "sha256": "a" * 64}
    edit_manifest(served, lambda m: m.setdefault("files", []).append(entry))
    before = files_under(tmp_path)
    with pytest.raises(UnsafePathError, match="file path .* only relative paths inside the dataset folder"):
        download_dataset(server.url("ssm/shift-64/"), to=tmp_path / "to")
    assert files_under(tmp_path) == before  # not even the target folder was made
    assert [p for p, _, _ in server.log] == ["ssm/shift-64/manifest.json"]


@pytest.mark.parametrize("bad", ["../x.h5", "/abs/x.h5", "train\\shard-00001-of-00004.h5"])
def test_download_of_a_manifest_with_a_hostile_shard_path_is_one_line_exit_3(hostile, tmp_path, capsys, bad):
    server, served = hostile
    edit_manifest(served, lambda m: m["splits"]["train"]["shards"][1].update(path=bad))
    code, out, err = cli(capsys, "download", server.url("ssm/shift-64/"), "--to", str(tmp_path / "to"), "-q")
    assert code == 3 and out == "" and "Traceback" not in err
    error = err.strip().splitlines()[0]
    assert error.startswith("error: ") and f"shard path {bad!r}" in error and "nothing was downloaded" in error
    assert not (tmp_path / "to").exists() and not (tmp_path / "x.h5").exists()


@pytest.mark.parametrize("name", ["../escaped", "a/b", ".hidden", "/abs", ".."])
def test_a_manifest_whose_name_is_not_a_folder_name_is_refused(hostile, tmp_path, name):
    """The manifest's name is the folder the download writes under --to: '../escaped' would write beside it."""
    server, served = hostile
    edit_manifest(served, lambda m: m.update(name=name))
    before = files_under(tmp_path)
    with pytest.raises(UnsafePathError, match="the dataset name .* is not a plain folder name"):
        download_dataset(server.url("ssm/shift-64/"), to=tmp_path / "to" / "data")
    assert files_under(tmp_path) == before


def test_fetch_file_and_a_symlink_in_the_target_never_write_outside(hostile, tiny_shift, tmp_path):
    """Whatever reaches the transfer: `../x` is refused, and so is a target whose split folder is a symlink out."""
    import threading

    server, _ = hostile
    root = tmp_path / "to" / "shift-64"
    root.mkdir(parents=True)
    with pytest.raises(UnsafePathError, match="'../x.h5' has a '..' component"):
        fetch_file(Http(0, 0, 5), [server.url("ssm/shift-64/")], root, FileItem("../x.h5", 4, "a" * 64), None,
                   threading.Lock())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "train").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="leads out of the dataset folder"):
        download_dataset(server.url("ssm/shift-64/"), to=tmp_path / "to", progress=False)
    assert list(elsewhere.iterdir()) == []


# --- a hostile catalogue ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../escaped", "ABS", "a/b", ".get-x", "C:evil", "a\\..\\b"])
def test_get_refuses_a_catalogue_name_that_is_not_a_folder_name_before_making_anything(tiny_shift, tmp_path, capsys,
                                                                                        name):
    if name == "ABS":
        name = str(tmp_path / "abs-target")
    work = tmp_path / "work"
    root = work / "data" / "root"
    work.mkdir()
    cat = write_catalog(work / "cat.json", **{name: entry_from_folder(tiny_shift, ARGV, 1)})
    before = files_under(tmp_path)
    with pytest.raises(ConfigError, match="is not a plain folder name"):
        get_dataset(name, root, catalog=cat, quiet=True)
    code, out, err = cli(capsys, "get", name, "--catalog", str(cat), "--to", str(root), "-q")
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"dataset name {name!r} is not a plain folder name" in err.strip().splitlines()[0]
    assert files_under(tmp_path) == before  # no data root, no escaped folder, no .get-* staging or lock file


def test_a_catalogue_shard_path_or_folder_that_leads_outside_is_refused(tiny_shift, tmp_path):
    raw = entry_from_folder(tiny_shift, ARGV, 1)
    raw["shards"][0] = {**raw["shards"][0], "path": "../x.h5"}
    with pytest.raises(ConfigError, match="shard path '../x.h5' has a '..' component"):
        load_catalog(write_catalog(tmp_path / "cat.json", **{"x": raw}), env=False)
    raw = {**entry_from_folder(tiny_shift, ARGV, 1), "folder": "../up"}
    with pytest.raises(ConfigError, match="folder '../up' is not a plain folder name"):
        load_catalog(write_catalog(tmp_path / "cat.json", **{"x": raw}), env=False)


# --- a shard that leads out of its folder ----------------------------------------------------------------------------

@pytest.fixture
def linked(tiny_shift, tmp_path):
    """A copy of tiny_shift whose SHARD is a symlink to the same bytes outside the folder (sizes and hashes agree)."""
    folder = copy_of(tiny_shift, tmp_path / "data")
    outside = tmp_path / "outside.h5"
    shutil.move(folder / SHARD, outside)
    (folder / SHARD).symlink_to(outside)
    return folder


def test_a_shard_symlinked_out_of_the_folder_is_refused_everywhere(linked, tiny_shift, capsys):
    report = verify_dataset(linked)
    assert not report.ok and report.problems == [
        f"shard {SHARD!r} leads out of the dataset folder (a symlink to {linked.parent.parent / 'outside.h5'})"]
    code, _, err = cli(capsys, "verify", str(linked))
    assert code == 3 and "leads out of the dataset folder" in err and "Traceback" not in err
    manifest = load_manifest(linked)
    with pytest.raises(UnsafePathError, match=f"shard '{SHARD}' leads out"):
        check_folder(linked, manifest, "train")
    check_folder(linked, manifest, "test")  # the other splits are untouched
    with pytest.raises(UnsafePathError, match="leads out"):
        open_dataset(linked, "train")
    with pytest.raises(UnsafePathError, match="leads out"):
        check_shard_files(linked, manifest.shards("train"))
    from ssmbench.data.hub.catalog import _entry

    with pytest.raises(UnsafePathError, match="leads out"):
        check_against_entry(linked, _entry("shift-64", entry_from_folder(tiny_shift, ARGV, 1), "test"))


def test_a_shard_relinked_after_the_dataset_was_opened_is_refused_when_read(tiny_shift, tmp_path):
    folder = copy_of(tiny_shift, tmp_path / "data")
    ds = open_dataset(folder, "train", transform="numpy")
    outside = tmp_path / "outside.h5"
    shutil.move(folder / SHARD, outside)
    (folder / SHARD).symlink_to(outside)
    with pytest.raises(UnsafePathError, match="leads out"):
        ds[8]


def test_a_manifest_naming_dot_dot_is_refused_by_verify_check_folder_and_open_dataset(tiny_shift, tmp_path, capsys):
    folder = copy_of(tiny_shift, tmp_path / "data")
    shutil.copy(folder / SHARD, tmp_path / "data" / "x.h5")  # the same bytes, one level up
    edit_manifest(folder, lambda m: m["splits"]["train"]["shards"][1].update(path="../x.h5"))
    with pytest.raises(UnsafePathError, match="shard path '../x.h5' has a '..' component"):
        verify_dataset(folder)
    code, _, err = cli(capsys, "verify", str(folder))
    assert code == 3 and "'../x.h5' has a '..' component" in err.splitlines()[0] and "Traceback" not in err
    with pytest.raises(UnsafePathError):
        load_manifest(folder)
    with pytest.raises(UnsafePathError):
        open_dataset(folder, "train")


def test_a_dataset_folder_reached_through_a_symlink_still_opens(tiny_shift, tmp_path):
    folder = copy_of(tiny_shift, tmp_path / "disk")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "shift-64").symlink_to(folder)
    assert len(open_dataset(tmp_path / "data" / "shift-64", "train")) == 32
    assert verify_dataset(tmp_path / "data" / "shift-64").ok


def test_repack_and_publish_refuse_a_shard_symlinked_out_of_the_folder(linked, tmp_path):
    from ssmbench.data.hub.publish import publish
    from ssmbench.data.hub.repack import repack

    with pytest.raises(UnsafePathError, match="leads out of the dataset folder"):
        repack(linked, codec="gzip:1", out=tmp_path / "copy")
    assert not (tmp_path / "copy").exists()
    with pytest.raises(VerificationError, match="leads out of the dataset folder"):  # its verify refuses it
        publish(linked, tmp_path / "release")
    assert not (tmp_path / "release").exists()


def test_an_hf_source_naming_dot_dot_is_refused():
    from ssmbench.data.hub.transfer import hf_to_https

    assert hf_to_https("hf://datasets/org/repo@rev/shift-64").endswith("/org/repo/resolve/rev/shift-64/")
    for bad in ("hf://datasets/org/repo@rev/../other", "hf://datasets/org/repo@../x", "hf://datasets/org/..@r/x",
                "hf://datasets/org/repo@rev/a//b"):
        with pytest.raises(UnsafePathError):
            hf_to_https(bad)
