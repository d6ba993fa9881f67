"""`manifest.json`, the contract of a dataset folder, as typed objects: `Manifest`, `SplitInfo`, `ShardInfo`.

Readers trust the manifest, not directory listings; every shard and file path it names must be a plain relative
path (`ssmbench.data.folder.safe_paths`: no `..`, absolute or drive paths, backslashes), or it is refused (exit 3). `load_manifest(folder)` reads and checks it (a one-line
`DatasetError` for a missing folder, a folder still being built, invalid JSON or a manifest without the keys every
reader needs); `Manifest.to_json()` gives back the very object it was made from, so `dump_manifest` writes the same
bytes the builder wrote (`json_bytes`: indented by 2, keys sorted). Keys this module does not know (a build's
`deduplication` block, `repacked_from`, ...) travel along in `extra`.

Example (a hand-made manifest of one train shard):

    >>> m = Manifest.from_json({"format": 1, "task": "shift", "task_version": "1", "config": {"L": 64},
    ...     "spec": {"fields": {}}, "name": "shift-64", "repacked_from": "ab12",
    ...     "splits": {"train": {"num_samples": 8, "shards": [{"path": "train/shard-00000-of-00001.h5",
    ...                                                        "sample_start": 0, "sample_stop": 8}]}}})
    >>> m.splits["train"].shards[0].path, m.splits["train"].num_samples, m.name, m.extra
    ('train/shard-00000-of-00001.h5', 8, 'shift-64', {'repacked_from': 'ab12'})
    >>> m.to_json()["splits"]["train"]["shards"][0]
    {'path': 'train/shard-00000-of-00001.h5', 'sample_start': 0, 'sample_stop': 8}
    >>> Manifest.from_json({"format": 1}, "data/x/manifest.json")
    Traceback (most recent call last):
    ...
    ssmbench.errors.DatasetError: data/x/manifest.json is incomplete (no 'task'): truncated or not an ssmbench manifest
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import DatasetError
from .atomic import atomic_write_json, json_bytes
from .locations import near_names
from .safe_paths import check_relative

__all__ = ["FORMAT_VERSION", "REQUIRED_KEYS", "Manifest", "SplitInfo", "ShardInfo", "read_manifest_json",
           "load_manifest", "dump_manifest", "write_manifest"]

FORMAT_VERSION = 1
REQUIRED_KEYS = ("format", "task", "task_version", "spec", "splits", "config")
"""What every reader needs: a manifest without one of these is truncated, or not an ssmbench manifest."""


def _known(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.name != "extra")


def _plain(obj: Any) -> dict[str, Any]:
    """A dataclass as its JSON object: its known keys (None ones left out, as they were absent), then `extra`."""
    out = {name: getattr(obj, name) for name in _known(type(obj)) if getattr(obj, name) is not None}
    return {**out, **obj.extra}


def _split_off(obj: Mapping[str, Any], cls: type, required: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fields of `cls` in `obj`, the rest). An optional key whose value is null goes with the rest, so that it
    is written back as null (a None field means "absent")."""
    known = set(_known(cls))
    fields = {k: v for k, v in obj.items() if k in known and (v is not None or k in required)}
    return fields, {k: v for k, v in obj.items() if k not in fields}


@dataclass(frozen=True)
class ShardInfo:
    """One shard file of a split: samples [sample_start, sample_stop) of it, and what the file must be."""

    path: str
    sample_start: int
    sample_stop: int
    num_bytes: int | None = None
    sha256: str | None = None
    content_sha256: dict[str, str] | None = None
    rows_sha256: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ShardInfo:
        required = ("path", "sample_start", "sample_stop")
        missing = [key for key in required if key not in obj]
        if missing:
            raise DatasetError(f"a shard entry of the manifest has no {missing[0]!r} ({dict(obj)}): truncated or not "
                               "an ssmbench manifest", "re-download or regenerate the dataset")
        check_relative(obj["path"], "shard path")  # read from outside: it must stay inside the folder
        known, extra = _split_off(obj, cls, required)
        return cls(**known, extra=extra)

    def to_json(self) -> dict[str, Any]:
        return _plain(self)

    @property
    def num_samples(self) -> int:
        return self.sample_stop - self.sample_start


@dataclass(frozen=True)
class SplitInfo:
    """One split: how many samples, in which shards (in sample order). `listed`: whether the manifest has a
    "shards" list at all (a hand-made one may not; it is written back without one)."""

    num_samples: int | None = None
    shards: tuple[ShardInfo, ...] = ()
    listed: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SplitInfo:
        extra = {k: v for k, v in obj.items() if k != "shards" and (k != "num_samples" or v is None)}
        return cls(obj.get("num_samples"), tuple(ShardInfo.from_json(s) for s in obj.get("shards", [])),
                   "shards" in obj, extra)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.num_samples is None else {"num_samples": self.num_samples}
        if self.listed:
            out["shards"] = [s.to_json() for s in self.shards]
        return {**out, **self.extra}


