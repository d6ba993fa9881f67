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

from ssmbench.data.hub.catalog import load_catalog
from ssmbench.data.hub.get import entry_from_folder, get_dataset
from ssmbench.data.hub.verify import verify_dataset
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


@pytest.mark.parametrize("damage", ["truncated", "empty", "not a catalogue", "missing"])
def test_a_damaged_built_in_catalogue_is_one_line_saying_to_reinstall(tmp_path, monkeypatch, capsys, damage):
    """The packaged catalog.json truncated (or empty, or JSON of another shape, or gone): `ls datasets` and `get`
    end with exit 2 and one line naming the file and the reinstall (was: a JSONDecodeError traceback, exit 1)."""
    from importlib import resources

    from ssmbench.cli import main
    from ssmbench.data.hub import catalog

    text = resources.files("ssmbench").joinpath("catalog.json").read_text()
    copy = tmp_path / "catalog.json"
    copy.write_text({"truncated": text[:len(text) // 2], "empty": "", "not a catalogue": "[1, 2]",
                     "missing": ""}[damage])
    if damage == "missing":
        copy.unlink()
    monkeypatch.setattr(catalog, "_builtin_file", lambda: copy)
    monkeypatch.delenv("SSMBENCH_CATALOG", raising=False)
    for argv in (["ls", "datasets"], ["get", "shift-4096-ci", "--to", str(tmp_path / "data")]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        err = capsys.readouterr().err
        assert info.value.code == 2, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith(f"error: the built-in catalogue {copy} ") and "reinstall" in err, err
    assert not (tmp_path / "data").exists()


# --- the catalogue check reads the files, not the manifest (issue 26) ---------------------------------------------

def present_copy(tiny_shift: Path, root: Path, name: str = "shift-64") -> Path:
    """A writable copy of tiny_shift in `root/name`, as `get` would have left it."""
    folder = root / name
    shutil.copytree(tiny_shift, folder, ignore=shutil.ignore_patterns(".build"))
    return folder


def manifest_shard(folder: Path, path: str) -> dict:
    manifest = json.loads((folder / "manifest.json").read_text())
    return next(sh for s in ("train", "val", "test") for sh in manifest["splits"][s]["shards"] if sh["path"] == path)


def rewrite_manifest_shard(folder: Path, path: str, **values) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    for s in ("train", "val", "test"):
        for sh in manifest["splits"][s]["shards"]:
            if sh["path"] == path:
                sh.update(values)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def flip_a_byte(file: Path) -> None:
    """Flip one byte inside the first stored chunk of `inputs` (fletcher32 notices when it is decoded)."""
    import h5py

    with h5py.File(file, "r") as h5:
        chunk = h5["inputs"].id.get_chunk_info(0)
    data = bytearray(file.read_bytes())
    data[chunk.byte_offset + chunk.size // 2] ^= 0xFF
    file.write_bytes(bytes(data))


def test_get_on_a_present_folder_reads_its_shard_files(tiny_shift, tmp_path):
    """A present folder is answered "present" only when its files match: a byte flipped in a shard, or a shard
    deleted, is exit 3 naming the shard, with the command that fetches it anew; the manifest alone would pass."""
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry_from_folder(tiny_shift, ARGV, 1)})
    root = tmp_path / "data"
    folder = present_copy(tiny_shift, root)
    result = get_dataset("shift-64", root, catalog=cat, quiet=True)
    assert result.how == "present" and len(result.checked) == 6 and not result.notes
    target = "train/shard-00002-of-00004.h5"
    flip_a_byte(folder / target)
    done = ssmbench("get", "shift-64", "--catalog", str(cat), "--to", str(root))
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 2  # error, hint
    error, hint = done.stderr.strip().splitlines()
    assert target in error and "cannot be decoded" in error and "the file is damaged" in error
    assert f"remove {folder}" in hint and "ssmbench get shift-64" in hint
    shutil.copy(tiny_shift / target, folder / target)
    (folder / "val/shard-00000-of-00001.h5").unlink()
    with pytest.raises(VerificationError, match="shard val/shard-00000-of-00001.h5 is missing here"):
        get_dataset("shift-64", root, catalog=cat, quiet=True)


def test_a_present_folder_whose_manifest_disagrees_with_its_files_is_not_present(tiny_shift, tmp_path):
    """Shards equal to the catalogue's but a manifest that lists another sha256: the folder is damaged (the
    loader trusts the manifest), exit 3 from verify's check of the manifest against the files."""
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry_from_folder(tiny_shift, ARGV, 1)})
    folder = present_copy(tiny_shift, tmp_path / "data")
    rewrite_manifest_shard(folder, "test/shard-00000-of-00001.h5", sha256="3" * 64)
    with pytest.raises(VerificationError, match="test/shard-00000-of-00001.h5: sha256 mismatch") as err:
        get_dataset("shift-64", tmp_path / "data", catalog=cat, quiet=True)
    assert "ssmbench get shift-64" in err.value.hint


