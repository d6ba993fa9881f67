"""Pathfinder-Segmentation generator speed: ms per image per core, with and without writing.

    PYTHONSAFEPATH=1 python benchmarks/data/pathfinder.py --size 128 --n 200
    PYTHONSAFEPATH=1 python benchmarks/data/pathfinder.py --size 512 --n 2000 --baseline-n 1 --json pf512.json
    PYTHONSAFEPATH=1 python benchmarks/data/pathfinder.py --size 128 --n 300 --before 0c2872d --only-before

What is measured (kernels compiled and warmed up first; train keys of root seed 0 from `ssmbench.seeding`):

* Generation alone, per core: `Pathfinder.generate` one image per call with one Numba thread; process CPU time
  per image (mean, median, p95, max; the cost is heavy-tailed because of main-pair retries).
* Generation + compression + writing, per core: `ssmbench.data.make.shards.write_shard` for one shard of the same images
  with the Spec's storage fields (gzip-4, fletcher32, one image per chunk, content and row sha256, statistics,
  fsync, rename, file sha256), i.e. the work `ssmbench generate` does per shard. Its "write" part is the shard
  job's CPU time minus the generate calls inside it; the figure reported is generate-only + write part (both
  per image, process CPU time), and the whole shard job per image is printed beside it. Also bytes on disk.
* Two cores: wall-clock images/s of `generate` with 2 Numba threads (prange over images) on the same keys, in
  blocks of 64 images.
* Extrapolation (labelled as such): the default 100,000-image dataset on this 2-core machine, from the per-core
  generate+write cost divided by 2 cores.
* Target (the project's, per core including writing): 46 / 120 / 140 ms per image at 128 / 256 / 512. The DLR
  authors' generator is timed beside this one by `benchmarks/data/reference_speed.py --dlr PATH --only pathfinder`.
* Same-run baseline: the plain NumPy whole-image implementation (`ssmbench.generators._pathfinder_slow`, which
  produces byte-identical images) on the first `--baseline-n` images, against the fast generator on those same
  images (both process CPU time; the per-image cost depends mostly on the image's main-pair attempts).
* Peak RSS of the process (`ru_maxrss`).
* Before/after (`--before REF`, default 0c2872d, the last commit before the issue-17 speedups): the Pathfinder
  generator modules of that git revision are loaded from `git show` into a package of their own and timed in the
  same run on the same keys, one thread, process CPU time of whole-block `generate` calls, `--reps` rounds
  alternating old and new (the minimum per image reported, and every round); the outputs must be byte-identical.
  Also `statistics()` of the same block, old (`np.bincount` of the masks) against new. `--only-before` skips
  the rest.

Other processes may share the cores: the load average is printed, and CPU time (not wall time) is used per core.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from ssmbench.generators.pathfinder import PRESETS, Pathfinder
from ssmbench.seeding import keys_for

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from benchmarks.common import REPO  # noqa: E402

TARGET_MS = {128: 46.0, 256: 120.0, 512: 140.0}
"""The project's targets per core including compression and writing (ms per image)."""


def _keys(cfg, start: int, stop: int) -> np.ndarray:
    return keys_for("pathfinder", Pathfinder.version, cfg.to_dict(), 0, "train", start, stop, Pathfinder.stream_exempt)


