"""A map-style PyTorch dataset over one split of a dataset folder: `open_folder(path, split)`.

The constructor reads `manifest.json` only, checks the folder (structure, task, task version; a shard path or
symlink that leads out of the folder is refused, `ssmbench.data.folder.safe_paths`) and keeps the shard
table as NumPy arrays (small and copy-on-write friendly in DataLoader workers). HDF5 files are opened lazily, in
the process that reads them, on the first item that needs a shard, and kept in a small per-process LRU cache; a
handle opened before a fork is never used by the child (the cache is keyed by pid and dropped when pickled), so the
dataset works under fork, forkserver and spawn. `torch` is imported only when an item is built.

Items are dicts of tensors, as the model consumes them (`transform="model"`, the default):

========== ============================================== =========================================================
key        pixels (Pathfinder)                            tokens (ListOps) / real (atomic tasks)
========== ============================================== =========================================================
inputs     (T, 1) float32, row-major flattening, scaled   (T,) int64 token ids / (T, d_input) float32 as stored
           to [-1, 1] by Spec.input_scale: x * a + b in
           float32 (a = 1/127.5, b = -1 for 8-bit images)
targets    (T,) int64 class ids                           (T,) int64, ignore_index (-100) where unlabelled /
                                                          (l_output, d_output) float32
extras     int64 for integer fields (float32 for float fields), stored shape, on request (`fields=`)
========== ============================================== =========================================================

plus "sample_index", the sample's int64 index within its split. Because "model" has already applied
`Spec.input_scale`, `dataset.spec` (the Spec of the yielded tensors, which the model should be built from) has
`input_scale=None`; `dataset.stored_spec` is the folder's own. `transform="compact"` keeps the stored dtypes
(uint8 pixels and tokens, int8/uint8 targets; same shapes as "model") so that 4-8x fewer bytes cross process
boundaries and the device does the widening and scaling (`dataset.spec` then keeps `input_scale`).
`transform="numpy"` returns the stored arrays unchanged, as NumPy (no torch needed); a callable receives that
NumPy dict and returns whatever it likes.

With `collate_fn=dataset.collate` a batch is read and transformed as whole (B, ...) columns and handed on without
re-stacking; from a DataLoader worker it travels in the stored dtypes and the main process applies the transform
on arrival (`ssmbench.data.read.columns`), so "model" costs no more bytes between processes than "compact".

Example (a 40-sample Shift build; a Pathfinder-512 item is inputs (262144, 1) float32, targets (262144,) int64):

    >>> import tempfile, torch
    >>> from ssmbench.data.make.generate import generate_dataset
    >>> from ssmbench.task_config import resolve_config
    >>> tmp = tempfile.TemporaryDirectory()
    >>> config = resolve_config("shift", length=64)[1]
    >>> folder = generate_dataset("shift", config, out=tmp.name, n=40, samples_per_shard=8).path
    >>> ds = open_folder(folder, "train")
    >>> len(ds), ds.shard_starts.tolist()
    (32, [0, 8, 16, 24, 32])
    >>> {k: (tuple(v.shape), str(v.dtype)) for k, v in ds[0].items()}
    {'inputs': ((64, 3), 'torch.float32'), 'targets': ((64, 8), 'torch.float32'), 'sample_index': ((), 'torch.int64')}
    >>> loader = torch.utils.data.DataLoader(ds, batch_size=8, sampler=ShardAwareSampler(ds, seed=0, world_size=1))
    >>> sorted(torch.cat([b["sample_index"] for b in loader]).tolist()) == list(range(32))
    True
    >>> tmp.cleanup()
"""

from __future__ import annotations

import operator
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...api import Field, Spec
from ...errors import DatasetError
from ..folder.checks import DamagedDataError, check_folder
from ..folder.manifest import ShardInfo, load_manifest
from ..folder.safe_paths import inside
from ..folder.splits import canonical_split
from .chunk_rows import DatasetRows, InflatedRows, file_descriptor, rows_reader
from .columns import Batch, ColumnPlan, collate
from .samplers import EvalShardSampler, ShardAwareSampler

if TYPE_CHECKING:
    import h5py  # no type information: h5py's objects are Any to the type checker

__all__ = ["open_folder", "FolderDataset", "ShardAwareSampler", "EvalShardSampler", "collate", "TRANSFORMS",
           "DamagedDataError", "check_shard_files"]

TRANSFORMS = ("model", "compact", "numpy")


