"""Finalize a dataset folder: collect shard sidecars into manifest.json, write fixed.npy, render the card.

The manifest is the contract: readers trust it, not directory listings.
`content_digest` is a sha256 over every row hash in split and sample order, so it does not depend on shard
boundaries, worker counts or codecs. The `environment` block records the library versions and the Numba SVML
setting the shards were generated under (`NUMBA_DISABLE_INTEL_SVML`, always "1": see jobs.py).
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import __version__
from ...config import config_sha256
from ...errors import DatasetError
from ...plain import file_sha256
from ...registry import get_task
from ...seeding import SEED_SCHEME
from ..folder.atomic import atomic_write_bytes
from ..folder.manifest import FORMAT_VERSION, write_manifest
from ..folder.splits import SPLIT_ORDER
from .provenance import created_utc, environment
from .shards import shard_done, storage_fields

if TYPE_CHECKING:
    from .shards import BuildPlan

SVML_VARIABLE = "NUMBA_DISABLE_INTEL_SVML"


def content_digest(root: Path, plan: BuildPlan) -> str:
    h = hashlib.sha256()
    for shard in plan.shards:
        h.update(np.load(root / shard.rowhashes).tobytes())
    return h.hexdigest()


def merge_statistics(records: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for record in records:
        for key, value in record.get("statistics", {}).items():
            merged[key] = (np.asarray(merged[key]) + np.asarray(value)).tolist() if key in merged else value
    return merged


def finalize(root: Path, plan: BuildPlan, argv: list[str] | None = None, explicit: list[str] | None = None,
             extras: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write manifest.json, fixed.npy, README.md (+ preview.png where the task has one); return the manifest."""
    task = get_task(plan.task)
    from ...task_config import from_plain
    from .command import portable_argv

    config = from_plain(task, plan.config)
    spec = task.spec(config)
    fields = storage_fields(spec, plan.codec)
    splits: dict[str, dict[str, Any]] = {s: {"num_samples": plan.sizes[s], "shards": []} for s in SPLIT_ORDER}
    missing: list[str] = []
    records: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLIT_ORDER}
    for shard in plan.shards:
        record = shard_done(root, shard)
        if record is None:
            missing.append(shard.relpath)
            continue
        records[shard.split].append(record)
        splits[shard.split]["shards"].append({k: record[k] for k in (
            "path", "sample_start", "sample_stop", "num_bytes", "sha256", "content_sha256", "rows_sha256")})
    if missing:
        raise DatasetError(f"cannot finalize {root}: {len(missing)} shard(s) missing or corrupt, "
                           f"e.g. {missing[0]}", "re-run the same generate command to write them")
    files: list[dict[str, Any]] = []
    fixed = task.fixed_arrays(config)
    if fixed:
        (name, arr), = fixed.items()
        buf = io.BytesIO()
        np.save(buf, arr)
        atomic_write_bytes(root / "fixed.npy", buf.getvalue())
        files.append({"path": "fixed.npy", "num_bytes": (root / "fixed.npy").stat().st_size,
                      "sha256": file_sha256(root / "fixed.npy"), "describes": f"fixed/{name}"})
    manifest: dict[str, Any] = {
        "format": FORMAT_VERSION, "name": plan.name, "dataset_id": plan.dataset_id, "task": plan.task,
        "task_version": plan.version, "ssmbench_version": __version__, "config": plan.config,
        "config_sha256": config_sha256(plan.config), "seeding": {"root_seed": plan.seed, "scheme": SEED_SCHEME},
        "spec": spec.to_json(),
        "storage": {"fletcher32": True, "samples_per_shard": plan.samples_per_shard,
                    "libver": ["earliest", "v110"],
                    "fields": {k: {"codec": f.codec, "shuffle": f.shuffle,
                                   "chunk": [plan.samples_per_shard] if f.shape == () else [1, *f.shape]}
                               for k, f in fields.items()}},
        "splits": splits, "content_digest": content_digest(root, plan), "files": files,
        "statistics": {s: merge_statistics(records[s]) for s in SPLIT_ORDER},
        "environment": {**environment(), SVML_VARIABLE: os.environ.get(SVML_VARIABLE, "")},
        "command": {"argv": portable_argv(argv or []), "explicit": list(explicit or [])},
        **(extras or {}),
        "build_identity": plan.identity(),
        "created_utc": created_utc(),
    }
    if task.card_preview:
        from .preview import BUILD_PREVIEW_SAMPLES, PREVIEW_FILE, render_preview

        write_manifest(root, manifest)  # the preview reads the shards through it
        drawn = render_preview(root, n=BUILD_PREVIEW_SAMPLES, out=root / ".build" / PREVIEW_FILE)
        png = root / PREVIEW_FILE
        atomic_write_bytes(png, drawn.read_bytes())  # like every small file: whole, fsynced, or not at all
        drawn.unlink()
        files.append({"path": png.name, "num_bytes": png.stat().st_size, "sha256": file_sha256(png)})
    write_manifest(root, manifest)
    from .cards import write_card

    write_card(root, manifest)
    return manifest


def manifest_sha256(root: Path) -> str:
    return file_sha256(root / "manifest.json")
