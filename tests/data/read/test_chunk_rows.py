"""`ssmbench.data.read.chunk_rows`: rows inflated from raw chunks equal h5py's reads, for every pipeline it claims, on
real shards too; everything else goes through h5py; a damaged chunk is reported as damage."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from ssmbench import DatasetError, open_dataset
from ssmbench.data.read import chunk_rows
from ssmbench.data.read.chunk_rows import DatasetRows, InflatedRows, file_descriptor, rows_reader


def _write(path: Path, data: np.ndarray, **kwargs) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, **kwargs)


@pytest.fixture(params=["zlib-ng", "zlib"])
def inflater(request, monkeypatch):
    """Both inflaters the reader may run with: zlib-ng (installed with ssmbench) and CPython's zlib (its fallback)."""
    if request.param == "zlib":
        import zlib

        monkeypatch.setattr(chunk_rows, "_zlib", zlib)
    else:
        assert chunk_rows._zlib.__name__.startswith("zlib_ng")
    return request.param


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "float32", "int64", "float64"])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("fletcher32", [False, True])
@pytest.mark.parametrize("row_shape", [(37,), (9, 5)])
@pytest.mark.parametrize("at_offsets", [True, False], ids=["pread", "read_direct_chunk"])
@pytest.mark.parametrize("opened", ["Dataset", "low-level"])
def test_inflated_rows_equal_h5py(tmp_path, dtype, shuffle, fletcher32, row_shape, at_offsets, inflater, opened):
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((12, *row_shape)) * 1000).astype(dtype)
    _write(tmp_path / "a.h5", data, chunks=(1, *row_shape), compression="gzip", compression_opts=4,
           shuffle=shuffle, fletcher32=fletcher32)
    rows = rng.permutation(12)[:7]
    dst = rng.permutation(9)[:7]
    with h5py.File(tmp_path / "a.h5", "r") as f:
        dset = f["x"] if opened == "Dataset" else (f, "x")
        reader = rows_reader(dset, file_descriptor(f) if at_offsets else None)
        assert isinstance(reader, InflatedRows) and (reader.table is not None) == at_offsets
        got = np.zeros((9, *row_shape), dtype)
        reader.read_into(got, dst, rows)
    want = np.zeros_like(got)
    want[dst] = data[rows]
    assert np.array_equal(got, want) and got.dtype == want.dtype


@pytest.mark.parametrize("layout", [
    {"chunks": (2, 16), "compression": "gzip"},  # two rows per chunk
    {"chunks": (1, 16)},  # no filter
    {"chunks": (1, 16), "compression": "lzf"},
    {"chunks": (1, 16), "fletcher32": True},  # a checksum without deflate
    {},  # contiguous
])
@pytest.mark.parametrize("opened", ["Dataset", "low-level"])
def test_other_layouts_are_read_through_h5py(tmp_path, layout, opened):
    data = np.arange(8 * 16, dtype=np.int16).reshape(8, 16)
    _write(tmp_path / "a.h5", data, **layout)
    with h5py.File(tmp_path / "a.h5", "r") as f:
        reader = rows_reader(f["x"] if opened == "Dataset" else (f, "x"))
        assert isinstance(reader, DatasetRows)
        got = np.zeros((2, 16), np.int16)
        reader.read_into(got, np.array([1, 0]), np.array([3, 6]))
    assert np.array_equal(got, data[[6, 3]])


def test_ssmbench_shards_take_the_fast_path(pathfinder, listops, tiny_shift):
    """The loader's own tests compare items with h5py's reads; this makes sure they exercise `InflatedRows`."""
    for folder in (pathfinder, listops, tiny_shift):
        ds = open_dataset(folder, "train")
        readers = ds._open(0)
        for k in ("inputs", "targets"):  # chunks read at their offsets in the file
            assert isinstance(readers[k], InflatedRows) and readers[k].table is not None, (folder, k)
        ds.close()


def test_a_chunk_whose_filter_was_skipped_is_read_through_h5py():
    class Chunked:
        shape, chunks, dtype = (4, 3), (1, 3), np.dtype("uint8")

        class id:  # noqa: N801 (h5py's attribute name)
            @staticmethod
            def read_direct_chunk(coord):
                return 1, b"not a zlib stream"

        def __getitem__(self, row):
            return np.full(3, row, np.uint8)

    out = np.zeros((2, 3), np.uint8)
    InflatedRows(Chunked(), shuffled=False).read_into(out, np.array([0, 1]), np.array([2, 3]))
    assert out.tolist() == [[2, 2, 2], [3, 3, 3]]


