"""Build robustness: a growing ListOps candidate stream, runs sharing a folder, Ctrl-C, parent death, a full disk,
atomic small files, the writer's dtype/shape check and stored-bytes hashes, and the Numba SVML setting.

Oracles are independent of the code under test: samples regenerated from their keys, hashes recomputed from what
h5py reads back, processes found through /proc, errors injected where the OS would raise them.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import h5py
import numpy as np
import pytest

from ssmbench import registry
from ssmbench.data.hub.verify import verify_dataset
from ssmbench.data.make import jobs, shards
from ssmbench.data.make.generate import generate_dataset
from ssmbench.errors import SsmbenchError
from ssmbench.seeding import keys_for
from ssmbench.task_config import resolve_config
from support import REPO

LISTOPS = ["min_length=10", "max_length=30", "max_depth=3", "max_args=4"]
"""Tiny ListOps-Subtrees: 100 distinct samples need candidates up to index 181, past the first 164 (n + 64)."""
INTERRUPTIBLE = ["shift", "--length", "1024", "--n", "2400", "--samples-per-shard", "40"]
"""60 shards of about 25 ms each: still running when the first one is done."""
SHARED = ["shift", "--length", "1024", "--n", "800", "--samples-per-shard", "40"]
"""20 shards: two runs of it overlap when the second starts after the first's first shard."""
LINE = re.compile(r"^interrupted: (\d+)/60 shards done; re-run the same command to continue$")


@pytest.fixture
def cli():
    """Start `ssmbench ARGS...` as a user would; whatever is still running at the end of the test is killed."""
    started: list[subprocess.Popen] = []
    exe = Path(sys.executable).with_name("ssmbench")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from ssmbench.cli import main; main()"]

    def start(*args: str, env: dict | None = None) -> subprocess.Popen:
        started.append(subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, "PYTHONSAFEPATH": "1", **(env or {})}))
        return started[-1]

    yield start
    for proc in started:  # not communicate(): orphaned workers would keep the pipes open
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=600)
        proc.stdout.close()
        proc.stderr.close()


