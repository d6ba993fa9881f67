"""Reading rows of a shard's per-sample fields: one stored chunk per row, inflated without h5py's selection layer.

ssmbench writes every per-sample field of a shard with one row per chunk (`shards.storage_fields`), by default
through HDF5's shuffle (multi-byte types), deflate and Fletcher-32 filters. Reading a row as `dset[row]` costs
h5py's selection machinery on top of the inflate (a 16 KiB ListOps row: ~265 us against ~80 us for the same
chunk fetched with `read_direct_chunk` and inflated by `zlib`). `rows_reader(dset)` returns a reader that does the
latter where the pipeline is one this module undoes exactly -- optional shuffle, then deflate, then optional
Fletcher-32 -- and a plain `dset[row]` reader for anything else (Zstd copies, uncompressed fields, other chunking).

Integrity: deflate's zlib stream carries its own Adler-32 of the decoded bytes, which `zlib.decompress` checks, and
the decoded size is checked against the row's; a chunk that fails either raises OSError, as h5py's own read of a
damaged chunk does. (The Fletcher-32 trailer, a checksum of the compressed bytes, is not recomputed: a flipped
byte in the stream fails the inflate or the Adler-32 instead.) A chunk whose filter mask says HDF5 skipped a filter
is read through h5py.

Example:
    >>> import tempfile, h5py, numpy as np
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with h5py.File(tmp.name + "/a.h5", "w") as f:
    ...     _ = f.create_dataset("x", data=np.arange(12, dtype=np.int16).reshape(3, 4), chunks=(1, 4),
    ...                          shuffle=True, compression="gzip", fletcher32=True)
    >>> with h5py.File(tmp.name + "/a.h5", "r") as f:
    ...     reader, out = rows_reader(f["x"]), np.zeros((2, 4), np.int16)
    ...     reader.read_into(out, np.array([0, 1]), np.array([2, 0]))
    ...     type(reader).__name__, out.tolist()
    ('InflatedRows', [[8, 9, 10, 11], [0, 1, 2, 3]])
    >>> tmp.cleanup()
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

DEFLATE, SHUFFLE, FLETCHER32 = 1, 2, 3  # HDF5 filter ids
_PIPELINES = {(DEFLATE,): False, (DEFLATE, FLETCHER32): False, (SHUFFLE, DEFLATE): True,
              (SHUFFLE, DEFLATE, FLETCHER32): True}
"""Filter pipelines (in write order) this module reads, and whether the bytes were shuffled."""


class DatasetRows:
    """Rows through h5py: `dset[row]` one by one (any layout, any filter)."""

    def __init__(self, dset: Any) -> None:
        self.dset = dset

    def read_into(self, out: np.ndarray, dst: np.ndarray, rows: np.ndarray) -> None:
        """out[dst[i]] = dset[rows[i]] for every i. out: (B, *row shape); dst, rows: (n,) int."""
        for d, r in zip(dst.tolist(), rows.tolist(), strict=True):
            out[d] = self.dset[r]


class InflatedRows:
    """Rows of a one-row-per-chunk dataset, each chunk fetched raw and inflated here (see the module docstring)."""

    def __init__(self, dset: Any, shuffled: bool) -> None:
        self.dset, self.shuffled = dset, shuffled
        self.dtype = dset.dtype
        self.row_shape = dset.shape[1:]
        self.row_items = int(np.prod(self.row_shape, dtype=np.int64))
        self.row_bytes = self.row_items * self.dtype.itemsize
        self.tail = (0,) * len(self.row_shape)

    def read_into(self, out: np.ndarray, dst: np.ndarray, rows: np.ndarray) -> None:
        """out[dst[i]] = row rows[i], for every i. out: (B, *row shape); dst, rows: (n,) int."""
        read_chunk = self.dset.id.read_direct_chunk
        for d, r in zip(dst.tolist(), rows.tolist(), strict=True):
            mask, stored = read_chunk((r, *self.tail))
            if mask:  # HDF5 skipped a filter on this chunk: let it decode
                out[d] = self.dset[r]
                continue
            try:
                raw = zlib.decompress(stored)  # checks the stream's Adler-32; ignores the Fletcher-32 trailer
            except zlib.error as exc:
                raise OSError(f"can't inflate chunk of row {r} ({exc})") from None
            if len(raw) != self.row_bytes:
                raise OSError(f"chunk of row {r} decodes to {len(raw)} bytes, expected {self.row_bytes}")
            flat = np.frombuffer(raw, np.uint8)
            if self.shuffled and self.dtype.itemsize > 1:  # byte k of every element was stored together
                flat = flat.reshape(self.dtype.itemsize, self.row_items).T
            out[d] = np.ascontiguousarray(flat).view(self.dtype).reshape(self.row_shape)


def rows_reader(dset: Any) -> DatasetRows | InflatedRows:
    """The fastest exact reader of `dset`'s rows: `InflatedRows` for one-row chunks through (shuffle,) deflate
    (, Fletcher-32), `DatasetRows` otherwise."""
    chunks = dset.chunks
    if chunks is None or len(dset.shape) == 0 or chunks != (1, *dset.shape[1:]) or not dset.dtype.isnative:
        return DatasetRows(dset)
    plist = dset.id.get_create_plist()
    pipeline = tuple(plist.get_filter(i)[0] for i in range(plist.get_nfilters()))
    if pipeline not in _PIPELINES:
        return DatasetRows(dset)
    return InflatedRows(dset, _PIPELINES[pipeline])