def test_an_edited_row_with_a_manifest_updated_to_match_fails_verify_catalog(tiny_shift, tmp_path):
    """The issue's forgery: one sample_id changed in a shard, the manifest's sha256 and size updated to the new
    file, its content hashes left alone. `verify` (against the manifest) passes; `verify --catalog` decodes the file
    and names the field."""
    import h5py

    from ssmbench.plain import file_sha256

    entry = entry_from_folder(tiny_shift, ARGV, 1)
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry})
    folder = present_copy(tiny_shift, tmp_path)
    target = "train/shard-00001-of-00004.h5"
    with h5py.File(folder / target, "r+") as h5:
        h5["sample_id"][3] = 10_000
    rewrite_manifest_shard(folder, target, sha256=file_sha256(folder / target),
                           num_bytes=(folder / target).stat().st_size)
    done = ssmbench("verify", str(folder), "--catalog", str(cat))
    assert done.returncode == 3, done.stdout + done.stderr
    assert verify_dataset(folder).ok  # the folder agrees with its (edited) manifest
    assert f"{target} differs from catalogue entry 'shift-64' in field 'sample_id'" in done.stderr
    assert "Traceback" not in done.stderr


def test_other_bytes_with_the_entrys_own_writer_versions_is_exit_3(tiny_shift, tmp_path):
    """A catalogue whose shard sha256 is wrong while its content hashes are right, every recorded version equal to
    the file's: nothing explains the other bytes, so it is refused in one line (no note blaming library versions)."""
    entry = entry_from_folder(tiny_shift, ARGV, 1)
    entry["shards"][1]["sha256"] = "4" * 64
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry})
    done = ssmbench("verify", str(tiny_shift), "--catalog", str(cat))
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    line = done.stderr.strip()
    assert entry["shards"][1]["path"] in line and "yet records the entry's writer versions" in line
    assert "ssmbench 0.1.0" in line and "numpy" in line and "catalogue's sha256 for it is wrong" in line


def test_equal_content_notes_only_the_versions_that_differ(tiny_shift, tmp_path):
    entry = entry_from_folder(tiny_shift, ARGV, 1)
    entry["shards"][0]["sha256"] = "5" * 64
    entry["environment"]["numba"] = "0.1"
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry})
    done = ssmbench("verify", str(tiny_shift), "--catalog", str(cat))
    assert done.returncode == 0, done.stderr
    note = next(ln for ln in done.stdout.splitlines() if ln.startswith("note:"))
    assert "(catalogue: 0.1)" in note and "numba" in note
    assert not any(k in note for k in ("numpy", "h5py", "hdf5", "ssmbench"))


def test_other_bytes_without_content_hashes_are_refused(tiny_shift):
    from ssmbench.data.hub.catalog import _entry
    from ssmbench.data.hub.get import check_against_entry

    raw = entry_from_folder(tiny_shift, ARGV, 1)
    raw["shards"][2]["sha256"] = "6" * 64
    del raw["shards"][2]["content"]
    with pytest.raises(VerificationError, match="in its file bytes \\(no content hashes to compare\\)"):
        check_against_entry(tiny_shift, _entry("shift-64", raw, "test"))
    raw["shards"][2]["content"] = {}
    with pytest.raises(VerificationError, match="in its file bytes \\(no content hashes to compare\\)"):
        check_against_entry(tiny_shift, _entry("shift-64", raw, "test"))