def wait_for(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def temporaries(root: Path) -> list[Path]:
    return sorted(root.rglob("*.tmp.*"))


def digest(folder: Path) -> str:
    return json.loads((folder / "manifest.json").read_text())["content_digest"]


def build_here(args: list[str], out: Path, **kwargs):
    """The build of `ssmbench generate ARGS` (a shift argument list), run in this process."""
    _, config, _ = resolve_config("shift", length=int(args[2]))
    return generate_dataset("shift", config, out=out, n=int(args[4]), samples_per_shard=int(args[6]), **kwargs)


# --- 1. ListOps: the candidate stream grows ---------------------------------------------------------------------

def test_listops_candidate_stream_growth_gives_one_dataset_for_any_sharding(tmp_path):
    _, config, _ = resolve_config("listops_subtrees", overrides=LISTOPS)
    digests, manifests = set(), []
    for spp, workers in [(16, 1), (7, 2), (1000, 1)]:  # 16 and 7: the stream's last shard grows
        result = generate_dataset("listops_subtrees", config, out=tmp_path / f"{spp}-{workers}", n=100,
                                  samples_per_shard=spp, workers=workers)
        digests.add(result.manifest["content_digest"])
        manifests.append(result)
    assert len(digests) == 1
    result = manifests[0]
    assert result.manifest["deduplication"]["candidates_generated"] > 164  # the stream had to grow
    # independent oracle: walk the candidates regenerated from their keys, keep one unless its expression or its
    # operator template (the operator and bracket tokens, ids > 10) is one already kept; the first 100 kept are
    # the stored rows, in train, val, test order
    task = registry.get_task("listops_subtrees")
    rows = {"inputs": [], "candidate_index": []}
    for split in ("train", "val", "test"):
        for entry in result.manifest["splits"][split]["shards"]:
            with h5py.File(result.path / entry["path"], "r") as h5:
                for k in rows:
                    rows[k].append(h5[k][...])
    inputs, cand = np.concatenate(rows["inputs"]), np.concatenate(rows["candidate_index"])
    regenerated = task.generate(config, keys_for(task.name, task.version, config.to_dict(), 0, "candidates",
                                                 0, 300))
    kept, expressions, templates = [], set(), set()
    for c, (row, length) in enumerate(zip(regenerated["inputs"], regenerated["lengths"], strict=True)):
        expression = row[:length]
        template = expression[expression > 10]
        if expression.tobytes() not in expressions and template.tobytes() not in templates:
            kept.append(c)
            expressions.add(expression.tobytes())
            templates.add(template.tobytes())
    assert cand.tolist() == kept[:100] and kept[99] > 164  # past the first stream of n + 64 candidates
    assert np.array_equal(regenerated["inputs"][cand], inputs)
    assert verify_dataset(result.path, deep=True).ok


def test_a_sidecar_for_other_rows_is_not_a_finished_shard(tmp_path):
    """The old partial candidate shard [160, 164) must not pass for the grown one [160, 176)."""
    _, config, _ = resolve_config("shift", length=64)
    result = generate_dataset("shift", config, out=tmp_path, n=24, samples_per_shard=8, shard_index=0,
                              num_shards=1)
    first = shards.ShardSpec("train", 0, 3, 0, 8)
    assert shards.shard_done(result.path, first) is not None
    assert shards.shard_done(result.path, shards.ShardSpec("train", 0, 3, 0, 7)) is None
    assert shards.shard_done(result.path, shards.ShardSpec("train", 0, 3, 1, 8)) is None


# --- 2. Runs sharing a folder -----------------------------------------------------------------------------------

def test_a_plain_run_leaves_a_live_runs_temporary_alone_and_waits_for_its_shard(tmp_path):
    """A run holding shard 1's lock (as a job-array job writing it) keeps its temporary while a plain run starts,
    resumes and finalizes; once the lock is free, the plain run writes shard 1 and removes the stale file."""
    from filelock import FileLock

    from ssmbench.data.make.ownership import lock_path

    _, config, _ = resolve_config("shift", length=64)
    generate_dataset("shift", config, out=tmp_path, n=30, samples_per_shard=8, shard_index=0, num_shards=2)
    folder = tmp_path / "shift-64"
    shard = shards.ShardSpec("train", 1, 3, 8, 16)  # the second job's first shard: not written yet
    live = folder / f"{shard.relpath}.tmp.{uuid.uuid4().hex}"
    live.write_bytes(b"being written")
    lock_path(folder, shard).parent.mkdir(parents=True, exist_ok=True)
    held, seen = threading.Event(), []

    def hold_then_release() -> None:  # another thread, as filelock refuses a second holder in one thread
        with FileLock(str(lock_path(folder, shard))):
            held.set()
            time.sleep(1.0)
            seen.append(live.exists())  # while the plain run waits for the shard

    holder = threading.Thread(target=hold_then_release)
    holder.start()
    held.wait()
    result = generate_dataset("shift", config, out=tmp_path, n=30, samples_per_shard=8)
    holder.join()
    assert seen == [True]
    assert result.finalized and not temporaries(folder) and not (folder / ".build").exists()
    assert verify_dataset(folder).ok


def test_the_sweep_deletes_only_temporaries_no_live_run_owns(tmp_path):
    from filelock import FileLock

    from ssmbench.data.make.ownership import lock_path, sweep_temporaries

    a, b = shards.ShardSpec("train", 0, 2, 0, 4), shards.ShardSpec("train", 1, 2, 4, 8)
    (tmp_path / "train").mkdir()
    live, stale = (tmp_path / f"{a.relpath}.tmp.aa"), (tmp_path / f"{b.relpath}.tmp.bb")
    mine, other = tmp_path / "manifest.json.tmp.cc", tmp_path / "notes.txt.tmp.dd"
    for path in (live, stale, mine, other):
        path.write_bytes(b"x")
    lock_path(tmp_path, a).parent.mkdir(parents=True)
    with FileLock(str(lock_path(tmp_path, a))):
        assert sweep_temporaries(tmp_path, frozenset({"manifest.json"})) == 2
    assert live.exists() and other.exists() and not stale.exists() and not mine.exists()


@pytest.mark.parametrize("first", ["job-array", "plain"])
def test_two_concurrent_runs_into_one_folder_both_succeed(tmp_path, first, cli):
    """Started together, two runs race for every shard: each writes some, waits for the other's, and one
    finalizes; neither may fail on a temporary the other deleted (as both did before shards had owners)."""
    job = ["--shard-index", "0", "--num-shards", "1"] if first == "job-array" else []
    runs = [cli("generate", *SHARED, "--out", str(tmp_path), "-q", "--json", *job),
            cli("generate", *SHARED, "--out", str(tmp_path), "-q", "--json")]
    written = []
    for proc in runs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
        assert err == ""
        written.append(json.loads(out)["shards_written"])
    assert sum(written) >= 20  # every shard written once at least (twice only if both found it missing)
    folder = tmp_path / "shift-1024"
    assert not temporaries(folder) and not (folder / ".build").exists()
    assert verify_dataset(folder).ok
    assert digest(folder) == build_here(SHARED, tmp_path / "one").manifest["content_digest"]


def test_a_temporary_deleted_under_a_writer_is_written_again(tmp_path, monkeypatch):
    """Another process (an older ssmbench, a clean-up script) deletes the temporary being written: the shard job
    treats it as someone else's file and writes the shard once more."""
    from ssmbench.data.make import generate as build

    real = build.write_shard
    calls = []

    def write_shard(root, shard, fields, make_rows, *args, **kwargs):
        calls.append(shard.relpath)

        def rows(lo, hi):
            if len(calls) == 1:  # first attempt: someone removes the file under the writer
                for tmp in (root / shard.relpath).parent.glob("*.tmp.*"):
                    tmp.unlink()
            return make_rows(lo, hi)

        return real(root, shard, fields, rows, *args, **kwargs)

    monkeypatch.setattr(build, "write_shard", write_shard)
    _, config, _ = resolve_config("shift", length=64)
    result = generate_dataset("shift", config, out=tmp_path, n=8, samples_per_shard=8, split={"train": 1.0})
    assert calls == ["train/shard-00000-of-00001.h5"] * 2
    assert verify_dataset(result.path).ok


# --- 3. Ctrl-C and parent death ---------------------------------------------------------------------------------

# One worker (3 s) is slow, in CI's `pytest -m slow`: two workers take the same path and the workers' one too.
@pytest.mark.parametrize("workers, sig", [pytest.param("1", signal.SIGINT, marks=pytest.mark.slow),
                                          ("2", signal.SIGINT), ("2", signal.SIGTERM)],
                         ids=["1-SIGINT", "2-SIGINT", "2-SIGTERM"])
def test_ctrl_c_stops_with_one_line_and_130_and_the_same_command_continues(tmp_path, workers, sig, cli):
    """Also SIGTERM (a scheduler's or `kill`'s): the same line and status as Ctrl-C, as `ssmbench get` (it exited 143
    with no word, issue 37)."""
    proc = cli("generate", *INTERRUPTIBLE, "--out", str(tmp_path), "-q", "--workers", workers)
    folder = tmp_path / "shift-1024"
    wait_for(lambda: any((folder / ".build" / "train").glob("*.json")))
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 130, err
    assert LINE.match(err.strip()) and err.count("\n") == 1, err  # one line: no traceback, no "Exception ignored"
    assert 1 <= int(LINE.match(err.strip()).group(1)) < 60 and out == ""
    assert not temporaries(folder) and not (folder / "manifest.json").exists()
    again = build_here(INTERRUPTIBLE, tmp_path)  # the same build, here to save an interpreter start
    assert again.finalized and again.shards_skipped >= int(LINE.match(err.strip()).group(1))
    assert verify_dataset(folder).ok


def marked_processes(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"SSMBENCH_TEST_MARK={marker}".encode() in \
                    (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the workers through /proc")
def test_workers_exit_when_the_build_process_is_killed(tmp_path, cli):
    marker = uuid.uuid4().hex
    proc = cli("generate", *INTERRUPTIBLE, "--out", str(tmp_path), "-q", "--workers", "2",
               env={"SSMBENCH_TEST_MARK": marker})
    wait_for(lambda: any((tmp_path / "shift-1024" / ".build" / "train").glob("*.json")))
    assert len(marked_processes(marker)) >= 3  # the build, its forkserver, two workers (and a resource tracker)
    proc.kill()
    proc.wait(timeout=600)
    wait_for(lambda: not marked_processes(marker), timeout=300)
    again = build_here(INTERRUPTIBLE, tmp_path)  # the killed workers' temporaries are stale: removed on the way
    assert again.finalized and not temporaries(again.path) and verify_dataset(again.path).ok


def test_a_second_ctrl_c_is_not_needed_and_the_handler_is_restored():
    before = signal.getsignal(signal.SIGINT)
    with jobs.interrupts():
        os.kill(os.getpid(), signal.SIGINT)  # deferred: nothing is raised here
        with pytest.raises(KeyboardInterrupt):
            jobs.check_interrupt()
    assert signal.getsignal(signal.SIGINT) is before
    jobs.check_interrupt()  # outside a build: no stale request


# --- 4. A full disk -----------------------------------------------------------------------------------------------

def run_cli_here(args: list[str], capsys) -> tuple[int, str]:
    from ssmbench.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(args)
    return exit_.value.code, capsys.readouterr().err


def test_too_little_free_space_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    import shutil

    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=100_000))
    code, err = run_cli_here(["generate", "shift", "--length", "1024", "--n", "400", "--out", str(tmp_path), "-q"],
                             capsys)
    assert code == 1
    assert re.fullmatch(rf"error: not enough free space for {re.escape(str(tmp_path))}/shift-1024: about "
                        r"[\d.]+ MiB needed, 97\.7 KiB free; free some space or choose another --out\n", err), err
    assert not (tmp_path / "shift-1024").exists()


@pytest.mark.parametrize("code,reason", [(errno.ENOSPC, "no space left on device"),
                                         (errno.EDQUOT, "disk quota exceeded")])
def test_a_full_disk_while_writing_is_one_line_and_leaves_no_partial_shard(tmp_path, monkeypatch, capsys, code,
                                                                           reason):
    real, calls = shards.row_hashes, []

    def row_hashes(block):  # the third block's write fails as HDF5 does on a full disk (errno in the message)
        calls.append(1)
        if len(calls) == 3:
            raise OSError(errno.EIO, f"Can't write data (file write failed: errno = {code}, error message = "
                                     f"'{os.strerror(code)}')")
        return real(block)

    monkeypatch.setattr(shards, "row_hashes", row_hashes)
    args = ["generate", "shift", "--length", "64", "--n", "40", "--samples-per-shard", "8", "--out", str(tmp_path),
            "-q"]
    exit_code, err = run_cli_here(args, capsys)
    folder = tmp_path / "shift-64"
    assert exit_code == 1
    assert re.fullmatch(rf"error: {reason} while writing {re.escape(str(folder))}: it needs about [\d.]+ KiB "
                        r"more to finish \([\d.]+ [KMGT]?i?B free\); free some space or choose another --out, then "
                        r"re-run the same command\n", err), err
    assert not temporaries(folder)
    assert sorted(p.name for p in (folder / "train").iterdir()) == ["shard-00000-of-00004.h5",
                                                                     "shard-00001-of-00004.h5"]
    monkeypatch.setattr(shards, "row_hashes", real)
    assert run_cli_here(args, capsys)[0] == 0
    _, config, _ = resolve_config("shift", length=64)
    clean = generate_dataset("shift", config, out=tmp_path / "clean", n=40, samples_per_shard=8)
    assert digest(folder) == clean.manifest["content_digest"] and verify_dataset(folder).ok


# --- 5. Small files -----------------------------------------------------------------------------------------------

def test_atomic_write_leaves_no_temporary_and_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    target.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        shards.atomic_write_bytes(target, b"new")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="names fsynced descriptors through /proc")
def test_every_file_of_a_shard_and_its_folders_are_fsynced(tmp_path, monkeypatch):
    synced, real = [], os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    _, config, _ = resolve_config("shift", length=64)
    generate_dataset("shift", config, out=tmp_path, n=8, samples_per_shard=8, split={"train": 1.0},
                     shard_index=0, num_shards=1)
    names = [re.sub(r"\.tmp\.[0-9a-f]+$", ".tmp", Path(p).name) for p in synced]
    for name in ("shard-00000-of-00001.h5.tmp", "shard-00000-of-00001.rows.npy.tmp", "shard-00000-of-00001.json.tmp",
                 "plan.json.tmp"):
        assert name in names, names
    folder = tmp_path / "shift-64"
    for directory in (folder / "train", folder / ".build", folder / ".build" / "train"):
        assert str(directory) in synced, synced