def open_folder(path: str | Path, split: str = "train", *, fields: Sequence[str] | None = None,
                transform: str | Callable[[dict[str, np.ndarray]], Any] = "model", expect_task: str | None = None,
                expect_config: Mapping[str, Any] | None = None, max_open_files: int = 16) -> FolderDataset:
    """One split of the dataset folder `path` as a map-style dataset (see the module docstring for the item layout).

    `fields` names extra stored fields to return beside inputs and targets (e.g. ("node_height", "node_op") for
    ListOps, ("label",) for Pathfinder). `expect_task` and `expect_config` (config values that must match, e.g.
    {"size": 512}) refuse a folder of another task or configuration. Every refusal is a one-line `DatasetError`
    naming the fix. `split` is train, val or test (`validation` and `valid` mean val, as for `ssmbench download
    --split`). A dataset *name* (looked up in the data root, fetched when missing) is `ssmbench.open_dataset`'s.
    """
    split = canonical_split(split, "split")
    folder = Path(path)
    if not folder.is_dir():
        raise DatasetError(f"no dataset at {folder}: manifest.json not found",
                           "pass a dataset folder made by `ssmbench generate` or `ssmbench download`")
    return FolderDataset(folder, split, fields=fields, transform=transform, expect_task=expect_task,
                         expect_config=expect_config, max_open_files=max_open_files)


_HASHED: dict[tuple[str, int, int], str] = {}
"""sha256 of the shard files this process has hashed, by (path, size, mtime in ns): a file is hashed once."""


def _sha256(path: Path) -> str:
    import hashlib

    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHED:
        with open(path, "rb") as f:
            _HASHED[key] = hashlib.file_digest(f, "sha256").hexdigest()
    return _HASHED[key]


def check_shard_files(root: str | Path, shards: Sequence[ShardInfo], workers: int | None = None) -> None:
    """Size and sha256 of each shard file against its manifest entry (those it records), hashed in `workers`
    threads (default: up to 4; each file once per process); a one-line `DamagedDataError` (exit 3) naming the first
    that differs and `ssmbench verify`. What a run does before its first step, on the shards it will read: a
    damaged file is refused even where its damaged rows would not be drawn. `ssmbench verify --deep` (the decoded
    content) stays the full check."""
    from concurrent.futures import ThreadPoolExecutor

    root = Path(root)
    for sh in shards:
        file = inside(root, sh.path, "shard")  # a symlink out of the folder: refused, exit 3
        if not file.is_file():
            raise DamagedDataError(f"{root}: shard {sh.path} is missing; run `ssmbench verify {root}`, then "
                                   "re-download or rebuild the folder")
        if sh.num_bytes is not None and file.stat().st_size != sh.num_bytes:
            raise DamagedDataError(f"{root}: shard {sh.path} has {file.stat().st_size} bytes, the manifest says "
                                   f"{sh.num_bytes} (truncated or replaced); run `ssmbench verify {root}`, then "
                                   "re-download or rebuild the folder")
    hashed = [(sh.path, sh.sha256) for sh in shards if sh.sha256]
    pool = ThreadPoolExecutor(max(1, workers or min(4, os.cpu_count() or 1)))  # file reads and sha256 free the GIL
    try:
        got = list(pool.map(lambda entry: _sha256(root / entry[0]), hashed))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    for (path, want), sha in zip(hashed, got, strict=True):
        if sha != want:
            raise DamagedDataError(f"{root}: shard {path} is damaged (its sha256 {sha[:12]}... is not the "
                                   f"manifest's {want[:12]}...); run `ssmbench verify {root}`, then "
                                   "re-download or rebuild the folder")


def _spec_from_json(obj: Mapping[str, Any]) -> Spec:
    fields = {name: Field(f["dtype"], tuple(f["shape"]), f.get("description", ""), f.get("codec", "gzip:4"),
                          f.get("shuffle", False), f.get("attrs", {})) for name, f in obj["fields"].items()}
    scale = obj.get("input_scale")
    return Spec(fields=fields, input_kind=obj["input_kind"], d_input=obj["d_input"], seq_len=obj["seq_len"],
                target_kind=obj["target_kind"], d_output=obj["d_output"], l_output=obj["l_output"],
                ignore_index=obj.get("ignore_index"), causal=obj["causal"],
                input_scale=tuple(scale) if scale else None, metrics=tuple(obj.get("metrics", ())))


_Source = np.ndarray | DatasetRows | InflatedRows
"""Where a shard's field is read from: a per-sample scalar field decoded whole, or a row reader."""


