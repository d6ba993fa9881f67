"""Verify a dataset folder against its manifest: checksums and structure, then (deep) contents and oracles.

Levels (README: The dataset folder): the default checks every listed file's size and sha256, unlisted shards,
contiguous sample ranges and each shard's datasets and root attributes (metadata only). `deep` also decodes every
chunk (fletcher32 fires on corruption), recomputes the per-field content hashes and the content digest, runs the
task's oracle on a few rows per split, and regenerates `regenerate` samples to compare bytes.

A shard or file path that leads out of the folder (`../x.h5` in the manifest, or a symlink to a file elsewhere) is
refused (`ssmbench.data.folder.safe_paths`): a problem at every level, exit 3, and the file is never read.

A folder made by `ssmbench download --split/--include` lists the shards it left out in `.download.json`; those are
reported as absent (not as missing), and every level checks what is present.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import VerificationError
from ...plain import file_sha256
from ..folder.checks import absent_by_selection
from ..folder.manifest import Manifest, ShardInfo, load_manifest
from ..folder.safe_paths import UnsafePathError, inside
from ..folder.splits import SPLIT_ORDER
from ..make.preview import PREVIEW_FILE, preview_problem
from ..make.shards import content_prefix, row_hashes


@dataclass
class VerifyReport:
    path: str
    level: str
    checked_files: int = 0
    checked_samples: int = 0
    oracle_rows: int = 0
    regenerated: int = 0
    problems: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)  # shards a partial download left out on purpose

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "level": self.level, "ok": self.ok, "checked_files": self.checked_files,
                "checked_samples": self.checked_samples, "oracle_rows": self.oracle_rows,
                "regenerated": self.regenerated, "problems": self.problems, "absent": self.absent}


def _check_attrs(h5: Any, manifest: Manifest, split: str, shard: ShardInfo, problems: list[str]) -> None:
    expected = {"task": manifest.task, "task_version": manifest.task_version,
                "config_sha256": manifest.config_sha256, "split": split,
                "sample_start": shard.sample_start, "sample_stop": shard.sample_stop,
                "root_seed": (manifest.seeding or {}).get("root_seed")}
    for key, value in expected.items():
        got = h5.attrs.get(key)
        got = got.item() if hasattr(got, "item") else got
        if got != value:
            problems.append(f"{shard.path}: attribute {key} is {got!r}, manifest says {value!r}")
    n = shard.num_samples
    for name, f in manifest.spec["fields"].items():
        if name not in h5:
            problems.append(f"{shard.path}: dataset {name!r} is missing")
            continue
        d = h5[name]
        if d.dtype != np.dtype(f["dtype"]) or d.shape != (n, *f["shape"]):
            problems.append(f"{shard.path}: {name} is {d.dtype}{d.shape}, expected {f['dtype']}{(n, *f['shape'])}")


def verify_dataset(path: str | Path, deep: bool = False, regenerate: int | None = None, oracle_rows: int = 4,
                   seed: int = 0, hashed: Collection[str] = (), workers: int = 1) -> VerifyReport:
    """Check a dataset folder; returns a report (raise_for=False) with every problem found.

    `hashed` names files whose sha256 the caller has just checked against this manifest while writing them
    (a download hashes as it streams); their size is still checked, their bytes are not read a second time.
    `workers` > 1 decodes the shards of a deep check in that many processes (the report is the same: shards are
    checked independently and their row hashes joined in manifest order).
    """
    import h5py
    import hdf5plugin  # noqa: F401  (registers the Zstd filter: repacked copies decode too)

    root = Path(path)
    manifest = load_manifest(root)
    regenerate = (8 if deep else 0) if regenerate is None else regenerate
    report = VerifyReport(str(root), "deep" if deep else "default")
    listed = set()
    left_out = absent_by_selection(root)
    for split in SPLIT_ORDER:
        info = manifest.splits[split]
        expected_start = 0
        for shard in info.shards:
            listed.add(shard.path)
            if shard.sample_start != expected_start:
                report.problems.append(f"{shard.path}: sample range starts at {shard.sample_start}, "
                                       f"expected {expected_start}")
            expected_start = shard.sample_stop
            try:
                file = inside(root, shard.path, "shard")
            except UnsafePathError as exc:  # a symlink out of the folder: never followed
                report.problems.append(exc.message.removeprefix(f"{root}: "))
                continue
            if not file.exists():
                if shard.path in left_out:
                    report.absent.append(shard.path)
                else:
                    report.problems.append(f"{shard.path}: missing")
                continue
            if file.stat().st_size != shard.num_bytes:
                report.problems.append(f"{shard.path}: {file.stat().st_size} bytes, manifest says "
                                       f"{shard.num_bytes} (truncated or replaced)")
                continue
            if shard.path not in hashed and file_sha256(file) != shard.sha256:
                report.problems.append(f"{shard.path}: sha256 mismatch (corrupted)")
                continue
            report.checked_files += 1
            try:
                with h5py.File(file, "r", locking=False) as h5:
                    _check_attrs(h5, manifest, split, shard, report.problems)
            except OSError as exc:
                report.problems.append(f"{shard.path}: cannot be opened as HDF5 ({exc})")
        if expected_start != info.num_samples:
            report.problems.append(f"{split}: shards cover {expected_start} samples, manifest says {info.num_samples}")
    for file in root.glob("*/*.h5"):
        rel = file.relative_to(root).as_posix()
        if rel not in listed:
            report.problems.append(f"{rel}: not listed in manifest.json")
    for f in manifest.files or []:
        try:
            p = inside(root, f["path"], "file")
        except UnsafePathError as exc:
            report.problems.append(exc.message.removeprefix(f"{root}: "))
            continue
        if not p.exists() or (f["path"] not in hashed and file_sha256(p) != f["sha256"]):
            report.problems.append(preview_problem(root) if f["path"] == PREVIEW_FILE else
                                   f"{f['path']}: missing or sha256 mismatch")
        else:
            report.checked_files += 1
    if deep and not report.problems:
        _deep(root, manifest, report, oracle_rows, workers)
    if regenerate and not report.problems:
        _regenerate(root, manifest, report, regenerate, seed)
    return report


def _deep(root: Path, manifest: Manifest, report: VerifyReport, oracle_rows: int, workers: int = 1) -> None:
    from ..make.jobs import run_jobs

    absent = set(report.absent)
    jobs = [{"file": str(root / shard.path), "rel": shard.path, "content_sha256": shard.content_sha256 or {},
             "task": manifest.task, "config": manifest.config, "oracle_rows": oracle_rows}
            for split in SPLIT_ORDER for shard in manifest.shards(split) if shard.path not in absent]
    results: list[dict[str, Any]] = [{}] * len(jobs)

    def done(index: int, result: dict[str, Any]) -> None:
        results[index] = result

    run_jobs(_deep_shard, jobs, workers, done)
    digest = hashlib.sha256()
    for r in results:  # manifest order, whatever order the workers finished in
        report.problems.extend(r["problems"])
        digest.update(r["row_hashes"])
        report.checked_samples += r["samples"]
        report.oracle_rows += r["oracle_rows"]
    if not report.problems and not absent and digest.hexdigest() != manifest.content_digest:
        report.problems.append("content_digest differs from the manifest")


@functools.lru_cache(maxsize=4)
def _task_and_config(task_name: str, config_json: str) -> tuple[Any, Any]:
    from ...registry import get_task
    from ...task_config import from_plain

    task = get_task(task_name)
    return task, from_plain(task, json.loads(config_json))


def _deep_shard(file: str, rel: str, content_sha256: dict[str, str], task: str, config: dict[str, Any],
                oracle_rows: int, progress: Any = None) -> dict[str, Any]:
    """Decode one shard, check its per-field content hashes and the oracle on its first rows (a worker's job)."""
    import h5py
    import hdf5plugin  # noqa: F401  (a worker decodes Zstd shards too)

    out: dict[str, Any] = {"problems": [], "row_hashes": b"", "samples": 0, "oracle_rows": 0}
    try:
        with h5py.File(file, "r", locking=False) as h5:
            block = {k: h5[k][...] for k in content_sha256}
    except OSError as exc:  # fletcher32 or decompression failure
        out["problems"].append(f"{rel}: a chunk failed to decode ({exc})")
        return out
    for name, expected in content_sha256.items():
        a = np.ascontiguousarray(block[name])
        if hashlib.sha256(content_prefix(a.dtype, a.shape) + a.tobytes()).hexdigest() != expected:
            out["problems"].append(f"{rel}: content of {name} differs from the manifest")
    out["row_hashes"] = row_hashes(block).tobytes()
    out["samples"] = len(block["sample_id"])
    task_obj, cfg = _task_and_config(task, json.dumps(config, sort_keys=True))
    for i in range(min(oracle_rows, len(block["sample_id"]))):
        row = {k: v[i] for k, v in block.items()}
        for name, want in task_obj.oracle(cfg, row).items():
            if not np.allclose(np.asarray(row[name], dtype=np.float64), np.asarray(want, dtype=np.float64),
                               rtol=1e-5, atol=1e-6):
                out["problems"].append(f"{rel} row {i}: stored {name} disagrees with the oracle")
        out["oracle_rows"] += 1
    return out


def _regenerate(root: Path, manifest: Manifest, report: VerifyReport, k: int, seed: int) -> None:
    import h5py

    from ...registry import get_task
    from ...seeding import keys_for
    from ...task_config import from_plain

    task = get_task(manifest.task)
    if task.deduplicate:
        return  # rows come from a de-duplicated candidate stream; content hashes cover them instead
    config = from_plain(task, manifest.config)
    rng = np.random.default_rng(seed)
    shards = [(s, sh) for s in SPLIT_ORDER for sh in manifest.shards(s) if sh.path not in report.absent]
    if not shards:
        return
    for _ in range(k):
        split, shard = shards[int(rng.integers(len(shards)))]
        i = int(rng.integers(shard.sample_start, shard.sample_stop))
        fresh = task.generate(config, keys_for(manifest.task, manifest.task_version, manifest.config,
                                               (manifest.seeding or {})["root_seed"], split, i, i + 1,
                                               task.stream_exempt))
        with h5py.File(root / shard.path, "r", locking=False) as h5:
            for name, arr in fresh.items():
                if not np.array_equal(h5[name][i - shard.sample_start], arr[0]):
                    hint = ("" if task.version == manifest.task_version else
                            f" (installed {manifest.task} is version {task.version}, dataset has "
                            f"{manifest.task_version})")
                    report.problems.append(f"{split}[{i}]: regenerated {name} differs{hint}")
        report.regenerated += 1


def raise_for(report: VerifyReport) -> None:
    if report.problems:
        raise VerificationError(f"{report.path}: {len(report.problems)} problem(s); first: {report.problems[0]}",
                                report.problems)
