"""Throughput of the ListOps generators: CPU time per accepted sample, per core and on P processes.

    python benchmarks/data/listops.py --n 2000                  # listops_subtrees, dlr preset
    python benchmarks/data/listops.py --task listops --n 2000   # LRA ListOps, lra preset

Prints, for the task's `generate()` (sampling into memory): ms per accepted sample on one core (one Numba thread),
the throughput of P single-threaded processes, the acceptance rate and the rejected-root breakdown next to the exact
values of the process, the cost of the extra per-block work (de-duplication hashes, statistics), the ratio against
a baseline run in this process (the tests' plain-Python sampler, on a few samples), peak RSS, and the extrapolated
time for the default 100,000 samples. `--write` also times writing the fields into a gzip-4 HDF5 file with the
Spec's settings (the shard writer's work, reported separately). Samples are made in blocks, so memory does not
grow with --n.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from benchmarks.common import load_test_helper  # noqa: E402

DEFAULT_N = 100_000


def _task(name: str):
    from ssmbench.generators.listops import ListOps
    from ssmbench.generators.listops_subtrees import ListOpsSubtrees

    return {"listops_subtrees": ListOpsSubtrees, "listops": ListOps}[name]()


def _keys(task, config, start: int, stop: int) -> np.ndarray:
    from ssmbench.seeding import keys_for

    return keys_for(task.name, task.version, config.to_dict(), 0, "candidates", start, stop)


def _run_range(args: tuple[str, str, int, int, int]) -> tuple[float, float, int]:
    """Generate samples [start, stop) in blocks; returns (cpu s, wall s, roots drawn)."""
    task_name, preset, start, stop, block = args
    from ssmbench.generators import _listops_sampler

    task = _task(task_name)
    config = task.presets[preset]
    cpu, wall, roots = time.process_time(), time.perf_counter(), 0
    for a in range(start, stop, block):
        data, _ = _listops_sampler.sample_batch(config, _keys(task, config, a, min(a + block, stop)), task._label_all)
        roots += int(data["roots_drawn"].sum())
    return time.process_time() - cpu, time.perf_counter() - wall, roots


def _worker_init() -> None:
    import numba

    numba.set_num_threads(1)


def _load_slow_sampler():
    return load_test_helper("listops_oracle")


def _write_block(spec, data: dict[str, np.ndarray], path: str) -> None:
    import h5py

    with h5py.File(path, "w", libver=("earliest", "v110")) as f:
        for name, field in spec.fields.items():
            a = data[name]
            kw = {}
            if field.codec.startswith("gzip"):
                kw = {"compression": "gzip", "compression_opts": int(field.codec.split(":")[1]),
                      "shuffle": field.shuffle}
            chunks = (1, *a.shape[1:]) if a.ndim > 1 else a.shape
            f.create_dataset(name, data=a, chunks=chunks, fletcher32=True, track_times=False, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="listops_subtrees", choices=["listops_subtrees", "listops"])
    ap.add_argument("--preset", default=None, help="default: the task's default preset")
    ap.add_argument("--n", type=int, default=2000, help="accepted samples per measurement")
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--baseline-n", type=int, default=20, help="samples from the plain-Python sampler")
    ap.add_argument("--write", action="store_true", help="also time gzip-4 HDF5 writing of the fields")
    args = ap.parse_args()

    import numba

    from ssmbench.generators import _listops_dedup, _listops_sampler

    task = _task(args.task)
    preset = args.preset or task.default_preset
    config = task.presets[preset]
    print(f"task {task.name} preset {preset}: {config}")
    t0 = time.perf_counter()
    _listops_sampler.sample_batch(config, _keys(task, config, 0, 2), task._label_all)  # compile or load the cache
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, numba {numba.__version__} "
          f"({numba.threading_layer()} threading layer); first call {time.perf_counter() - t0:.2f} s")

    # one core: one Numba thread, blocks of --block samples
    numba.set_num_threads(1)
    n, block = args.n, args.block
    cpu = wall = extra_cpu = write_cpu = 0.0
    written = 0
    outcomes = np.zeros(3, np.int64)
    spec = task.spec(config)
    tmp = tempfile.mkdtemp()
    for a in range(0, n, block):
        k = _keys(task, config, a, min(a + block, n))
        c0, w0 = time.process_time(), time.perf_counter()
        data, oc = _listops_sampler.sample_batch(config, k, task._label_all)
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        outcomes += oc.sum(axis=0)
        c0 = time.process_time()
        _listops_dedup.dedup_hashes(data["inputs"], data["lengths"])
        task.statistics(config, data)
        extra_cpu += time.process_time() - c0
        if args.write:
            c0 = time.process_time()
            _write_block(spec, data, os.path.join(tmp, "block.h5"))
            write_cpu += time.process_time() - c0
            written = len(k)
    ms = 1000 * cpu / n
    roots = int(outcomes.sum()) + n
    exact = _listops_sampler.root_outcomes(config)
    print(f"\none core, generate(): {ms:.3f} ms CPU per accepted sample ({n} samples, wall {wall:.2f} s)")
    print(f"acceptance: {100 * n / roots:.3f} % of {roots} root trees (exact {100 * exact['accepted']:.3f} %); "
          f"rejected: single digit {100 * outcomes[0] / roots:.1f} %, too short {100 * outcomes[1] / roots:.1f} %, "
          f"too long {100 * outcomes[2] / roots:.2f} % (exact {100 * exact['single_digit']:.1f} / "
          f"{100 * exact['too_short']:.1f} / {100 * exact['too_long']:.2f} %)")
    print(f"per-block extras (dedup hashes + statistics): {1000 * extra_cpu / n:.3f} ms CPU per sample")
    if args.write:
        print(f"HDF5 write, gzip-4 + fletcher32, one core: {1000 * write_cpu / n:.3f} ms CPU per sample "
              f"({os.path.getsize(os.path.join(tmp, 'block.h5')) / written / 1024:.1f} KiB per sample on disk)")

    print("the DLR authors' generator, timed beside this one: benchmarks/data/reference_speed.py --dlr PATH --only listops")

    if args.baseline_n > 0:
        slow = _load_slow_sampler()
        rng = random.Random(0)
        c0 = time.process_time()
        for _ in range(args.baseline_n):
            slow.slow_sample(config, rng)
        base = (time.process_time() - c0) / args.baseline_n
        print(f"same-run baseline (plain-Python sampler, tests/generators/listops_oracle.py, {args.baseline_n} "
              f"samples): {1000 * base:.0f} ms CPU per sample -> {1000 * base / ms:.0f}x")

    # P single-threaded processes, each on its own contiguous range of candidates
    p = max(1, args.processes)
    ctx = mp.get_context("spawn")
    with ctx.Pool(p, initializer=_worker_init) as pool:
        pool.map(_run_range, [(task.name, preset, 0, 2, 2)] * p)  # warm: import and load the Numba cache
        w0 = time.perf_counter()
        parts = pool.map(_run_range, [(task.name, preset, n * i // p, n * (i + 1) // p, block) for i in range(p)])
        elapsed = time.perf_counter() - w0
    rate = n / elapsed
    print(f"\n{p} processes: {rate:.0f} samples/s ({elapsed:.2f} s wall for {n}; per-process CPU "
          f"{', '.join(f'{c:.2f}' for c, _, _ in parts)} s)")
    per_sample_s = 1 / rate + (write_cpu / n / p if args.write else 0.0)
    what = "generation + gzip-4 writing" if args.write else "generation only"
    print(f"extrapolated {DEFAULT_N} samples on {p} processes ({what}): {DEFAULT_N * per_sample_s / 60:.1f} min")
    rss_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss_kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS: parent {rss_self:.0f} MiB, largest worker {rss_kids:.0f} MiB")


if __name__ == "__main__":
    main()