class FolderDataset:
    """Map-style dataset over one split of a dataset folder; build it with `open_folder` (or `ssmbench.open_dataset`).

    Attributes: `root`, `split`, `task`, `task_version`, `dataset_id`, `config` (the resolved task config, a
    dict), `stored_spec`, `spec` (the Spec of the yielded tensors), `fields` (extra fields returned),
    `shard_starts` ((S + 1,) int64 sample offsets of the split's shards; samplers use it).
    """

    def __init__(self, root: str | Path, split: str = "train", *, fields: Sequence[str] | None = None,
                 transform: str | Callable[[dict[str, np.ndarray]], Any] = "model",
                 expect_task: str | None = None, expect_config: Mapping[str, Any] | None = None,
                 max_open_files: int = 16) -> None:
        import dataclasses

        self.root = Path(root)
        manifest = load_manifest(self.root)
        check_folder(self.root, manifest, split, expect_task, expect_config)
        if not (callable(transform) or transform in TRANSFORMS):
            raise DatasetError(f"unknown transform {transform!r}", f"use one of {', '.join(TRANSFORMS)} or a callable")
        self.split, self.transform = split, transform
        self.task, self.task_version = manifest.task, manifest.version
        self.dataset_id, self.config = manifest.dataset_id or "", dict(manifest.config)
        self.stored_spec = _spec_from_json(manifest.spec)
        self.spec = (dataclasses.replace(self.stored_spec, input_scale=None)
                     if transform == "model" and self.stored_spec.input_kind == "pixels" else self.stored_spec)
        stored = {**manifest.spec["fields"], "sample_id": {"dtype": "int64", "shape": []}}
        self.fields = tuple(fields or ())
        unknown = [f for f in self.fields if f not in stored or f in ("inputs", "targets")]
        if unknown:
            extras = sorted(set(stored) - {"inputs", "targets"})
            raise DatasetError(f"{self.root} has no extra field {unknown[0]!r}", f"choose from {', '.join(extras)}")
        spec = self.stored_spec
        self._plan = (ColumnPlan(transform, spec.input_kind, spec.input_scale, spec.target_kind, spec.l_output,
                                 self.fields) if isinstance(transform, str) else None)
        self._read = ("inputs", "targets", *self.fields)
        self._dtype = {k: np.dtype(stored[k]["dtype"]) for k in self._read}
        self._shape = {k: tuple(stored[k]["shape"]) for k in self._read}
        shards = manifest.splits[split].shards
        self._paths = np.array([s.path for s in shards], dtype=np.str_)  # (S,) fixed-width strings, no objects
        self._sizes = np.array([-1 if s.num_bytes is None else s.num_bytes for s in shards],
                               dtype=np.int64)  # (S,) -1: not recorded
        self._sha256 = np.array([s.sha256 or "" for s in shards], dtype=np.str_)  # (S,) "": not recorded
        self.shard_starts = np.array([0] + [s.sample_stop for s in shards], dtype=np.int64)  # (S + 1,)
        self.max_open_files = max(1, int(max_open_files))
        self._files: OrderedDict[int, tuple[h5py.File, dict[str, _Source]]] = OrderedDict()
        self._pid = os.getpid()

    # ------------------------------------------------------------------------------------------------- protocol
    collate = staticmethod(collate)
    """`DataLoader(ds, batch_size=B, collate_fn=ds.collate)` skips the re-stacking copy of default_collate and,
    from workers, ships batches in the stored dtypes (see `ssmbench.data.read.columns`)."""

    def __len__(self) -> int:
        return int(self.shard_starts[-1])

    def __repr__(self) -> str:
        return (f"FolderDataset({str(self.root)!r}, split={self.split!r}, task={self.task!r}, n={len(self)}, "
                f"shards={len(self._paths)}, transform={self.transform!r})")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_files"] = OrderedDict()  # open HDF5 handles never travel to another process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pid = os.getpid()

    def __getitem__(self, index: int) -> Any:
        try:
            index = operator.index(index)  # an int, NumPy or torch integer scalar
        except TypeError:
            raise TypeError(f"dataset[{index!r}]: an item takes one integer index; for several use "
                            "dataset.__getitems__(indices), which returns one item per index") from None
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """Several items in one call (DataLoader's batched fetch): rows are read shard by shard in index order,
        each field into one preallocated (B, ...) array, and transformed in one vectorised pass (a `Batch`, whose
        columns `collate` hands on as the batch)."""
        batch = self.read_rows(indices)
        if self._plan is None:  # a callable transform: item by item
            transform = self.transform
            assert callable(transform)  # `_plan` is None only for a callable transform
            return [transform({k: v[i] for k, v in batch.items()}) for i in range(len(batch["sample_index"]))]
        return Batch.of(batch, self._plan)

    def shards_of(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """The sorted shard numbers that hold the samples `indices` (non-negative) of this split."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        return np.unique(np.searchsorted(self.shard_starts, idx, side="right") - 1)

    def check_files(self, shards: Sequence[int] | np.ndarray | None = None, workers: int | None = None) -> None:
        """`check_shard_files` on these shards (numbers, default all) of the split: size and sha256 against the
        manifest, before any is read; a `DamagedDataError` (exit 3) naming the first that differs."""
        chosen = range(len(self._paths)) if shards is None else sorted({int(s) for s in shards})
        check_shard_files(self.root, [ShardInfo(str(self._paths[s]), int(self.shard_starts[s]),
                                                int(self.shard_starts[s + 1]),
                                                int(self._sizes[s]) if self._sizes[s] >= 0 else None,
                                                str(self._sha256[s]) or None) for s in chosen], workers)

    # -------------------------------------------------------------------------------------------------- reading
    def read_rows(self, indices: Sequence[int]) -> dict[str, np.ndarray]:
        """The stored arrays of `indices` (in the order given), plus "sample_index": {name: (B, *shape)}."""
        n = len(self)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)  # (B,)
        idx = np.where(idx < 0, idx + n, idx)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = int(np.asarray(indices).reshape(-1)[(idx < 0) | (idx >= n)][0])
            raise IndexError(f"index {bad} is out of range for the {self.split} split of {n} samples")
        out = {k: np.empty((idx.size, *self._shape[k]), dtype=self._dtype[k]) for k in self._read}
        shard_of = np.searchsorted(self.shard_starts, idx, side="right") - 1  # (B,)
        order = np.argsort(idx, kind="stable")  # read each shard's rows in file order
        for s in np.unique(shard_of):
            sel = order[shard_of[order] == s]
            try:
                self._read_shard(int(s), sel, idx[sel] - self.shard_starts[s], out)
            except OSError as exc:  # a checksum (fletcher32) or decompression failure: the file is damaged
                raise DamagedDataError(f"cannot read {self.root / str(self._paths[s])} ({str(exc).splitlines()[0]}): "
                                   f"the file is damaged; run `ssmbench verify {self.root} --deep`, then "
                                   "re-download or rebuild the folder") from None
        out["sample_index"] = idx
        return out

    def _read_shard(self, s: int, sel: np.ndarray, rows: np.ndarray, out: dict[str, np.ndarray]) -> None:
        datasets = self._open(s)
        for k in self._read:
            source = datasets[k]
            if isinstance(source, np.ndarray):  # per-sample scalar: the shard's one chunk, decoded once
                out[k][sel] = source[rows]
            else:  # one chunk per row (ssmbench.data.read.chunk_rows)
                source.read_into(out[k], sel, rows)

    def _open(self, s: int) -> dict[str, _Source]:
        """Row readers of shard `s`, opened in this process (LRU-bounded); scalar fields are read whole."""
        if self._pid != os.getpid():  # forked with handles from the parent: never use them here
            self._files, self._pid = OrderedDict(), os.getpid()
        hit = self._files.get(s)
        if hit is not None:
            self._files.move_to_end(s)
            return hit[1]
        import h5py
        import hdf5plugin  # noqa: F401  (registers the Zstd filter, so repacked copies read too)

        # locking=False: shards are immutable, and HDF5 file locks fail on some network file systems. No chunk
        # cache: a training epoch reads each chunk once, so a cache only holds memory (and would let a repeated
        # read, a benchmark's second epoch, skip decoding).
        path = inside(self.root, str(self._paths[s]), "shard")  # the link may have changed since check_folder
        try:
            f = h5py.File(path, "r", locking=False, rdcc_nbytes=0)
        except OSError as exc:  # not a read failure: say what else stops an open before calling the file damaged
            reason = str(exc).splitlines()[0]
            if "already open" in reason or "locking" in reason:
                raise DatasetError(f"cannot open {path} ({reason}): this process already holds it through another "
                                   "h5py handle opened with other settings (e.g. h5py.File(path) without "
                                   "locking=False); close that handle first") from None
            raise DamagedDataError(f"cannot open {path} ({reason}): it is not a readable HDF5 file; run `ssmbench "
                               f"verify {self.root}`, then re-download or rebuild the folder") from None
        fd = file_descriptor(f)
        datasets = {k: (f[k][()] if self._shape[k] == () else rows_reader((f, k), fd)) for k in self._read}
        self._files[s] = (f, datasets)
        while len(self._files) > self.max_open_files:
            _, (old, _) = self._files.popitem(last=False)
            old.close()
        return datasets

    def close(self) -> None:
        """Close this process's open shard files (they reopen on the next read)."""
        if self._pid == os.getpid():
            for f, _ in self._files.values():
                f.close()
        self._files = OrderedDict()