# --- 6. The writer checks blocks and hashes what it stores --------------------------------------------------------

@pytest.fixture
def wide_floats(monkeypatch):
    """A plug-in task whose generate returns float64 for a field its Spec declares float32."""
    from plugin_tasks import Residues, ResiduesConfig
    from ssmbench.api import Field

    class WideFloats(Residues):
        name = "wide_floats"

        def spec(self, config):
            spec = super().spec(config)
            return type(spec)(**{**spec.__dict__, "fields": {**spec.fields, "inputs": Field(
                "float32", (config.L,), "the residue as a float", codec="gzip:4")}})

        def generate(self, config, keys):
            rows = super().generate(config, keys)
            return {**rows, "inputs": rows["inputs"].astype(np.float64)}

    table = dict(registry.tasks._load_table())
    table["wide_floats"] = ("test:WideFloats", "(test plug-in)")
    monkeypatch.setattr(registry.tasks, "_entries", table)
    monkeypatch.setitem(registry.tasks._cache, "wide_floats", WideFloats)
    return ResiduesConfig()


def test_a_block_of_the_wrong_dtype_is_refused_naming_the_field(tmp_path, wide_floats):
    with pytest.raises(SsmbenchError, match=r"task 'wide_floats' returned float64 for field 'inputs', but its "
                                            r"Spec declares float32"):
        generate_dataset("wide_floats", wide_floats, out=tmp_path, n=8, samples_per_shard=8)
    assert not temporaries(tmp_path) and not list(tmp_path.rglob("*.h5"))


