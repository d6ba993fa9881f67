"""A disk that fills in the middle of a build, after the free-space check passed (issue 37, item 2).

On a 3 MiB tmpfs the build ended in an h5py `RuntimeError` ("internal error") traceback: HDF5 reports some failed
writes without the OS errno, and the writer only turned OSErrors into the one-line `DiskFullError`. Now either
exception, with or without an errno, while the folder's file system is nearly full (`space.NEARLY_FULL`) is that
line (folder, space still needed, exit 1); the partial shard is removed, no manifest is written, and the same
command finishes the build to the same bytes once there is room. The error is injected (where HDF5 raises it) and,
where this machine lets a test mount one, a real tiny tmpfs fills up.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from ssmbench.data.hub.verify import verify_dataset
from ssmbench.data.make import shards, space
from ssmbench.data.make.generate import generate_dataset
from ssmbench.task_config import resolve_config

ARGS = ["generate", "shift", "--length", "64", "--n", "40", "--samples-per-shard", "8", "-q"]
LINE = (r"error: no space left on device while writing {folder}: it needs about [\d.]+ [KM]iB more to finish "
        r"\([\d.]+ [KMGT]?i?B free\); free some space or choose another --out, then re-run the same command\n")


def run_cli_here(args: list[str], capsys) -> tuple[int, str]:
    from ssmbench.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(args)
    return exit_.value.code, capsys.readouterr().err


def clean_digest(tmp_path: Path) -> str:
    _, config, _ = resolve_config("shift", length=64)
    built = generate_dataset("shift", config, out=tmp_path / "clean", n=40, samples_per_shard=8)
    return built.manifest["content_digest"]


def assert_stopped_cleanly(folder: Path, done: int) -> None:
    """No temporary, no manifest, and each shard file on disk is a finished one (its sidecar written)."""
    assert not sorted(folder.rglob("*.tmp.*")) and not (folder / "manifest.json").exists()
    written = sorted(p.name for p in (folder / "train").iterdir())
    assert written == [f"shard-{i:05d}-of-00004.h5" for i in range(done)], written
    assert all((folder / ".build" / "train" / f"{Path(n).stem}.json").exists() for n in written)


def test_an_hdf5_error_without_errno_on_a_nearly_full_disk_is_the_one_line(tmp_path, monkeypatch, capsys):
    """The third block's write fails as HDF5 fails on a full disk without naming the errno, while the file system
    has 4 KiB left: one line, exit 1, two finished shards kept, nothing partial; then the same command finishes."""
    real, calls = shards.row_hashes, []

    def row_hashes(block):
        calls.append(1)
        if len(calls) == 3:
            monkeypatch.setattr(space, "free_bytes", lambda path: 4096)  # the disk is full now
            raise RuntimeError("Can't synchronously write data (internal error)")
        return real(block)

    monkeypatch.setattr(shards, "row_hashes", row_hashes)
    folder = tmp_path / "shift-64"
    code, err = run_cli_here([*ARGS, "--out", str(tmp_path)], capsys)
    assert code == 1 and re.fullmatch(LINE.format(folder=re.escape(str(folder))), err), err
    assert "Traceback" not in err and "4.0 KiB free" in err
    assert_stopped_cleanly(folder, 2)
    monkeypatch.undo()
    assert run_cli_here([*ARGS, "--out", str(tmp_path)], capsys)[0] == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["content_digest"] == clean_digest(tmp_path) and verify_dataset(folder).ok


def test_the_same_error_with_room_to_spare_stays_a_bug(tmp_path, monkeypatch):
    """With plenty of free space an errno-less HDF5 error is not a full disk: it keeps its traceback (a bug to
    report), and still leaves no partial shard."""
    real, calls = shards.row_hashes, []

    def row_hashes(block):
        calls.append(1)
        if len(calls) == 3:
            monkeypatch.setattr(space, "free_bytes", lambda path: 100 << 30)
            raise RuntimeError("Can't synchronously write data (internal error)")
        return real(block)

    monkeypatch.setattr(shards, "row_hashes", row_hashes)
    _, config, _ = resolve_config("shift", length=64)
    with pytest.raises(RuntimeError, match="internal error"):
        generate_dataset("shift", config, out=tmp_path, n=40, samples_per_shard=8)
    assert not sorted((tmp_path / "shift-64").rglob("*.tmp.*"))


def test_disk_errno_reads_the_errno_or_the_free_space(tmp_path, monkeypatch):
    assert space.disk_errno(RuntimeError("file write failed: errno = 28, error message = 'x'")) == errno.ENOSPC
    internal = RuntimeError("Can't write data (internal error)")
    assert space.disk_errno(internal) is None  # no folder to look at
    monkeypatch.setattr(space, "free_bytes", lambda path: space.NEARLY_FULL - 1)
    assert space.disk_errno(internal, tmp_path) == errno.ENOSPC
    assert space.disk_errno(OSError(errno.ENOENT, "gone"), tmp_path) is None  # another OS error stays itself
    assert space.disk_errno(ValueError("x"), tmp_path) is None
    monkeypatch.setattr(space, "free_bytes", lambda path: space.NEARLY_FULL)
    assert space.disk_errno(internal, tmp_path) is None


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 3 MiB tmpfs mounted for this test (root with CAP_SYS_ADMIN only; skipped elsewhere), unmounted after."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    try:
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        made = None
    if made is None or made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)


FILL_AT_THIRD_BLOCK = """
import os, sys
from ssmbench.data.make import shards
from ssmbench.cli import main
real, calls = shards.row_hashes, []
def row_hashes(block):
    calls.append(1)
    if len(calls) == 3:  # the third shard's first block: another file takes the space left before HDF5 writes it
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, bytes(65536))
        except OSError:
            pass
        finally:
            os.close(fd)
    return real(block)
shards.row_hashes = row_hashes
main(sys.argv[2:])
"""


def test_a_real_tiny_file_system_that_fills_mid_build(tiny_tmpfs, tmp_path, capsys):
    """On a 3 MiB tmpfs another file takes all the space left after the second shard: the real error HDF5 gets is
    the one line, exit 1, then with the file gone the same command finishes the folder to the clean bytes. In a
    child process: HDF5 cannot always close a file after a full disk, and such a process ends with `os._exit`
    (`space.poison_hdf5`)."""
    import sys

    filler = tiny_tmpfs / f"filler-{uuid.uuid4().hex}"
    args = [*ARGS, "--out", str(tiny_tmpfs)]
    folder = tiny_tmpfs / "shift-64"
    child = subprocess.run([sys.executable, "-c", FILL_AT_THIRD_BLOCK, str(filler), *args], capture_output=True,
                           text=True, timeout=300, env={**os.environ, "PYTHONSAFEPATH": "1"})
    assert child.returncode == 1 and "Traceback" not in child.stderr, child.stderr
    assert re.fullmatch(LINE.format(folder=re.escape(str(folder))), child.stderr), child.stderr
    assert not sorted(folder.rglob("*.tmp.*")) and not (folder / "manifest.json").exists()
    filler.unlink()
    assert run_cli_here(args, capsys)[0] == 0
    assert json.loads((folder / "manifest.json").read_text())["content_digest"] == clean_digest(tmp_path)