@pytest.mark.parametrize("where", [0.5, 0.05])
def test_a_flipped_byte_in_a_row_chunk_is_reported_as_damage(tmp_path, tiny_shift, where):
    """One byte flipped inside the stored chunk of train row 3's inputs (middle of the stream, or near its start):
    reading that item fails with the loader's 'damaged' message; the other rows still read."""
    folder = tmp_path / "copy"
    shutil.copytree(tiny_shift, folder)
    ds = open_dataset(folder, "train")
    shard = folder / str(ds._paths[0])
    ds.close()
    with h5py.File(shard, "r") as f:
        info = f["inputs"].id.get_chunk_info_by_coord((3, 0, 0)[:f["inputs"].ndim])
    with open(shard, "r+b") as fh:
        fh.seek(info.byte_offset + int(info.size * where))
        byte = fh.read(1)[0]
        fh.seek(-1, 1)
        fh.write(bytes([byte ^ 0x5A]))
    ds = open_dataset(folder, "train")
    ds[2]
    with pytest.raises(DatasetError, match="damaged"):
        ds[3]


def test_a_chunk_that_inflates_to_the_wrong_size_is_an_error(tmp_path):
    """A well-formed zlib stream of the wrong length in a row's chunk (written raw) is refused, not reshaped."""
    import zlib

    _write(tmp_path / "a.h5", np.zeros((3, 16), np.uint8), chunks=(1, 16), compression="gzip")
    with h5py.File(tmp_path / "a.h5", "r+") as f:
        f["x"].id.write_direct_chunk((1, 0), zlib.compress(bytes(15)))
    with h5py.File(tmp_path / "a.h5", "r") as f:
        reader, out = rows_reader(f["x"]), np.zeros((1, 16), np.uint8)
        reader.read_into(out, np.array([0]), np.array([0]))
        with pytest.raises(OSError, match="decodes to 15 bytes, expected 16"):
            reader.read_into(out, np.array([0]), np.array([1]))


def test_chunks_are_read_at_offsets_only_where_the_file_allows_it(tmp_path):
    """A user block, another file driver, or a row whose chunk was never written: no offsets, chunks come through
    `read_direct_chunk` (or h5py), and the rows still equal h5py's."""
    data = np.arange(4 * 16, dtype=np.uint8).reshape(4, 16)
    with h5py.File(tmp_path / "ub.h5", "w", userblock_size=512) as f:
        f.create_dataset("x", data=data, chunks=(1, 16), compression="gzip")
    with h5py.File(tmp_path / "ub.h5", "r") as f:
        assert file_descriptor(f) is None
    with h5py.File(tmp_path / "ub.h5", "r", driver="core") as f:
        assert file_descriptor(f) is None
    with h5py.File(tmp_path / "holes.h5", "w") as f:
        f.create_dataset("x", shape=(4, 16), dtype=np.uint8, chunks=(1, 16), compression="gzip")[[0, 2]] = data[[0, 2]]
    with h5py.File(tmp_path / "holes.h5", "r") as f:
        fd = file_descriptor(f)
        assert fd is not None and chunk_rows.chunk_table(f["x"], fd, f["x"].shape) is None
        reader, out = rows_reader(f["x"], fd), np.zeros((2, 16), np.uint8)
        assert reader.table is None
        reader.read_into(out, np.array([0, 1]), np.array([2, 0]))
        assert np.array_equal(out, data[[2, 0]])


def test_offsets_that_do_not_give_the_chunk_are_not_used(tmp_path, monkeypatch):
    """The first chunk is read both ways when the table is made: bytes that differ mean no table."""
    _write(tmp_path / "a.h5", np.arange(64, dtype=np.uint8).reshape(4, 16), chunks=(1, 16), compression="gzip")
    with h5py.File(tmp_path / "a.h5", "r") as f:
        fd = file_descriptor(f)
        assert chunk_rows.chunk_table(f["x"], fd, f["x"].shape) is not None
        monkeypatch.setattr(chunk_rows.os, "pread", lambda fd, n, offset: bytes(n))
        assert chunk_rows.chunk_table(f["x"], fd, f["x"].shape) is None
