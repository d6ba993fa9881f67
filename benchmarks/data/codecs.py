"""Codec per stored field: size, write time and read time for gzip 1-9 (with and without byte shuffle), Zstd and LZ4.

    PYTHONSAFEPATH=1 python benchmarks/data/codecs.py                         # paper configs, ~5 min on 2 cores
    PYTHONSAFEPATH=1 python benchmarks/data/codecs.py --tasks shift,pathfinder:512 --samples 16 --json out.json

For each task at its paper config (atomic tasks at L = 4096, ListOps-Subtrees, Pathfinder at 128 and 512), a block
of real samples is generated once (`task.generate` on the split's own keys), then every per-sample field (scalars
are one chunk per shard and do not matter) is written alone to an HDF5 file the way `ssmbench generate` writes it
(one sample per chunk, fletcher32, no timestamps) with each codec, and read back whole. Times are process CPU
seconds (`time.process_time`; HDF5 filters run in the calling thread), best of `--repeat`, so other jobs on the
machine change them little; the load average is printed at the start and the end. Reported per field and codec:
compression ratio (raw bytes / file bytes), write and read MB/s of raw bytes, and ms per sample.

Defaults are picked by the numbers under one constraint: published shards must open in any HDF5 reader without
plugins, so defaults are gzip settings; Zstd/LZ4 (hdf5plugin) are what `--codec` / `repack` offer for local reads.
Printed per field ("PICK", beside the default of the time): the gzip setting with the least write time among those
whose file is at most 2 % larger than the smallest gzip file. What was decided from the committed results
(benchmarks/results/codecs_cpu_*.txt): the atomic fields went from gzip-4 + shuffle to gzip-1, shuffle only where
it shrinks the field (generators/_atomic.py): the PICK's level differs by under 2 % of size; ListOps and Pathfinder
stay gzip-4, where the PICK's higher levels would cost write time for a few percent of size and level 1 would
make files up to ~20 % larger while saving little of their build time (README, The dataset folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ATOMIC = ("shift", "cumsum", "cummax", "reverse", "sort", "select", "select_fixed", "solve", "solve_fixed",
          "context_shift", "mips")
DEFAULT_TASKS = [f"{t}:4096" for t in ATOMIC] + ["listops_subtrees", "pathfinder:128", "pathfinder:512"]
SIZE_SLACK = 0.02


def codecs() -> list[tuple[str, bool]]:
    out = [("none", False)]
    out += [(f"gzip:{lvl}", sh) for lvl in range(1, 10) for sh in (False, True)]
    out += [(f"zstd:{lvl}", sh) for lvl in (1, 3, 5, 9) for sh in (False, True)]
    out += [("lz4", sh) for sh in (False, True)]
    return out


def filter_kwargs(codec: str, shuffle: bool, shape: tuple[int, ...]) -> dict:
    import hdf5plugin

    kw: dict = {"fletcher32": True, "track_times": False, "chunks": (1, *shape)}
    name, _, level = codec.partition(":")
    if name == "gzip":
        kw.update(compression="gzip", compression_opts=int(level), shuffle=shuffle)
    elif name == "zstd":
        kw.update(hdf5plugin.Zstd(clevel=int(level)), shuffle=shuffle)
    elif name == "lz4":
        kw.update(hdf5plugin.LZ4(), shuffle=shuffle)
    return kw


def samples(spec_name: str, n: int) -> tuple[dict[str, np.ndarray], dict]:
    from ssmbench.seeding import keys_for
    from ssmbench.task_config import resolve_config

    task_name, _, arg = spec_name.partition(":")
    length = int(arg) if arg and task_name in ATOMIC else None
    size = int(arg) if arg and task_name == "pathfinder" else None
    task, config, _ = resolve_config(task_name, length=length, size=size)
    spec = task.spec(config)
    cfg = config.to_dict()
    rows = task.generate(config, keys_for(task_name, task.version, cfg, 0, "train", 0, n, task.stream_exempt))
    fields = {k: f for k, f in spec.fields.items() if f.shape != () and f.codec != "none" and k in rows}
    return {k: np.ascontiguousarray(rows[k]) for k in fields}, {k: f for k, f in fields.items()}


def measure(arr: np.ndarray, codec: str, shuffle: bool, folder: Path, repeat: int) -> dict:
    import h5py
    import hdf5plugin  # noqa: F401  (registers the filters for reading)

    path = folder / "f.h5"
    writes, reads = [], []
    for _ in range(repeat):
        path.unlink(missing_ok=True)
        t0 = time.process_time()
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=arr, **filter_kwargs(codec, shuffle, arr.shape[1:]))
        writes.append(time.process_time() - t0)
        t0 = time.process_time()
        with h5py.File(path, "r") as f:
            back = f["x"][...]
        reads.append(time.process_time() - t0)
    assert np.array_equal(back, arr)
    size = path.stat().st_size
    mb = arr.nbytes / 1e6
    return {"codec": codec, "shuffle": shuffle, "bytes": size, "ratio": arr.nbytes / size,
            "write_s": min(writes), "read_s": min(reads), "write_mb_s": mb / max(min(writes), 1e-9),
            "read_mb_s": mb / max(min(reads), 1e-9), "write_ms_per_sample": 1e3 * min(writes) / len(arr),
            "read_ms_per_sample": 1e3 * min(reads) / len(arr)}


def pick(rows: list[dict]) -> dict:
    gz = [r for r in rows if r["codec"].startswith("gzip")]
    smallest = min(r["bytes"] for r in gz)
    ok = [r for r in gz if r["bytes"] <= smallest * (1 + SIZE_SLACK)]
    return min(ok, key=lambda r: r["write_s"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    ap.add_argument("--samples", type=int, default=32, help="samples per task (Pathfinder 512: a quarter)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    print(f"# {os.cpu_count()} CPUs, load average at start {os.getloadavg()}, python {sys.version.split()[0]}")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tasks.split(","):
            n = max(4, args.samples // 4) if name.endswith(":512") else args.samples
            arrays, fields = samples(name, n)
            for field, arr in arrays.items():
                rows = [measure(arr, c, s, Path(tmp), args.repeat) for c, s in codecs()
                        if not (s and arr.dtype.itemsize == 1)]
                best = pick(rows)
                cur = fields[field]
                current = next(r for r in rows if r["codec"] == cur.codec and r["shuffle"] == (
                    cur.shuffle and arr.dtype.itemsize > 1))
                results[f"{name}/{field}"] = {"dtype": str(arr.dtype), "shape": list(arr.shape),
                                              "current": current, "pick": best, "rows": rows}
                print(f"\n{name} {field} {arr.dtype}{list(arr.shape)}  ({arr.nbytes / 1e6:.1f} MB raw)")
                print(f"  {'codec':<8} {'shuf':<5} {'ratio':>6} {'write MB/s':>10} {'read MB/s':>10} "
                      f"{'write ms/s':>10} {'read ms/s':>9}")
                for r in rows:
                    mark = " PICK" if r is best else ""
                    mark += " (default now)" if r is current else ""
                    print(f"  {r['codec']:<8} {str(r['shuffle']):<5} {r['ratio']:6.3f} {r['write_mb_s']:10.1f} "
                          f"{r['read_mb_s']:10.1f} {r['write_ms_per_sample']:10.3f} {r['read_ms_per_sample']:9.3f}"
                          f"{mark}")
    print("\n# per field: default now -> pick (gzip within 2 % of the smallest gzip file, least write time)")
    for key, v in results.items():
        c, p = v["current"], v["pick"]
        print(f"  {key:<32} {c['codec']}{'+shuf' if c['shuffle'] else ''} ({c['ratio']:.3f}x, "
              f"{c['write_ms_per_sample']:.3f} ms) -> {p['codec']}{'+shuf' if p['shuffle'] else ''} "
              f"({p['ratio']:.3f}x, {p['write_ms_per_sample']:.3f} ms)")
    print(f"# load average at end {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
