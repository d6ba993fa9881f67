"""Reading rows of a shard's per-sample fields: one stored chunk per row, inflated without h5py's selection layer.

ssmbench writes every per-sample field of a shard with one row per chunk (`shards.storage_fields`), by default
through HDF5's shuffle (multi-byte types), deflate and Fletcher-32 filters. Reading a row as `dset[row]` costs
h5py's selection machinery on top of the inflate (a 16 KiB ListOps row: ~265 us against ~80 us for the same
chunk fetched with `read_direct_chunk` and inflated by `zlib`). `rows_reader(dset)` returns a reader that does the
latter where the pipeline is one this module undoes exactly -- optional shuffle, then deflate, then optional
Fletcher-32 -- and a plain `dset[row]` reader for anything else (Zstd copies, uncompressed fields, other chunking).

Two more steps take most of what is left (measured on the 2-core VM, PF-128 rows, per sample of inputs + targets:
0.073 ms -> 0.017 ms): where each row's chunk sits in the file is read once from HDF5's chunk index
(`chunk_table`, one `chunk_iter` pass when the shard is opened, ~0.1-0.2 ms a field of 64 rows) and the chunk's bytes are then fetched with one
`os.pread` on the file's own descriptor (2-4 us against 24-36 us for `read_direct_chunk`, which looks the chunk up
again each time); and the stream is inflated by zlib-ng where it is installed (`zlib-ng`, a dependency: the same
deflate streams and Adler-32 check, 1.3-3.5x faster than CPython's zlib here: 0.049 -> 0.014 ms per PF-128 sample,
1.14 -> 0.38 ms per PF-512 sample), else by `zlib`. A file the offsets cannot be trusted in (another HDF5 file
driver, a user block, a chunk never written, the first chunk's bytes differing from `read_direct_chunk`'s) is
read through `read_direct_chunk`.

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

import os
from typing import TYPE_CHECKING, cast

import numpy as np

if TYPE_CHECKING:
    import h5py  # no type information: h5py's objects are Any to the type checker

try:
    from zlib_ng import zlib_ng as _zlib
except ImportError:  # a platform without zlib-ng's wheels: CPython's zlib reads the same streams
    import zlib as _zlib  # type: ignore[no-redef]  # typeshed's zlib: the interface zlib_ng copies
_INFLATE_ERROR = cast("type[Exception]", _zlib.error)  # zlib_ng.pyi says `error: Exception`; it is the class

DEFLATE, SHUFFLE, FLETCHER32 = 1, 2, 3  # HDF5 filter ids
_PIPELINES = {(DEFLATE,): False, (DEFLATE, FLETCHER32): False, (SHUFFLE, DEFLATE): True,
              (SHUFFLE, DEFLATE, FLETCHER32): True}
"""Filter pipelines (in write order) this module reads, and whether the bytes were shuffled."""


class DatasetRows:
    """Rows through h5py: `dset[row]` one by one (any layout, any filter)."""

    def __init__(self, dset: h5py.Dataset | _Opened) -> None:
        self.dset = dset

    def read_into(self, out: np.ndarray, dst: np.ndarray, rows: np.ndarray) -> None:
        """out[dst[i]] = dset[rows[i]] for every i. out: (B, *row shape); dst, rows: (n,) int."""
        for d, r in zip(dst.tolist(), rows.tolist(), strict=True):
            out[d] = self.dset[r]


class InflatedRows:
    """Rows of a one-row-per-chunk dataset, each chunk fetched raw and inflated here (see the module docstring).
    With `fd` (`file_descriptor` of the dataset's file) the chunks are read at their recorded offsets."""

    def __init__(self, dset: h5py.Dataset | _Opened, shuffled: bool, fd: int | None = None,
                 shape: tuple[int, ...] | None = None, dtype: np.dtype | None = None) -> None:
        self.dset, self.shuffled = dset, shuffled
        self.dtype = dset.dtype if dtype is None else dtype  # h5py's shape and dtype cost ~50 us a look-up
        shape = dset.shape if shape is None else shape
        self.row_shape = shape[1:]
        self.row_items = int(np.prod(self.row_shape, dtype=np.int64))
        self.row_bytes = self.row_items * self.dtype.itemsize
        self.tail = (0,) * len(self.row_shape)
        self.table = None if fd is None else chunk_table(dset, fd, shape)  # rows x [offset, size, mask]
        self.fd = -1 if fd is None or self.table is None else fd

    def read_into(self, out: np.ndarray, dst: np.ndarray, rows: np.ndarray) -> None:
        """out[dst[i]] = row rows[i], for every i. out: (B, *row shape); dst, rows: (n,) int."""
        read_chunk = self.dset.id.read_direct_chunk
        located = None if self.table is None else self.table[rows].tolist()  # (n, [offset, size, mask])
        for i, (d, r) in enumerate(zip(dst.tolist(), rows.tolist(), strict=True)):
            if located is not None:
                offset, size, mask = located[i]
                stored = os.pread(self.fd, size, offset)
            else:
                mask, stored = read_chunk((r, *self.tail))
            if mask:  # HDF5 skipped a filter on this chunk: let it decode
                out[d] = self.dset[r]
                continue
            try:
                raw = _zlib.decompress(stored)  # checks the stream's Adler-32; ignores the Fletcher-32 trailer
            except _INFLATE_ERROR as exc:
                raise OSError(f"can't inflate chunk of row {r} ({exc})") from None
            if len(raw) != self.row_bytes:
                raise OSError(f"chunk of row {r} decodes to {len(raw)} bytes, expected {self.row_bytes}")
            flat = np.frombuffer(raw, np.uint8)
            if self.shuffled and self.dtype.itemsize > 1:  # byte k of every element was stored together
                flat = flat.reshape(self.dtype.itemsize, self.row_items).T
            out[d] = np.ascontiguousarray(flat).view(self.dtype).reshape(self.row_shape)


def file_descriptor(f: h5py.File) -> int | None:
    """The OS descriptor of the open h5py file `f` through which its chunks can be read at the offsets HDF5's chunk
    index records; None where they cannot (another file driver than sec2, a user block before HDF5's data)."""
    try:
        return f.id.get_vfd_handle() if f.driver == "sec2" and f.userblock_size == 0 else None
    except (AttributeError, OSError, RuntimeError, ValueError):
        return None


def chunk_table(dset: h5py.Dataset | _Opened, fd: int, shape: tuple[int, ...]) -> np.ndarray | None:
    """(rows, 3) int64: [byte offset, size, filter mask] of each row's chunk of a one-row-chunk dataset of `shape` in the file open
    as `fd` (`file_descriptor`), from one pass over HDF5's chunk index; None where a row's chunk was never written,
    the index cannot be walked, or the first chunk's bytes read at its offset differ from `read_direct_chunk`'s."""
    if shape[0] == 0:
        return None
    table = np.full((shape[0], 3), -1, np.int64)  # (rows, [offset, size, mask])

    def note(info: h5py.h5d.StoreInfo) -> None:
        table[info.chunk_offset[0]] = (info.byte_offset, info.size, info.filter_mask)

    try:
        dset.id.chunk_iter(note)
        if (table[:, 0] < 0).any():
            return None
        offset, size, _ = table[0].tolist()
        if os.pread(fd, size, offset) != dset.id.read_direct_chunk((0,) * len(shape))[1]:
            return None
    except (AttributeError, OSError, RuntimeError, TypeError, ValueError):  # an h5py without chunk_iter, ...
        return None
    return table  # 24 bytes a row, whatever the shard's size


def rows_reader(dset: h5py.Dataset | tuple[h5py.File, str],
                fd: int | None = None) -> DatasetRows | InflatedRows:
    """The fastest exact reader of `dset`'s rows: `InflatedRows` for one-row chunks through (shuffle,) deflate
    (, Fletcher-32), `DatasetRows` otherwise. `dset` is an h5py Dataset, or `(file, name)`: the dataset is then
    opened through h5py's low-level API, which spares the high-level Dataset's look-up and properties (40-100 us a
    field, a sizeable part of opening a shard in a DataLoader worker) until a row must go through h5py. `fd`:
    `file_descriptor(file)`, looked up once per file by the caller (None: chunks come through `read_direct_chunk`)."""
    import h5py

    handle = _Opened(*dset) if isinstance(dset, tuple) else dset
    dsid = handle.id
    plist = dsid.get_create_plist()
    shape, dtype = dsid.shape, dsid.dtype
    pipeline = tuple(plist.get_filter(i)[0] for i in range(plist.get_nfilters()))
    if (plist.get_layout() != h5py.h5d.CHUNKED or len(shape) == 0 or plist.get_chunk() != (1, *shape[1:])
            or not dtype.isnative or pipeline not in _PIPELINES):
        return DatasetRows(handle)
    return InflatedRows(handle, _PIPELINES[pipeline], fd, shape, dtype)


class _Opened:
    """Dataset `name` of h5py file `file` opened through the low-level API, with what the readers use of an h5py
    Dataset: `.id` (and its `.shape` and `.dtype`), and `[row]` through `file[name]`, looked up on first use (an
    h5py.Dataset wrapped around the low-level id reads rows ~1.7x slower than the one h5py's look-up makes)."""

    def __init__(self, file: h5py.File, name: str) -> None:
        import h5py

        self.id, self.file, self.name = h5py.h5d.open(file.id, name.encode()), file, name
        self._dataset: h5py.Dataset | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.id.shape

    @property
    def dtype(self) -> np.dtype:
        return self.id.dtype

    def __getitem__(self, row: int) -> np.ndarray:
        if self._dataset is None:
            self._dataset = self.file[self.name]
        return self._dataset[row]
