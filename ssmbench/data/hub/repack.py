"""Repack a dataset folder's shards with another codec (Zstd for fast local reads, gzip to publish), same content.

Published shards are gzip (every HDF5 build reads them); a local training copy reads 2-6x faster with Zstd
(hdf5plugin). `repack` rewrites every shard with the new codec for the fields that were compressed (uncompressed
fields stay uncompressed; chunking, shuffle, fletcher32, attributes and the `fixed/` group are kept), checks the
decoded arrays of both the source and the new file against the manifest's `content_sha256`, and writes a manifest
with the new file sizes and sha256, the same `content_digest`, and `repacked_from` (the source manifest's sha256).

By default the copy goes to `<folder>-<codec>` beside the source (or `<out>/<name>`); `in_place=True` replaces the
shards one by one, each atomically, and rewrites the manifest last. Both modes keep a journal (`.repack.json`) of
the shards already written, so an interrupted run resumes. Example:

    >>> from ssmbench.data.hub.repack import repack
    >>> result = repack("data/pathfinder-512", codec="zstd:3")        # doctest: +SKIP
    >>> result.path                                                    # doctest: +SKIP
    PosixPath('data/pathfinder-512-zstd')
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, DatasetError, VerificationError
from ...plain import file_sha256
from ..folder.atomic import atomic_write_json
from ..folder.manifest import Manifest, load_manifest, read_manifest_json
from ..folder.safe_paths import inside
from ..folder.splits import SPLIT_ORDER
from ..make.provenance import created_utc
from ..make.shards import content_prefix

JOURNAL = ".repack.json"
LEVELS = {"zstd": (1, 22, 3), "gzip": (0, 9, 4)}


@dataclass
class RepackResult:
    path: Path
    codec: str
    shards: int
    bytes_before: int
    bytes_after: int
    in_place: bool

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "codec": self.codec, "shards": self.shards,
                "bytes_before": self.bytes_before, "bytes_after": self.bytes_after, "in_place": self.in_place}


def parse_codec(codec: str) -> str:
    """'zstd' -> 'zstd:3', 'gzip:9' -> 'gzip:9'; a ConfigError for anything else.

    >>> parse_codec("zstd"), parse_codec("gzip:1")
    ('zstd:3', 'gzip:1')
    """
    m = re.fullmatch(r"(zstd|gzip)(?::(\d+))?", codec.strip().lower())
    if not m:
        raise ConfigError("--codec", f"expected zstd[:LEVEL] or gzip[:LEVEL], got {codec!r}")
    lo, hi, default = LEVELS[m.group(1)]
    level = int(m.group(2)) if m.group(2) else default
    if not lo <= level <= hi:
        raise ConfigError("--codec", f"{m.group(1)} level must be in [{lo}, {hi}], got {level}")
    return f"{m.group(1)}:{level}"


def _filters(codec: str, shuffle: bool) -> dict[str, Any]:
    kind, level = codec.split(":")
    if kind == "gzip":
        return {"compression": "gzip", "compression_opts": int(level), "shuffle": shuffle}
    import hdf5plugin

    return {**hdf5plugin.Zstd(clevel=int(level)), "shuffle": shuffle}


def _is_compressed(dset: Any) -> bool:
    plist = dset.id.get_create_plist()
    import h5py

    codes = {plist.get_filter(i)[0] for i in range(plist.get_nfilters())}
    return bool(codes - {h5py.h5z.FILTER_FLETCHER32, h5py.h5z.FILTER_SHUFFLE})


def _rows_per_block(dset: Any, budget: int = 64 << 20) -> int:
    per_row = max(1, int(np.prod(dset.shape[1:], dtype=np.int64)) * dset.dtype.itemsize)
    return max(1, budget // per_row)


def _copy_dataset(src: Any, parent: Any, name: str, codec: str, hasher: Any | None) -> None:
    kwargs: dict[str, Any] = {"fletcher32": src.fletcher32, "track_times": False}
    if src.chunks is not None:
        kwargs["chunks"] = src.chunks
    if _is_compressed(src):
        kwargs.update(_filters(codec, src.shuffle))
    elif src.shuffle:
        kwargs["shuffle"] = True
    dst = parent.create_dataset(name, shape=src.shape, dtype=src.dtype, **kwargs)
    for key, value in src.attrs.items():
        dst.attrs[key] = value
    if src.shape == () or src.size == 0:
        dst[()] = src[()]
        return
    step = _rows_per_block(src)
    for lo in range(0, src.shape[0], step):
        block = np.ascontiguousarray(src[lo:lo + step])
        dst[lo:lo + step] = block
        if hasher is not None:
            hasher.update(block.tobytes())


def _content_hashes(h5: Any, names: list[str]) -> dict[str, str]:
    out = {}
    for name in names:
        d = h5[name]
        h = hashlib.sha256(content_prefix(d.dtype, d.shape))
        step = _rows_per_block(d)
        for lo in range(0, d.shape[0], step):
            h.update(np.ascontiguousarray(d[lo:lo + step]).tobytes())
        out[name] = h.hexdigest()
    return out


def repack_shard(src: Path, dst: Path, codec: str, expected: dict[str, str]) -> None:
    """Rewrite one shard to `dst` (atomically) with `codec`; both files' contents must match `expected`."""
    import h5py
    import hdf5plugin  # noqa: F401  (registers the Zstd filter for reading Zstd sources)

    tmp = dst.with_name(f"{dst.name}.tmp.{uuid.uuid4().hex}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        with h5py.File(src, "r", locking=False) as h5in, \
                h5py.File(tmp, "w", libver=("earliest", "v110"), track_order=True) as h5out:
            for key, value in h5in.attrs.items():
                h5out.attrs[key] = value
            hashers = {}
            for name, obj in h5in.items():
                if isinstance(obj, h5py.Group):
                    group = h5out.create_group(name)
                    for key, value in obj.attrs.items():
                        group.attrs[key] = value
                    for sub, dset in obj.items():
                        _copy_dataset(dset, group, sub, codec, None)
                    continue
                hashers[name] = hashlib.sha256(content_prefix(obj.dtype, obj.shape))
                _copy_dataset(obj, h5out, name, codec, hashers[name])
        got = {k: h.hexdigest() for k, h in hashers.items() if k in expected}
        if got != expected:
            bad = sorted(k for k in expected if got.get(k) != expected[k])
            raise VerificationError(f"{src}: decoded {', '.join(bad)} differ from the manifest's content hashes",
                                    [f"{src}: {k}" for k in bad], "run `ssmbench verify --deep` on the source")
        with h5py.File(tmp, "r", locking=False) as h5:  # read back: the new file decodes to the same content
            if _content_hashes(h5, list(expected)) != expected:
                raise VerificationError(f"{dst}: the repacked file does not decode to the source's content")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


def _destination(root: Path, manifest: Manifest, codec: str, out: str | Path | None, in_place: bool) -> Path:
    if in_place:
        return root
    dst = Path(out) / str(manifest.name) if out else root.parent / f"{root.name}-{codec.split(':')[0]}"
    if dst.resolve() == root.resolve():
        raise ConfigError("--out", f"{dst} is the source folder", "use --in-place to replace the shards there")
    return dst


def repack(path: str | Path, codec: str = "zstd:3", out: str | Path | None = None, in_place: bool = False,
           progress: bool = False) -> RepackResult:
    """Repack the dataset at `path` with `codec` (see the module docstring); returns where the result is."""
    from tqdm import tqdm

    from ..folder.checks import absent_by_selection

    root = Path(path)
    manifest = load_manifest(root)
    codec = parse_codec(codec)
    source_sha = file_sha256(root / "manifest.json")
    dst = _destination(root, manifest, codec, out, in_place)
    if not in_place and (dst / "manifest.json").exists():
        done = read_manifest_json(dst)
        if done.get("repacked_from") == source_sha and done.get("repack_codec") == codec:
            shards = [s for sp in SPLIT_ORDER for s in done["splits"][sp]["shards"] if (dst / s["path"]).exists()]
            return RepackResult(dst, codec, len(shards), 0, sum(s["num_bytes"] for s in shards), False)
        raise DatasetError(f"{dst} already holds another dataset folder", "pass another --out, or remove it")
    left_out = absent_by_selection(root)
    shards = [(split, s) for split in SPLIT_ORDER for s in manifest.shards(split) if s.path not in left_out]
    missing = [s.path for _, s in shards if not inside(root, s.path, "shard").exists()]  # no symlink out
    if missing:
        raise DatasetError(f"{root}: {len(missing)} shard(s) missing, e.g. {missing[0]}",
                           "run `ssmbench verify` and re-download or regenerate them first")
    journal_path = dst / JOURNAL
    journal = {"source_manifest_sha256": source_sha, "codec": codec, "done": {}}
    if journal_path.exists():
        previous = json.loads(journal_path.read_text())
        if previous.get("source_manifest_sha256") == source_sha and previous.get("codec") == codec:
            journal = previous
    dst.mkdir(parents=True, exist_ok=True)
    for stray in dst.glob("*/*.h5.tmp.*"):  # a shard being written when an earlier run died
        stray.unlink()
    before = sum(s.num_bytes or 0 for _, s in shards)
    bar = tqdm(total=len(shards), unit="shard", desc=f"repack {codec}", file=sys.stderr, disable=not progress,
               leave=False)
    try:
        for _, shard in shards:
            target = dst / shard.path
            record = journal["done"].get(shard.path)
            if not (record and target.exists() and record["num_bytes"] == target.stat().st_size
                    and record["sha256"] == file_sha256(target)):
                repack_shard(root / shard.path, target, codec, shard.content_sha256 or {})
                journal["done"][shard.path] = {"num_bytes": target.stat().st_size, "sha256": file_sha256(target)}
                atomic_write_json(journal_path, journal)
            bar.update(1)
    finally:
        bar.close()
    new = copy.deepcopy(manifest.to_json())  # the copy's manifest: the source's, shard files and codecs replaced
    for split in SPLIT_ORDER:
        for shard in new["splits"][split]["shards"]:
            if shard["path"] in journal["done"]:
                shard.update(journal["done"][shard["path"]])
    for field in new["storage"]["fields"].values():
        if field["codec"] != "none":
            field["codec"] = codec
    new["repacked_from"] = source_sha
    new["repack_codec"] = codec
    new["repacked_utc"] = created_utc()
    if not in_place:
        for f in manifest.files or []:
            shutil.copy2(inside(root, f["path"], "file"), dst / f["path"])
        if (root / ".download.json").exists():
            shutil.copy2(root / ".download.json", dst / ".download.json")
    atomic_write_json(dst / "manifest.json", new)
    from ..make.cards import write_card

    write_card(dst, new)
    journal_path.unlink(missing_ok=True)
    after = sum(v["num_bytes"] for v in journal["done"].values())
    return RepackResult(dst, codec, len(shards), before, after, in_place)