def test_a_content_digest_other_than_the_entrys_is_refused(tiny_shift):
    from ssmbench.data.hub.catalog import _entry
    from ssmbench.data.hub.get import check_against_entry

    raw = entry_from_folder(tiny_shift, ARGV, 1)
    assert len(check_against_entry(tiny_shift, _entry("shift-64", raw, "test"))[0]) == 6
    raw["content_digest"] = "7" * 64
    with pytest.raises(VerificationError, match="content digest .* differs from the catalogue's 7777"):
        check_against_entry(tiny_shift, _entry("shift-64", raw, "test"))


def test_a_shard_the_entry_does_not_list_is_refused(tiny_shift, tmp_path):
    """Listed in the manifest but not in the entry, or lying in the folder unlisted anywhere: both refused."""
    from ssmbench.data.hub.catalog import _entry
    from ssmbench.data.hub.get import check_against_entry

    raw = entry_from_folder(tiny_shift, ARGV, 1)
    fewer = {**raw, "shards": raw["shards"][:-1]}
    with pytest.raises(VerificationError, match="shard test/shard-00000-of-00001.h5 is not in the catalogue entry"):
        check_against_entry(tiny_shift, _entry("shift-64", fewer, "test"))
    folder = present_copy(tiny_shift, tmp_path)
    shutil.copy(folder / "val/shard-00000-of-00001.h5", folder / "val/shard-00001-of-00001.h5")
    with pytest.raises(VerificationError, match="shard val/shard-00001-of-00001.h5 is not in the catalogue entry"):
        check_against_entry(folder, _entry("shift-64", raw, "test"))


def test_shards_a_partial_download_left_out_are_not_called_missing(tiny_shift, tmp_path):
    from ssmbench.data.hub.catalog import _entry
    from ssmbench.data.hub.get import check_against_entry

    folder = present_copy(tiny_shift, tmp_path)
    (folder / "test/shard-00000-of-00001.h5").unlink()
    (folder / ".download.json").write_text(json.dumps({"absent": ["test/shard-00000-of-00001.h5"]}))
    checked, notes = check_against_entry(folder, _entry("shift-64", entry_from_folder(tiny_shift, ARGV, 1), "test"))
    assert len(checked) == 5 and notes == ["1 shard(s) left out by `download --split/--include` were not checked"]


@pytest.mark.parametrize("shard", [{"path": "train/a.h5"}, {"path": "train/a.h5", "sha256": "abc"},
                                   {"path": "train/a.h5", "sha256": "A" * 64}, {"sha256": "a" * 64}, "train/a.h5"])
def test_catalogue_shards_need_a_path_and_a_64_hex_sha256(tmp_path, shard):
    from ssmbench.errors import ConfigError

    cat = write_catalog(tmp_path / "cat.json", **{"x": {"build": {"argv": ARGV}, "shards": [shard]}})
    with pytest.raises(ConfigError, match="needs a path and a 64-hex sha256"):
        load_catalog(cat, env=False)
    write_catalog(cat, **{"x": {"build": {"argv": ARGV}, "shards": [{"path": "train/a.h5", "sha256": "a" * 64}]}})
    assert load_catalog(cat, env=False)["x"].shards[0]["path"] == "train/a.h5"


# --- one `get` of an entry into a data root at a time -------------------------------------------------------------

def wait_for(predicate, what: str, procs=(), ceiling: float = 240.0) -> None:
    """Poll `predicate` until it holds; fail at `ceiling` seconds, or as soon as one of `procs` has exited."""
    import time

    deadline = time.monotonic() + ceiling
    while not predicate():
        ended = [i for i, p in enumerate(procs) if p.poll() is not None]
        if ended or time.monotonic() > deadline:
            pytest.fail(f"no {what} " + (f"(a process exited first: {ended})" if ended else f"within {ceiling} s"))
        time.sleep(0.05)


