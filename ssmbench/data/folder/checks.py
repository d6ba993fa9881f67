"""Cheap checks of a dataset folder against its manifest, before anything is read (`stat` only).

`check_folder` refuses, in one line naming the fix, a folder of another task, configuration or task version, a
split that is missing, shards whose sample ranges are not contiguous or do not cover the split, shards that lead
out of the folder (a symlink elsewhere: `safe_paths.UnsafePathError`, exit 3), and shards that are missing or of
the wrong size (`DamagedDataError`, exit 3, as `ssmbench verify`). Shards that `ssmbench download
--split/--include` left out on purpose are listed in `.download.json` (`absent_by_selection`) and named as such.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import DatasetError, VerificationError
from .manifest import FORMAT_VERSION, Manifest
from .safe_paths import inside

__all__ = ["DamagedDataError", "absent_by_selection", "check_folder", "regenerate_hint"]


class DamagedDataError(DatasetError, VerificationError):
    """A shard that is missing, of the wrong size, fails its sha256 or cannot be decoded: exit 3, as `ssmbench
    verify` (a VerificationError), still caught by `except DatasetError` as before."""

    exit_code = 3


def absent_by_selection(root: Path) -> set[str]:
    """Shard paths that `ssmbench download --split/--include` left out of this folder on purpose."""
    record = root / ".download.json"
    if not record.exists():
        return set()
    try:
        return set(json.loads(record.read_text()).get("absent", []))
    except ValueError:
        return set()


def regenerate_hint(manifest: Manifest) -> str:
    """"regenerate it with the installed ssmbench: ssmbench generate ..." from the manifest's recorded command."""
    argv = (manifest.command or {}).get("argv") or ["generate", str(manifest.task)]
    return "regenerate it with the installed ssmbench: ssmbench " + " ".join(argv)


def check_folder(root: Path, manifest: Manifest, split: str | Sequence[str], expect_task: str | None = None,
                 expect_config: Mapping[str, Any] | None = None) -> None:
    """Refuse (DatasetError) a folder whose split (or any of several splits) is missing shards or has shards of the
    wrong size, or that belongs to another task, configuration or task version. Cheap: `stat` only."""
    from ...registry import tasks

    if manifest.format != FORMAT_VERSION:
        raise DatasetError(f"{root} has manifest format {manifest.format!r}; this ssmbench reads format "
                           f"{FORMAT_VERSION}", "upgrade ssmbench")
    task = manifest.task
    if expect_task is not None and task != tasks.canonical(expect_task):
        raise DatasetError(f"{root} holds task {task!r}, not {expect_task!r}",
                           f"pass a {expect_task} folder (ssmbench generate {expect_task} ...)")
    for key, value in (expect_config or {}).items():
        if manifest.config.get(key) != value:
            raise DatasetError(f"{root} has {key} = {manifest.config.get(key)!r}, not {value!r}",
                               f"pass a folder built with {key} = {value!r}")
    if task not in tasks:
        raise DatasetError(f"{root} holds task {task!r}, which is not installed",
                           "install the plug-in that provides it")
    installed = str(tasks.get(task).version)
    if manifest.version != installed:
        raise DatasetError(f"{root} was made by {task} version {manifest.task_version}, the installed {task} is "
                           f"version {installed}, so its samples differ from what this code generates",
                           regenerate_hint(manifest))
    left_out = absent_by_selection(root)
    for one in [split] if isinstance(split, str) else split:
        _check_split(root, manifest, one, left_out)


def _check_split(root: Path, manifest: Manifest, split: str, left_out: set[str]) -> None:
    """The shards of one split: present, contiguous, of the manifest's sizes."""
    if split not in manifest.splits:
        raise DatasetError(f"{root} has no split {split!r} (it has {', '.join(manifest.splits)})",
                           "pass one of those as split=")
    info = manifest.splits[split]
    start = 0
    for shard in info.shards:
        if shard.sample_start != start:
            raise DatasetError(f"{root}/manifest.json: {shard.path} starts at sample {shard.sample_start}, "
                               f"expected {start}", "re-download or regenerate the dataset")
        start = shard.sample_stop
        file = inside(root, shard.path, "shard")  # a symlink out of the folder is refused, not followed
        if not file.is_file():
            if shard.path in left_out:
                raise DatasetError(f"{root}: {shard.path} was left out by a partial download",
                                   f"fetch the {split} split: ssmbench download {manifest.name or root.name} "
                                   f"--split {split} --to {root.parent}")
            raise DamagedDataError(f"{root}: shard {shard.path} is missing",
                                   hint=f"run `ssmbench verify {root}`, then re-download or regenerate the dataset")
        if file.stat().st_size != shard.num_bytes:
            raise DamagedDataError(f"{root}: {shard.path} has {file.stat().st_size} bytes, the manifest says "
                                   f"{shard.num_bytes} (truncated or replaced)",
                                   hint=f"run `ssmbench verify {root}`, then re-download or regenerate the dataset")
    if start != info.num_samples:
        raise DatasetError(f"{root}/manifest.json: the {split} shards cover {start} samples, the split has "
                           f"{info.num_samples}", "re-download or regenerate the dataset")