def test_a_block_of_the_wrong_shape_is_refused_naming_the_field(tmp_path):
    from ssmbench.api import Field

    fields = {"x": Field("float32", (4,), "x"), "sample_id": shards.SAMPLE_ID}
    with pytest.raises(SsmbenchError, match=r"returned shape \(2, 5\) for field 'x' \(2 samples\), but its Spec "
                                            r"declares \(2, 4\)"):
        shards.write_shard(tmp_path, shards.ShardSpec("train", 0, 1, 0, 2), fields,
                           lambda lo, hi: {"x": np.zeros((hi - lo, 5), np.float32)}, {"task": "t"}, {}, 2)
    assert not list(tmp_path.rglob("*.h5*"))


def test_recorded_hashes_are_those_of_the_bytes_read_back(tiny_shift):
    manifest = json.loads((tiny_shift / "manifest.json").read_text())
    rows_all = hashlib.sha256()
    for split in ("train", "val", "test"):
        for entry in manifest["splits"][split]["shards"]:
            with h5py.File(tiny_shift / entry["path"], "r") as h5:
                data = {k: h5[k][...] for k in h5 if k != "fixed"}
            for name, arr in data.items():
                prefix = f"{arr.dtype.str}|{','.join(map(str, arr.shape))}|".encode()
                assert entry["content_sha256"][name] == hashlib.sha256(prefix + arr.tobytes()).hexdigest()
            for i in range(len(data["sample_id"])):
                h = hashlib.sha256()
                for name in sorted(data):
                    row = data[name][i]
                    shape = ",".join(map(str, row.shape)) or "1"  # a per-sample scalar hashes as shape (1,)
                    h.update(f"{row.dtype.str}|{shape}|".encode() + row.tobytes())
                rows_all.update(h.digest())
    assert manifest["content_digest"] == rows_all.hexdigest()