def test_two_concurrent_gets_of_one_entry_build_once_and_the_second_reuses_the_folder(tiny_shift, tmp_path):
    """Two `ssmbench get` processes of one entry into one root, started while the entry's lock is held (so both
    must wait): each says it waits in one line; after the lock is released one rebuilds and the other, having
    waited for it, checks the finished folder and answers "present". Before the lock, the second moved the first's
    shared staging folder away (a FileNotFoundError traceback)."""
    from filelock import FileLock

    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry_from_folder(tiny_shift, ARGV, 1)})
    root = tmp_path / "cc"
    root.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("SSMBENCH_CATALOG", "SSMBENCH_DATA")}
    gate = FileLock(str(root / ".get-shift-64.lock"))
    gate.acquire(timeout=60)
    procs, errs = [], []
    try:
        for i in range(2):
            errs.append(tmp_path / f"err{i}.txt")
            with open(tmp_path / f"out{i}.txt", "w") as out, open(errs[-1], "w") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "ssmbench", "get", "shift-64", "--catalog", str(cat), "--to", str(root),
                     "-q", "--json"], stdout=out, stderr=err, env={**env, "PYTHONSAFEPATH": "1"}))
        wait_for(lambda: all("waiting for another `ssmbench get shift-64`" in e.read_text() for e in errs),
                 "waiting line from both processes", procs)
    finally:
        gate.release()
    for p in procs:
        assert p.wait(timeout=600) == 0, [e.read_text() for e in errs]
    hows = sorted(json.loads((tmp_path / f"out{i}.txt").read_text())["how"] for i in range(2))
    assert hows == ["built", "present"]
    for e in errs:
        text = e.read_text()
        assert "Traceback" not in text and text.strip().splitlines()[0].startswith("waiting for another")
        assert len(text.strip().splitlines()) == 1
    assert (root / "shift-64" / "manifest.json").exists() and not (root / ".get-shift-64").exists()
    assert sorted(p.name for p in root.iterdir()) == ["shift-64"]  # the lock file went with the last holder


# --- signals: the rebuild (in `get`'s process) and its pool workers live and die with `get` ------------------------

