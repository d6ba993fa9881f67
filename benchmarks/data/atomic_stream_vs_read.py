"""Should the atomic paper datasets be written at all? Streaming a batch from the generator vs reading it back.

    PYTHONSAFEPATH=1 python benchmarks/data/atomic_stream_vs_read.py --root /work/paper_data/full
    PYTHONSAFEPATH=1 python benchmarks/data/atomic_stream_vs_read.py --root data --tasks shift,mips --n 1024

For every atomic task whose paper folder (`<root>/<task>-4096`, built by ssmbench.data.hub.catalog_build) exists, the
same `--n` training samples are produced two ways in this process, one Numba thread, process CPU time (best of
3): `TaskStream(task, {"L": 4096}).train_batch(...)` (what the harness does: generate from the keys) and reading
the same rows from the folder's shards with `ssmbench.open_dataset(..., transform="numpy")` (HDF5 decode). The
arrays are compared, so both sides really produce the same samples. Printed per task: ms per sample each way and
their ratio, with the folder's size; the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

ATOMIC = ("shift", "cumsum", "cummax", "reverse", "sort", "select", "select_fixed", "solve", "solve_fixed",
          "context_shift", "mips")


def best_cpu(fn, repeat: int = 3) -> tuple[float, object]:
    out, best = None, float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def main(argv: list[str] | None = None) -> int:
    import numba

    from ssmbench import open_dataset
    from ssmbench.data.read.streaming import TaskStream

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--tasks", default=",".join(ATOMIC))
    ap.add_argument("--n", type=int, default=512)
    args = ap.parse_args(argv)
    numba.set_num_threads(1)
    print(f"# load average at start {os.getloadavg()}; one Numba thread; process CPU time, best of 3")
    print(f"{'task':<14} {'stream ms/sample':>16} {'read ms/sample':>15} {'read/stream':>11} {'folder':>9}")
    for task in args.tasks.split(","):
        folder = args.root / f"{task}-4096"
        if not (folder / "manifest.json").exists():
            continue
        stream = TaskStream(task, {"L": 4096}, seed=0)
        stream.train_batch(step=0, batch_size=8)  # compile / load the kernels first
        ds = open_dataset(folder, "train", transform="numpy")

        def read(ds=ds) -> dict:
            items = [ds[i] for i in range(args.n)]
            return {k: np.stack([it[k] for it in items]) for k in ("inputs", "targets")}

        t_stream, made = best_cpu(lambda s=stream: s.train_batch(step=0, batch_size=args.n))
        t_read, got = best_cpu(read)
        for k in ("inputs", "targets"):
            assert np.array_equal(made[k], got[k]), f"{task}: streamed {k} differ from the folder's"
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        print(f"{task:<14} {1e3 * t_stream / args.n:16.3f} {1e3 * t_read / args.n:15.3f} "
              f"{t_read / t_stream:11.1f} {size / 2**30:8.2f}G")
    print(f"# load average at end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