def per_image_cpu(task: Pathfinder, cfg, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    times = np.empty(len(keys))
    attempts = np.empty(len(keys), dtype=np.int64)
    for i in range(len(keys)):
        t0 = time.process_time()
        out = task.generate(cfg, keys[i:i + 1])
        times[i] = time.process_time() - t0
        attempts[i] = int(out["n_pair_attempts"][0])
    return times, attempts


def write_cpu(task: Pathfinder, cfg, n: int, root: Path) -> tuple[float, float, int]:
    """(CPU s of the whole shard job, CPU s of the generate calls inside it, file bytes)."""
    from ssmbench.data.make.shards import ShardSpec, storage_fields, write_shard

    shard = ShardSpec("train", 0, 1, 0, n)
    fields = storage_fields(task.spec(cfg))
    inside = [0.0]

    def rows(lo: int, hi: int) -> dict:
        t = time.process_time()
        out = task.generate(cfg, _keys(cfg, lo, hi))
        inside[0] += time.process_time() - t
        return out

    t0 = time.process_time()
    write_shard(root, shard, fields, rows, {"task": "pathfinder"}, {}, 64, lambda block: task.statistics(cfg, block))
    return time.process_time() - t0, inside[0], (root / shard.relpath).stat().st_size


BEFORE = "0c2872d"
"""The last commit before the issue-17 speedups."""


def load_revision(ref: str):
    """The `pathfinder` module of git revision `ref`, with its own copies of the generator modules it imports."""
    import hashlib
    import importlib
    import subprocess

    root = REPO
    sha = subprocess.run(["git", "-C", str(root), "rev-parse", ref], capture_output=True, text=True,
                         check=True).stdout.strip()
    name = f"pf_{sha[:12]}"
    pkg = Path(tempfile.gettempdir()) / f"ssmbench-bench-{hashlib.sha256(str(root).encode()).hexdigest()[:8]}"
    (pkg / name).mkdir(parents=True, exist_ok=True)
    listed = subprocess.run(["git", "-C", str(root), "ls-tree", "--name-only", sha, "generators/"],
                            capture_output=True, text=True, check=True).stdout.split()
    for path in listed:
        base = path.rsplit("/", 1)[-1]
        if base.startswith("_pathfinder") or base in ("_rng.py", "pathfinder.py"):
            text = subprocess.run(["git", "-C", str(root), "show", f"{sha}:{path}"], capture_output=True, text=True,
                                  check=True).stdout
            target = pkg / name / base
            if not target.exists() or target.read_text() != text:  # keep Numba's cache between runs
                target.write_text(text)
    (pkg / name / "__init__.py").write_text("")
    sys.path.insert(0, str(pkg))
    return importlib.import_module(f"{name}.pathfinder"), sha


def before_after(size: int, n: int, ref: str, reps: int) -> dict:
    """Same-run CPU ms per image of revision `ref` and of this checkout, on the same keys, one thread."""
    from ssmbench.generators import pathfinder as new

    old, sha = load_revision(ref)
    cfg_new, cfg_old = new.PRESETS[str(size)], old.PRESETS[str(size)]
    keys = _keys(cfg_new, 0, n)
    numba.set_num_threads(1)
    for mod, cfg in ((old, cfg_old), (new, cfg_new)):  # compile / load the kernels
        mod.generate_with_geometry(cfg, keys[:1], geometry=False)
    rounds: dict[str, list[float]] = {"before": [], "after": []}
    outs = {}
    for _ in range(reps):
        for label, mod, cfg in (("before", old, cfg_old), ("after", new, cfg_new)):
            t0 = time.process_time()
            outs[label] = mod.generate_with_geometry(cfg, keys, geometry=False)
            rounds[label].append(1000 * (time.process_time() - t0) / n)
    identical = all(np.array_equal(outs["before"][k], outs["after"][k]) for k in outs["before"])
    stats = {}
    for label, mod, cfg in (("before", old, cfg_old), ("after", new, cfg_new)):
        t0 = time.process_time()
        for _ in range(3):
            stats[label] = mod.Pathfinder().statistics(cfg, outs["after"])
        stats[f"{label}_ms"] = 1000 * (time.process_time() - t0) / 3 / n
    same_stats = all(np.array_equal(np.asarray(stats["before"][k]), np.asarray(stats["after"][k]))
                     for k in stats["before"])
    b, a = min(rounds["before"]), min(rounds["after"])
    print(f"  before/after ({ref} = {sha[:10]} vs this checkout), {n} images, 1 thread, {reps} rounds: "
          f"{b:.2f} -> {a:.2f} CPU ms/image = {b / a:.2f}x  (rounds before "
          f"{', '.join(f'{v:.2f}' for v in rounds['before'])}; after {', '.join(f'{v:.2f}' for v in rounds['after'])})"
          f"; byte-identical: {identical}")
    print(f"  statistics(): {stats['before_ms']:.3f} -> {stats['after_ms']:.3f} CPU ms/image; identical: {same_stats}")
    return {"before_ref": sha, "before_ms": b, "after_ms": a, "speedup": b / a, "identical": identical,
            "rounds": rounds, "stats_before_ms": stats["before_ms"], "stats_after_ms": stats["after_ms"],
            "stats_identical": same_stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, choices=sorted(TARGET_MS), default=128)
    ap.add_argument("--n", type=int, default=200, help="images to time")
    ap.add_argument("--baseline-n", type=int, default=None, help="images for the slow baseline (default 3/2/1)")
    ap.add_argument("--json", type=Path, help="also write every number here")
    ap.add_argument("--before", default=BEFORE, help=f"git revision to time beside this checkout [{BEFORE}]; "
                    "'none' to skip")
    ap.add_argument("--reps", type=int, default=3, help="before/after rounds")
    ap.add_argument("--only-before", action="store_true", help="only the before/after comparison")
    args = ap.parse_args()
    size, n = args.size, args.n
    cfg = PRESETS[str(size)]
    task = Pathfinder()
    load = os.getloadavg()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numba {numba.__version__}, "
          f"numpy {np.__version__}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.before != "none":
        print(f"\nPathfinder-Segmentation {size}x{size}")
        ba = before_after(size, n, args.before, args.reps)
        load = os.getloadavg()
        print(f"  load average at the end {load[0]:.2f}")
        if args.only_before:
            if args.json:
                args.json.write_text(json.dumps(ba, indent=1))
            return
    threads = numba.get_num_threads()
    task.generate(cfg, _keys(cfg, 10**6, 10**6 + 1))  # compile / load the kernels
    numba.set_num_threads(1)
    keys = _keys(cfg, 0, n)
    gen, attempts = per_image_cpu(task, cfg, keys)
    with tempfile.TemporaryDirectory() as tmp:
        total_job, gen_inside, nbytes = write_cpu(task, cfg, n, Path(tmp))
    numba.set_num_threads(min(2, threads))
    t0 = time.perf_counter()
    for lo in range(0, n, 64):  # blocks, as `ssmbench generate` does: memory stays bounded whatever n is
        task.generate(cfg, keys[lo:lo + 64])
    wall2 = time.perf_counter() - t0
    numba.set_num_threads(threads)
    gen_ms = 1000 * gen.mean()
    write_ms = 1000 * (total_job - gen_inside) / n  # compression, hashing, statistics, HDF5 I/O
    full_ms = gen_ms + write_ms
    res = {
        "size": size, "n": n, "gen_ms_mean": gen_ms, "gen_ms_median": 1000 * float(np.median(gen)),
        "gen_ms_p95": 1000 * float(np.quantile(gen, 0.95)), "gen_ms_max": 1000 * float(gen.max()),
        "mean_pair_attempts": float(attempts.mean()), "gen_write_ms": full_ms, "write_ms": write_ms,
        "shard_job_ms": 1000 * total_job / n,
        "bytes_per_image": nbytes / n, "mib_per_1000": nbytes / n * 1000 / 2**20,
        "images_per_s_1core": 1000 / full_ms, "images_per_s_2threads_generate": n / wall2,
        "extrapolated_100k_hours_2cores": 100_000 * full_ms / 1000 / 2 / 3600,
        "extrapolated_100k_gib": 100_000 * nbytes / n / 2**30,
    }
    print(f"\nPathfinder-Segmentation {size}x{size}, {n} train images of seed 0 (mean main-pair attempts "
          f"{res['mean_pair_attempts']:.0f}), one core (process CPU time)")
    print(f"  generate only        : {gen_ms:8.2f} ms/image  (median {res['gen_ms_median']:.2f}, p95 "
          f"{res['gen_ms_p95']:.2f}, max {res['gen_ms_max']:.1f})")
    print(f"  generate+gzip+write  : {full_ms:8.2f} ms/image  ({res['images_per_s_1core']:.1f} images/s per core; "
          f"write part {write_ms:.2f} ms)   target <= {TARGET_MS[size]:.0f} ms: "
          f"{'PASS' if full_ms <= TARGET_MS[size] else 'FAIL'}; whole shard job {res['shard_job_ms']:.2f} ms/image")
    print(f"  on disk              : {res['bytes_per_image'] / 1024:.1f} KiB/image, {res['mib_per_1000']:.2f} MiB "
          f"per 1,000 images")
    print(f"  2 threads (generate) : {res['images_per_s_2threads_generate']:.1f} images/s wall clock")
    print("  the DLR authors' generator, timed beside this one: benchmarks/data/reference_speed.py --dlr PATH "
          "--only pathfinder")
    print(f"  extrapolation (not measured): 100,000 images on 2 cores ~ "
          f"{res['extrapolated_100k_hours_2cores'] * 60:.0f} min, {res['extrapolated_100k_gib']:.2f} GiB on disk")
    nb = args.baseline_n if args.baseline_n is not None else {128: 3, 256: 2, 512: 1}[size]
    if nb > 0:
        from ssmbench.generators._pathfinder_slow import SlowPathfinder

        slow = SlowPathfinder(cfg)
        t0 = time.process_time()
        for k in keys[:nb]:
            img, _, _ = slow.render(int(k))
        base = (time.process_time() - t0) / nb
        fast = float(gen[:nb].mean())
        res.update(baseline_s_per_image=base, baseline_images=nb, fast_same_images_ms=1000 * fast,
                   ratio_vs_baseline=base / fast, baseline_attempts=attempts[:nb].tolist())
        print(f"  same-run baseline (plain NumPy whole-image implementation, byte-identical output), first {nb} "
              f"image(s), attempts {attempts[:nb].tolist()}: {base:.2f} CPU-s/image vs {1000 * fast:.2f} ms -> "
              f"{base / fast:.0f}x")
    if args.before != "none":
        res["before_after"] = ba
    res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = os.getloadavg()
    print(f"  peak RSS {res['peak_rss_mib']:.0f} MiB; load average at the end {load[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
