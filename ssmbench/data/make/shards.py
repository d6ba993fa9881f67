"""Shard plan, atomic HDF5 shard writing, content hashing and shard reading.

A plan is a pure function of the split sizes and `samples_per_shard`; a shard job writes one HDF5 file to a
temporary name in the same folder, fsyncs, renames it into place, and then writes a sidecar
(`.build/<split>/<shard>.json`, plus the per-row content hashes) atomically. A final file without a matching
sidecar is regenerated, so a killed run leaves nothing that looks complete. Layout and settings:
README, The dataset folder.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...api import Field, Spec
from ...config import Bound, config_sha256
from ...errors import ConfigError, SsmbenchError
from ...plain import file_sha256
from ..folder.atomic import atomic_write_bytes, atomic_write_json, fsync_dir
from ..folder.splits import SPLIT_ORDER

SAMPLE_ID = Field("int64", (), "index of the sample within its split", codec="none")


@dataclass(frozen=True)
class ShardSpec:
    split: str
    index: int
    num_shards: int
    start: int
    stop: int

    @property
    def relpath(self) -> str:
        return f"{self.split}/shard-{self.index:05d}-of-{self.num_shards:05d}.h5"

    @property
    def sidecar(self) -> str:
        return f".build/{self.relpath[:-3]}.json"

    @property
    def rowhashes(self) -> str:
        return f".build/{self.relpath[:-3]}.rows.npy"


@dataclass
class BuildPlan:
    """Everything a shard job needs, picklable for worker processes."""

    task: str
    version: str
    config: dict[str, Any]
    seed: int
    sizes: dict[str, int]
    samples_per_shard: int
    codec: str | None
    name: str
    dataset_id: str
    shards: list[ShardSpec] = field(default_factory=list)

    def identity(self) -> dict[str, Any]:
        """What must match for two runs to write into the same folder."""
        return {"task": self.task, "task_version": self.version, "config_sha256": config_sha256(self.config),
                "root_seed": self.seed, "sizes": self.sizes, "samples_per_shard": self.samples_per_shard,
                "codec": self.codec}


def split_sizes(n: int, split: Mapping[str, float | int]) -> dict[str, int]:
    """Sizes per split from fractions (summing to 1) or counts (summing to n); rounding remainder to train.

    >>> split_sizes(1000, {"train": 0.8, "val": 0.1, "test": 0.1})
    {'train': 800, 'val': 100, 'test': 100}
    >>> split_sizes(7, {"train": 0.8, "val": 0.1, "test": 0.1})
    {'train': 7, 'val': 0, 'test': 0}
    """
    if n < 1:
        raise ConfigError("--n", f"must be at least 1, got {n}")
    unknown = sorted(set(split) - set(SPLIT_ORDER))
    if unknown:
        raise ConfigError("--split", f"unknown split {unknown[0]!r}; use train, val and test")
    values = [split.get(s, 0) for s in SPLIT_ORDER]
    if any(v < 0 for v in values):
        raise ConfigError("--split", "fractions and counts must be non-negative")
    if all(float(v).is_integer() and v >= 1 for v in values if v) and sum(values) == n and any(v > 1 for v in values):
        return {s: int(v) for s, v in zip(SPLIT_ORDER, values, strict=True)}
    total = float(sum(values))
    if abs(total - 1.0) > 1e-9:
        raise ConfigError("--split", f"fractions must sum to 1 (or counts to --n = {n}); got a sum of {total:g}")
    sizes = {s: int(np.floor(n * v + 1e-9)) for s, v in zip(SPLIT_ORDER, values, strict=True)}
    sizes["train"] += n - sum(sizes.values())
    return sizes


def parse_split(text: str) -> dict[str, float]:
    """"train=0.8,val=0.1,test=0.1" (fractions or counts) -> mapping.

    >>> parse_split("train=0.8, val=0.1,test=0.1")
    {'train': 0.8, 'val': 0.1, 'test': 0.1}
    """
    from ...config import parse_overrides

    bad = ConfigError("--split", f"expected name=value pairs like train=0.8,val=0.1,test=0.1; got {text!r}")
    try:
        return {name: float(value) for name, value in parse_overrides(text.split(","), "--split").items()}
    except (ConfigError, ValueError):
        raise bad from None


def auto_samples_per_shard(spec: Spec, n_train: int) -> int:
    """A power of two giving at least 64 training shards, each 16-256 MiB raw (the size wins for small builds)."""
    bps = max(spec.bytes_per_sample(), 1)
    lo, hi = (16 << 20) / bps, (256 << 20) / bps
    target = min(max(n_train / 64.0, lo), hi)
    return int(2 ** max(0, int(np.floor(np.log2(max(target, 1.0))))))


MAX_SAMPLES = Bound(1, 10 ** 9, why="a billion samples; the paper's datasets hold 100,000")
"""The most samples one build may plan (`--n`, `generate.plan_build`): planning lists every shard before anything
is written. A build is first checked against the free disk space, which refuses most such sizes itself."""
MAX_SHARDS = 10 ** 6
"""The most shards one build may plan (a plan of 10^6 shards takes seconds; the paper's datasets have < 100)."""


def make_plan(sizes: Mapping[str, int], samples_per_shard: int) -> list[ShardSpec]:
    """Shards in the order train, val, test, each by its index within the split; more than MAX_SHARDS is a
    ConfigError naming --samples-per-shard (before any shard is listed).

    >>> len(make_plan({"train": 10, "val": 3}, 4))
    4
    >>> make_plan({"train": 10 ** 9}, 1)
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: --samples-per-shard: 1 gives 1,000,000,000 shards, more than 1,000,000
    """
    count = sum(-(-sizes.get(split, 0) // samples_per_shard) for split in SPLIT_ORDER)
    if count > MAX_SHARDS:
        least = -(-sum(sizes.values()) // MAX_SHARDS)
        raise ConfigError("--samples-per-shard", f"{samples_per_shard:,} gives {count:,} shards, more than "
                          f"{MAX_SHARDS:,}", f"pass --samples-per-shard {least:,} or more (or leave it automatic)")
    plan = []
    for split in SPLIT_ORDER:
        n = sizes.get(split, 0)
        count = -(-n // samples_per_shard)
        for j in range(count):
            plan.append(ShardSpec(split, j, count, j * samples_per_shard, min(n, (j + 1) * samples_per_shard)))
    return plan


def content_prefix(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """The serialisation prefix of content hashes: '<dtype.str>|<shape>|' (e.g. '|u1|1024,512,512|')."""
    return f"{np.dtype(dtype).str}|{','.join(map(str, shape))}|".encode("ascii")


BLOCK_BYTES = 32 << 20
"""Raw bytes generated per block of a shard job (memory per worker: about twice this above the interpreter).

Part of the file format for the catalogue's shard sha256s: a shard written in two blocks lays its chunks out
differently from one written in one block (same content hashes, other file bytes). Changing it re-hashes the
catalogue entries whose shards span more than one block (MIPS at L = 4096 moved when this went from 64 to 32 MiB).
"""


def block_rows(bytes_per_sample: int) -> int:
    """Rows per generated block of a shard job: BLOCK_BYTES of raw samples, 1 to 256 rows."""
    return int(max(1, min(256, BLOCK_BYTES // max(bytes_per_sample, 1))))


def row_hashes(block: Mapping[str, np.ndarray]) -> np.ndarray:
    """(n, 32) uint8: per row, sha256 over the row's fields in sorted name order (dtype|shape|bytes each; a
    per-sample scalar counts as shape (1,), as `np.ascontiguousarray` makes it: part of the frozen format)."""
    names = sorted(block)
    n = len(block[names[0]])
    out = np.empty((n, 32), dtype=np.uint8)
    for i in range(n):
        h = hashlib.sha256()
        for name in names:
            row = np.ascontiguousarray(block[name][i])
            h.update(content_prefix(row.dtype, row.shape))
            h.update(row.tobytes())
        out[i] = np.frombuffer(h.digest(), dtype=np.uint8)
    return out


def _filter_kwargs(field: Field, n: int) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"fletcher32": True, "track_times": False}
    kwargs["chunks"] = (n,) if field.shape == () else (1, *field.shape)
    codec = field.codec
    if codec.startswith("gzip"):
        kwargs["compression"] = "gzip"
        kwargs["compression_opts"] = int(codec.split(":")[1]) if ":" in codec else 4
        kwargs["shuffle"] = field.shuffle
    elif codec.startswith("zstd"):
        import hdf5plugin

        level = int(codec.split(":")[1]) if ":" in codec else 3
        kwargs.update(hdf5plugin.Zstd(clevel=level))
        kwargs["shuffle"] = field.shuffle
    elif codec != "none":
        raise ConfigError("codec", f"unknown codec {codec!r}; use gzip:<level>, zstd:<level> or none")
    return kwargs


CODEC_LEVELS = {"gzip": (0, 9), "zstd": (1, 22)}
"""Levels the writer accepts per codec (`--codec NAME:LEVEL`)."""


def check_codec(codec: str | None) -> None:
    """Refuse a `--codec` the writer cannot use, before anything is created (so a typo leaves no folder behind).

    >>> check_codec("gzip:9"), check_codec("zstd"), check_codec("none"), check_codec(None)
    (None, None, None, None)
    >>> check_codec("zstd:99")
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: --codec: zstd level must be an integer in [1, 22], got '99'
    """
    if codec is None or codec == "none":
        return
    name, sep, level = codec.partition(":")
    if name not in CODEC_LEVELS:
        raise ConfigError("--codec", f"unknown codec {codec!r}; use gzip:<level>, zstd:<level> or none")
    lo, hi = CODEC_LEVELS[name]
    if sep and not (level.strip().lstrip("-").isdigit() and lo <= int(level) <= hi):
        raise ConfigError("--codec", f"{name} level must be an integer in [{lo}, {hi}], got {level!r}")
    if name == "zstd":
        try:
            import hdf5plugin  # noqa: F401
        except ImportError:
            raise ConfigError("--codec", "zstd needs the hdf5plugin package", "pip install hdf5plugin") from None


def storage_fields(spec: Spec, codec: str | None = None) -> dict[str, Field]:
    """The stored fields: the spec's plus sample_id, with `codec` replacing every compressed field's codec."""
    fields = {**spec.fields, "sample_id": SAMPLE_ID}
    if codec:
        fields = {k: (Field(f.dtype, f.shape, f.description, codec, f.shuffle, f.attrs) if f.codec != "none" else f)
                  for k, f in fields.items()}
    return fields


def write_shard(root: Path, shard: ShardSpec, fields: Mapping[str, Field], make_rows: Callable[[int, int], dict],
                attrs: Mapping[str, Any], fixed: Mapping[str, np.ndarray], block_size: int,
                stats_fn: Callable[[dict], dict] | None = None, on_rows: Callable[[int], None] | None = None
                ) -> dict[str, Any]:
    """Write one shard atomically and return its sidecar record (also written to `.build/`).

    `make_rows(start, stop)` returns every field except `sample_id` for global sample indices [start, stop), each
    with exactly the dtype and per-sample shape of its `Field` (anything else is refused, naming the field). The
    content and row hashes are computed from the arrays as stored. A full disk raises `DiskFullError` and leaves
    no temporary behind; so does any other failure.
    """
    from .space import disk_errno

    final = root / shard.relpath
    tmp = final.with_name(f"{final.name}.tmp.{uuid.uuid4().hex}")
    n = shard.stop - shard.start
    content = {name: hashlib.sha256(content_prefix(np.dtype(f.dtype), (n, *f.shape))) for name, f in fields.items()}
    hashes = np.empty((n, 32), dtype=np.uint8)
    stats: dict[str, np.ndarray] = {}
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        with _hdf5_file(tmp) as (h5, keep):
            for key, value in attrs.items():
                h5.attrs[key] = value
            dsets = {}
            for name, f in fields.items():
                dsets[name] = h5.create_dataset(name, shape=(n, *f.shape), dtype=f.dtype, **_filter_kwargs(f, n))
                dsets[name].attrs["description"] = f.description
                for key, value in f.attrs.items():
                    dsets[name].attrs[key] = value if isinstance(value, (int, float, str)) else json.dumps(value)
            keep.extend(dsets.values())
            for name, arr in fixed.items():
                h5.create_dataset(f"fixed/{name}", data=arr, compression="gzip", compression_opts=4,
                                  fletcher32=True, track_times=False)
            for lo in range(shard.start, shard.stop, block_size):
                hi = min(lo + block_size, shard.stop)
                block = dict(make_rows(lo, hi))
                block["sample_id"] = np.arange(lo, hi, dtype=np.int64)
                stored = {name: _checked(name, f, block.get(name), hi - lo, attrs) for name, f in fields.items()}
                for name, arr in stored.items():
                    dsets[name][lo - shard.start:hi - shard.start] = arr
                    content[name].update(arr.data)  # contiguous (_checked): no copy
                hashes[lo - shard.start:hi - shard.start] = row_hashes(stored)
                if stats_fn is not None:
                    for key, value in stats_fn(block).items():
                        stats[key] = stats.get(key, 0) + np.asarray(value)
                if on_rows is not None:
                    on_rows(hi - lo)
        try:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except FileNotFoundError:
            raise TemporaryVanished(f"{tmp} vanished while this run wrote it: another process deleted it") from None
        fsync_dir(final.parent)
        record = {
            **asdict(shard), "path": shard.relpath, "sample_start": shard.start, "sample_stop": shard.stop,
            "num_bytes": final.stat().st_size, "sha256": file_sha256(final),
            "content_sha256": {k: h.hexdigest() for k, h in content.items()},
            "rows_sha256": hashlib.sha256(hashes.tobytes()).hexdigest(),
            "statistics": {k: np.asarray(v).tolist() for k, v in stats.items()},
        }
        rows = io.BytesIO()
        np.save(rows, hashes)
        atomic_write_bytes(root / shard.rowhashes, rows.getvalue())
        atomic_write_json(root / shard.sidecar, record)
    except (OSError, RuntimeError) as exc:  # h5py raises either, with or without the OS errno in the message
        code = disk_errno(exc, root)
        if code is None:
            raise
        from .space import DISK_ERRNOS, DiskFullError

        raise DiskFullError(f"{DISK_ERRNOS[code]} while writing {final}", code) from None
    finally:
        tmp.unlink(missing_ok=True)
    return record


class TemporaryVanished(SsmbenchError):
    """A temporary this run was writing was deleted by another process (an older ssmbench, or a clean-up)."""


@contextmanager
def _hdf5_file(tmp: Path) -> Iterator[tuple[Any, list[Any]]]:
    """An HDF5 file open for writing, with a list for objects to keep alive should HDF5 fail to close it.

    After a failure (a full disk, a refused block, Ctrl-C) the file is closed; if closing fails for lack of
    space, the temporary is truncated to free the space its chunks took and the close retried; if it fails
    again, HDF5 cannot recover in this process (`space.poison_hdf5`).
    """
    import h5py

    from .space import disk_errno

    h5 = h5py.File(tmp, "w", libver=("earliest", "v110"), track_order=True)
    keep: list[Any] = [h5]
    try:
        yield h5, keep
    except BaseException as exc:
        _close(h5, tmp, keep, disk_errno(exc, tmp.parent) is not None)
        raise
    _close(h5, tmp, keep, False, reraise=True)


def _close(h5: Any, tmp: Path, keep: list[Any], disk_full: bool, reraise: bool = False) -> None:
    """Close an HDF5 file (after a full disk, with its temporary truncated first so that the close can flush).

    If the close fails, HDF5 may have closed some of the file's objects half-way and crashes when they are
    released: they are kept alive for good (`space.poison_hdf5`), and a second close frees the file handle.
    """
    from .space import disk_errno, poison_hdf5

    if disk_full:
        _truncate(tmp)
    try:
        h5.close()
        return
    except Exception as exc:  # h5py raises OSError or RuntimeError, with the OS errno in the message
        first = exc
    poison_hdf5(*keep)
    if disk_errno(first, tmp.parent) is not None:
        _truncate(tmp)
    try:
        h5.close()
    except Exception:
        pass
    if reraise:
        raise first


def _truncate(path: Path) -> None:
    try:
        os.truncate(path, 0)
    except OSError:
        pass


def _checked(name: str, field: Field, value: Any, rows: int, attrs: Mapping[str, Any]) -> np.ndarray:
    """A block's array for one field, as it will be stored; refused (naming the field) unless the generator
    returned exactly the Spec's dtype and shape (a silent cast would store other bytes than the task made)."""
    task = f"task {attrs['task']!r}" if "task" in attrs else "the task"
    want_dtype, want_shape = np.dtype(field.dtype), (rows, *field.shape)
    if value is None:
        raise SsmbenchError(f"{task} returned no field {name!r} (its Spec declares {want_dtype} {want_shape})")
    arr = np.asarray(value)
    if arr.dtype != want_dtype:
        raise SsmbenchError(f"{task} returned {arr.dtype} for field {name!r}, but its Spec declares {want_dtype}: "
                            "generate must return the declared dtype (cast with .astype)")
    if arr.shape != want_shape:
        raise SsmbenchError(f"{task} returned shape {arr.shape} for field {name!r} ({rows} samples), but its "
                            f"Spec declares {want_shape}")
    return np.ascontiguousarray(arr)


def covers(record: Mapping[str, Any], shard: ShardSpec) -> bool:
    """Whether a sidecar record describes `shard`: the same split, index and rows; a candidate shard may hold
    more rows than asked (the candidate stream only grows, so its last shard may have been written longer).

    >>> covers({"split": "candidates", "index": 2, "num_shards": 0, "start": 16, "stop": 24},
    ...        ShardSpec("candidates", 2, 0, 16, 20))
    True
    >>> covers({"split": "candidates", "index": 2, "num_shards": 0, "start": 16, "stop": 20},
    ...        ShardSpec("candidates", 2, 0, 16, 24))
    False
    """
    same = all(record.get(k) == getattr(shard, k) for k in ("split", "index", "num_shards", "start"))
    stop = record.get("stop")
    if shard.split == "candidates":
        return same and isinstance(stop, int) and stop >= shard.stop
    return same and stop == shard.stop


def shard_done(root: Path, shard: ShardSpec) -> dict[str, Any] | None:
    """The sidecar record if it describes `shard` and the shard's file matches it byte for byte; else None."""
    final, side = root / shard.relpath, root / shard.sidecar
    if not final.exists() or not side.exists() or not (root / shard.rowhashes).exists():
        return None
    try:
        record = json.loads(side.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not covers(record, shard):
        return None
    try:
        if record.get("num_bytes") != final.stat().st_size or record.get("sha256") != file_sha256(final):
            return None
    except FileNotFoundError:  # replaced or removed by another run meanwhile
        return None
    return record