@dataclass(frozen=True)
class Manifest:
    """A dataset folder's manifest.json. `splits` maps train, val and test to `SplitInfo`; the other blocks
    (`spec`, `storage`, `seeding`, `statistics`, `environment`, `command`, `build_identity`, `files`) keep their JSON
    form. Optional keys are None when the manifest has none (a hand-made or older one)."""

    format: int
    task: str
    task_version: str | int
    config: dict[str, Any]
    spec: dict[str, Any]
    splits: dict[str, SplitInfo]
    name: str | None = None
    dataset_id: str | None = None
    ssmbench_version: str | None = None
    config_sha256: str | None = None
    seeding: dict[str, Any] | None = None
    storage: dict[str, Any] | None = None
    content_digest: str | None = None
    files: list[dict[str, Any]] | None = None
    statistics: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    build_identity: dict[str, Any] | None = None
    created_utc: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Any, where: str | Path = "manifest.json") -> Manifest:
        """The typed form of a manifest's JSON object; a DatasetError naming `where` when it lacks a required key."""
        if not isinstance(obj, dict):
            raise DatasetError(f"{where} is not a JSON object: not an ssmbench manifest",
                               "re-download or regenerate the dataset")
        missing = [key for key in REQUIRED_KEYS if key not in obj]
        if missing:
            raise DatasetError(f"{where} is incomplete (no {missing[0]!r}): truncated or not an ssmbench manifest",
                               "re-download or regenerate the dataset")
        known, extra = _split_off(obj, cls, REQUIRED_KEYS)
        for f in known.get("files") or []:
            check_relative(f.get("path") if isinstance(f, dict) else f, "file path")
        splits = {name: SplitInfo.from_json(info) for name, info in known.pop("splits").items()}
        return cls(**known, splits=splits, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The JSON object this manifest was read from (or will be written as)."""
        out = _plain(self)
        out["splits"] = {name: info.to_json() for name, info in self.splits.items()}
        return out

    @property
    def version(self) -> str:
        """`task_version` as text (older manifests wrote a number)."""
        return str(self.task_version)

    def shards(self, split: str) -> tuple[ShardInfo, ...]:
        """The shards of `split` (none when the manifest has no such split)."""
        info = self.splits.get(split)
        return info.shards if info is not None else ()

    def all_shards(self) -> list[ShardInfo]:
        """Every shard of every split, split by split in the manifest's order."""
        return [shard for info in self.splits.values() for shard in info.shards]


def read_manifest_json(path: str | Path) -> dict[str, Any]:
    """The JSON object of `<folder>/manifest.json` (or of a manifest file), unchecked; a one-line DatasetError for
    a folder that does not exist (naming near names beside it), one still being built, or invalid JSON."""
    path = Path(path)
    target = path / "manifest.json" if path.is_dir() or not path.suffix else path
    if not target.exists():
        folder = path if path.is_dir() or not path.suffix else path.parent
        if not folder.exists():
            raise DatasetError(f"{folder} does not exist{near_names(folder)}",
                               "pass a dataset folder made by `ssmbench generate` or `ssmbench download`")
        if path.is_dir() and (path / ".build" / "plan.json").exists():
            raise DatasetError(f"{path} is incomplete: it has no manifest.json yet",
                               "re-run the generate command that built it to finish it")
        raise DatasetError(f"no dataset at {path}: {target.name} not found",
                           "pass a dataset folder made by `ssmbench generate`")
    try:
        obj: dict[str, Any] = json.loads(target.read_text())
    except ValueError as exc:
        raise DatasetError(f"{target} is not valid JSON ({exc})", "re-download or regenerate the dataset") from None
    return obj


def load_manifest(path: str | Path) -> Manifest:
    """The checked `Manifest` of a dataset folder (or of a manifest file); see `read_manifest_json` for refusals."""
    path = Path(path)
    target = path / "manifest.json" if path.is_dir() or not path.suffix else path
    return Manifest.from_json(read_manifest_json(path), target)


def dump_manifest(manifest: Manifest) -> bytes:
    """The bytes of manifest.json, as the builder writes them."""
    return json_bytes(manifest.to_json())


def write_manifest(folder: Path, manifest: Manifest | Mapping[str, Any]) -> None:
    """Write `<folder>/manifest.json` whole or not at all."""
    atomic_write_json(folder / "manifest.json", manifest.to_json() if isinstance(manifest, Manifest) else manifest)