# --- 7. Numba SVML ------------------------------------------------------------------------------------------------

def test_svml_is_disabled_whatever_the_import_order_and_recorded(tmp_path, tiny_shift):
    code = ("import numba, sys, json\n"  # numba first, without the variable set
            "from ssmbench.data.make.generate import generate_dataset\n"
            "from ssmbench.task_config import resolve_config\n"
            "_, c, _ = resolve_config('shift', length=64)\n"
            "r = generate_dataset('shift', c, out=sys.argv[1], n=40, samples_per_shard=8)\n"
            "print(json.dumps([r.manifest['environment'], r.manifest['content_digest'],\n"
            "                  numba.core.config.DISABLE_INTEL_SVML]))")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_INTEL_SVML"}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    environment, content, disabled = json.loads(done.stdout)
    assert environment["NUMBA_DISABLE_INTEL_SVML"] == "1" and disabled == 1
    assert content == digest(tiny_shift)


def test_a_process_with_svml_already_on_generates_in_fresh_workers(tmp_path, monkeypatch):
    import numba

    monkeypatch.setattr(numba.config, "USING_SVML", True, raising=False)
    routed = []

    def pool(fn, job_list, workers, on_done):
        routed.append(workers)
        raise RuntimeError("routed to the pool")

    monkeypatch.setattr(jobs, "_run_pool", pool)
    _, config, _ = resolve_config("shift", length=64)
    with pytest.raises(RuntimeError, match="routed to the pool"):
        generate_dataset("shift", config, out=tmp_path, n=8, samples_per_shard=8, workers=1)
    assert routed == [1]


def test_the_test_command_needs_no_svml_variable(tmp_path):
    """`pytest` without NUMBA_DISABLE_INTEL_SVML in its environment (the README's command; `.ci/run` exports it):
    tests/conftest.py sets it before any test module imports Numba, so a module that imports Numba first (as
    tests/generators/test_pathfinder.py does) compiles without SVML (which changes the golden bytes where `icc_rt`
    is installed)."""
    root = REPO
    probe = tmp_path / "test_numba_first.py"
    probe.write_text("import numba\n\n\ndef test_no_svml():\n    assert numba.config.DISABLE_INTEL_SVML == 1\n"
                     "    assert not numba.config.USING_SVML\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_INTEL_SVML"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                           str(root / "pyproject.toml"), "--rootdir", str(root), str(probe),
                           str(root / "tests" / "conftest.py"), "-k", "test_no_svml"],
                          capture_output=True, text=True, cwd=root, env={**env, "PYTHONSAFEPATH": "1"}, timeout=600)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