def _stat(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, state, start time) of a live process, None when it is gone (a zombie counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else (int(fields[1]), fields[0], fields[19])


def _descendants(pid: int) -> dict[int, tuple[int, int]]:
    """Every live descendant of `pid`: {pid: (depth below `pid`, start time)} (start time tells a reused pid)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for d in os.listdir("/proc"):
        st = _stat(int(d)) if d.isdigit() else None
        if st is not None:
            children.setdefault(st[0], []).append((int(d), st[2]))
    out, todo = {}, [(pid, 0)]
    while todo:
        parent, depth = todo.pop()
        for child, start in children.get(parent, []):
            out[child] = (depth + 1, start)
            todo.append((child, depth + 1))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (the process tree)")
# SIGTERM takes Ctrl-C's path (4 s a case): slow, in CI's `pytest -m slow`; SIGINT and SIGKILL stay in the default run.
@pytest.mark.parametrize("sig", ["SIGINT", pytest.param("SIGTERM", marks=pytest.mark.slow), "SIGKILL"])
def test_a_signal_to_get_mid_rebuild_ends_generate_and_its_workers(tmp_path, sig):
    """`ssmbench get shift-4096-ci` is signalled once the pool workers of its rebuild run (get -> forkserver ->
    worker; the build runs in `get`'s own process). Ctrl-C and SIGTERM: exit 130, a last line "interrupted ...
    re-run the same command to continue", no traceback (was: exit 2 "rebuilding failed", and 143 without a word). SIGKILL: every process of
    the rebuild is gone soon after, and the rebuild never finished (was: generate and its workers ran on as
    orphans and completed the staging folder). Every case: nothing of the rebuild survives, and a re-run finishes."""
    import signal
    import time

    root = tmp_path / "data"
    staging = root / ".get-shift-4096-ci"
    env = {k: v for k, v in os.environ.items() if k not in ("SSMBENCH_CATALOG", "SSMBENCH_DATA")}
    err = tmp_path / "err.txt"
    with open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "ssmbench", "get", "shift-4096-ci", "--to", str(root)],
                                stdout=subprocess.DEVNULL, stderr=stderr, env={**env, "PYTHONSAFEPATH": "1"})
    try:
        tree: dict[int, tuple[int, int]] = {}

        def workers_run() -> bool:
            tree.update(_descendants(proc.pid))
            return staging.exists() and any(depth >= 2 and _stat(p) for p, (depth, _) in tree.items())

        wait_for(workers_run, "generate pool worker under `get`", [proc])
        proc.send_signal(getattr(signal, sig))
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.read_text()
    if sig == "SIGKILL":
        assert rc == -signal.SIGKILL
    else:
        last = text.strip().splitlines()[-1]
        assert rc == 130, text
        assert last.startswith(f"interrupted ({sig}) while rebuilding shift-4096-ci") and \
            last.endswith("re-run the same command to continue"), text
        assert "Traceback" not in text and "failed" not in text

    def survivors() -> list[int]:
        return [p for p, (_, start) in tree.items() if (st := _stat(p)) is not None and st[2] == start]

    deadline = time.monotonic() + 60
    while survivors() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not survivors(), f"processes of the rebuild still running after {sig} to get: {survivors()}"
    assert not list(staging.glob("*/manifest.json")), "the rebuild went on to the end without its parent"
    again = ssmbench("get", "shift-4096-ci", "--to", str(root), "-q", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["how"] == "built", again.stderr


# --- issue 37: what the catalogue checks must not let through ------------------------------------------------------

def test_a_shard_the_manifest_lists_but_neither_disk_nor_entry_has_is_refused(tiny_shift, tmp_path):
    """Listed only in the manifest (not on disk, not in the entry): the manifest and the entry disagree."""
    from ssmbench.data.hub.catalog import _entry
    from ssmbench.data.hub.get import check_against_entry

    folder = present_copy(tiny_shift, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    extra = {**manifest["splits"]["test"]["shards"][0], "path": "test/shard-00001-of-00001.h5"}
    manifest["splits"]["test"]["shards"].append(extra)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(VerificationError, match="shard test/shard-00001-of-00001.h5 is not in the catalogue entry"):
        check_against_entry(folder, _entry("shift-64", entry_from_folder(tiny_shift, ARGV, 1), "test"))


def test_a_content_digest_differing_only_after_its_first_hex_digits_is_refused(tiny_shift):
    from ssmbench.data.hub.catalog import _entry
    from ssmbench.data.hub.get import check_against_entry

    raw = entry_from_folder(tiny_shift, ARGV, 1)
    digest = raw["content_digest"]
    raw["content_digest"] = digest[:-1] + ("0" if digest[-1] != "0" else "1")  # the last hex digit differs
    with pytest.raises(VerificationError, match="content digest .* differs from the catalogue's"):
        check_against_entry(tiny_shift, _entry("shift-64", raw, "test"))


def test_verify_catalog_finds_the_entry_by_dataset_id_not_by_folder_name_alone(tiny_shift, tmp_path):
    """A folder named like an entry of another dataset id is checked against the entry of its own id."""
    from ssmbench.data.hub.get import entry_for_folder
    from ssmbench.errors import DatasetError

    folder = present_copy(tiny_shift, tmp_path / "data", name="shift-64")
    mine = entry_from_folder(tiny_shift, ARGV, 1)
    other = {**mine, "dataset_id": "shift-64-00000000"}
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": other, "mine": mine})
    assert entry_for_folder(folder, cat).name == "mine"
    write_catalog(cat, **{"shift-64": other})
    with pytest.raises(DatasetError, match="no catalogue entry describes"):
        entry_for_folder(folder, cat)


def test_a_build_command_must_be_a_generate_command(tmp_path):
    from ssmbench.errors import ConfigError

    for argv in (["eval", "shift"], ["shift", "--length", "64"], [], "generate shift"):
        cat = write_catalog(tmp_path / "cat.json", **{"x": {"build": {"argv": argv}}})
        with pytest.raises(ConfigError, match='build.argv must be a list of strings starting with "generate"'):
            load_catalog(cat, env=False)
    write_catalog(cat, **{"x": {"build": {"argv": ARGV}}})
    assert load_catalog(cat, env=False)["x"].build["argv"] == ARGV


def test_a_user_catalogue_cannot_shadow_a_built_in_name(tmp_path):
    from ssmbench.errors import ConfigError

    builtin = load_catalog(env=False)["shift-4096-ci"]
    cat = write_catalog(tmp_path / "cat.json", **{"shift-4096-ci": {"build": {"argv": ARGV}}})
    with pytest.raises(ConfigError, match="dataset 'shift-4096-ci' is in both <built-in> and"):
        load_catalog(cat, env=False)
    twin = write_catalog(tmp_path / "twin.json", **{"x": {"build": {"argv": ARGV}}})
    write_catalog(cat, **{"x": {"build": {"argv": ARGV}}})
    with pytest.raises(ConfigError, match=f"dataset 'x' is in both {cat} and {twin}"):
        load_catalog([cat, twin], env=False)
    assert load_catalog(env=False)["shift-4096-ci"] == builtin


def test_get_leaves_no_lock_file_and_says_before_a_rebuild_what_it_rebuilds_and_how_long_it_takes(tiny_shift, tmp_path):
    """Without a mirror, `get` (and `download NAME`, which hands such an entry to it) first says that it rebuilds,
    how big and, from the estimate, how long; then builds. No `.get-NAME.lock` stays in the data root."""
    entry = entry_from_folder(tiny_shift, ARGV, 1)
    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry})
    root = tmp_path / "data"
    said: list[tuple[str, bool]] = []
    result = get_dataset("shift-64", root, catalog=cat, on_wait=lambda line: said.append(
        (line, (root / ".get-shift-64").exists())))
    assert result.how == "built"
    (first, building), (second, building2) = said
    assert not building and not building2  # said before the build started
    assert first.startswith("shift-64 has no mirror: rebuilding it here (40 samples, ") and ARGV[1] in first
    assert "with 1 worker(s) (estimated)" in second and "on disk" in second and str(root / "shift-64") in second
    assert sorted(p.name for p in root.iterdir()) == ["shift-64"]  # no .get-shift-64.lock, no staging folder
    said.clear()
    assert get_dataset("shift-64", root, catalog=cat, on_wait=said.append).how == "present" and said == []
    assert sorted(p.name for p in root.iterdir()) == ["shift-64"]


def test_download_of_an_entry_without_a_mirror_says_it_rebuilds_before_it_starts(tiny_shift, tmp_path, capsys):
    """`ssmbench download NAME` of an entry without `sources` becomes `get NAME`: stderr says so first, with the
    size and the estimated time (the new user saw a silent 1 GiB rebuild)."""
    from ssmbench.cli import main

    cat = write_catalog(tmp_path / "cat.json", **{"shift-64": entry_from_folder(tiny_shift, ARGV, 1)})
    with pytest.raises(SystemExit) as exc:
        main(["download", "shift-64", "--catalog", str(cat), "--to", str(tmp_path / "data"), "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0 and json.loads(out)["how"] == "built"
    lines = [ln for ln in err.splitlines() if ln.startswith("shift-64")]
    assert lines[0].startswith("shift-64 has no mirror: rebuilding it here (40 samples, ")
    assert "(estimated)" in lines[1] and err.startswith(f"{lines[0]}\n{lines[1]}\n")  # before any progress bar


def test_the_lock_file_is_removed_by_its_holder_and_a_waiter_never_holds_a_removed_one(tmp_path):
    """`get`'s lock (`lockfile.held`) unlinks its file while still holding it; a waiter blocked on that file then
    locks the one at the path instead, so a third process can never take the lock beside it."""
    import threading

    from ssmbench.data.hub.lockfile import Busy, held

    path = tmp_path / ".get-x.lock"
    waiting, holding, release = threading.Event(), threading.Event(), threading.Event()

    def waiter() -> None:
        with held(path, on_wait=waiting.set):
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=waiter)
    with held(path):
        thread.start()
        assert waiting.wait(30)  # blocked on the file this holder is about to remove
    try:
        assert holding.wait(30)
        with pytest.raises(Busy), held(path, wait=False):  # the waiter holds the file now at the path
            pass
    finally:
        release.set()
        thread.join(30)
    assert not path.exists()
