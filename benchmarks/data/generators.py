"""Throughput of the atomic-task generators: samples/s and MB/s per task, one thread and all cores.

    PYTHONSAFEPATH=1 python benchmarks/data/generators.py                     # full run (a few minutes)
    PYTHONSAFEPATH=1 python benchmarks/data/generators.py --quick             # smoke check (< 60 s), no L = 2^20
    PYTHONSAFEPATH=1 python benchmarks/data/generators.py --tasks shift,cumsum --json out.json
    PYTHONSAFEPATH=1 python benchmarks/data/generators.py --dlr PATH      # + the DLR authors' generators, same run

(`PYTHONSAFEPATH=1` keeps the repository root off sys.path, so the installed `ssmbench` package is imported.)

What is measured, per task (each task in its own fresh subprocess, so peak memory is the task's own):

* Generation into memory: `task.generate(config, keys)` for a batch of samples at L = 4096 (SHIFT also at L = 2^16
  and, without --quick, 2^20), keys from `ssmbench.seeding.keys_for` (computed inside the timed region; each
  repetition uses fresh sample indices). Kernels are compiled/loaded and warmed up first. A calibration run picks
  the batch: about 0.3 s per repetition (0.05 s with --quick), outputs capped at 24 MiB (16 MiB) and at least two
  samples per thread; the batch is timed 9-100 times (about 2.5 s in all; 5+ and 0.3 s with --quick) with one
  Numba thread (`numba.set_num_threads(1)`, the per-core figure) and with all threads (the kernels use prange over
  samples). Reported: microseconds per sample, samples/s and MB/s of raw output bytes (the sum of `nbytes` of
  every returned array, 1 MB = 1e6 bytes).
  Because other processes may share the cores, the per-core figure (the one compared with the reference and the
  baseline, and behind the one-thread samples/s and MB/s) is the median process CPU time per sample of the
  one-thread runs (`time.process_time`, user + system); the one-thread wall-clock median and best are printed
  beside it and agree with it on a quiet core. All-core figures are wall-clock medians (what the machine delivered
  during the run). After the first repetition the allocator reuses the output pages (hence the 24 MiB cap, below
  glibc's largest mmap threshold of 32 MiB); the first repetition's CPU time per sample ("cold 1st": fresh
  first-touch pages, expensive in some VMs) is printed too. Batches above 32 MiB (SHIFT at 2^16 and 2^20, where
  even the minimum batch is larger) land on fresh pages every time.
* Peak memory: the process peak RSS (VmHWM from /proc/self/status, reset through /proc/self/clear_refs before the
  generation runs where the kernel allows it; else `ru_maxrss`, a process high-water mark) over the generation
  runs, next to the RSS just before them (interpreter, NumPy, Numba, compiled kernels) and the size of one batch
  of outputs.
* Reference (only with `--dlr PATH`, a checkout of the authors' repository ag1988/dlr; see
  benchmarks/reference_generators/README.md): the DLR authors' generator of the same task and L (`sequence1d.py`,
  one sample per call, one torch thread), timed in the same worker process as ssmbench's generator (process CPU
  time, median of 7 repetitions), loaded by `benchmarks/data/reference_speed.py` (which also times ListOps and
  Pathfinder). Target: one-thread generation at least 10x faster than that same-run reference on every task; 50x
  is the stretch goal. PASS/FAIL is computed from the measured per-core figure. Without --dlr no ratio is printed.
* Same-run baseline ("the plain-NumPy oracle implementation"): per sample, the inputs are drawn with plain NumPy
  from `np.random.default_rng(0)` in the task's input layout (inf-normalised normal noise, i.e. divided by its max
  |.|; cos/sin positional channels computed per sample; SELECT marks from `rng.choice` without replacement, sorted;
  SOLVE's A = Q diag(sign diag R) from `np.linalg.qr` of a Gaussian matrix, X a unit vector, B = A X in float64;
  CONTEXT-SHIFT's offset from `rng.integers` encoded as (cos, sin); MIPS's queries, keys and values as normalised
  Gaussian rows; the FIXED variants reuse `task.fixed_arrays`), and the targets come from `task.oracle(config,
  {"inputs": x})`. One thread of BLAS (OPENBLAS/OMP/MKL_NUM_THREADS=1), a few samples (MIPS's oracle is O(L^2)),
  timed (process CPU time, like the per-core figure) as one loop after one warm-up sample. A plug-in task without
  a builder here times the oracle alone on a generated sample's inputs (labelled "oracle only").
* Shard writing, reported separately (L = 4096, one Numba thread): `ssmbench.data.make.shards.write_shard` for one train
  shard of N samples with the Spec's storage fields (gzip + shuffle + fletcher32, `sample_id`), per-field content
  sha256, per-row sha256, fsync, rename and whole-file sha256 - the work `ssmbench generate` does per shard. The
  generation inside it is timed separately; "write" is the rest. Reported: ms/sample of both, raw MB/s and on-disk
  MB/s of the write part, and the compression ratio (raw bytes / file bytes).

The machine (CPU count, Numba/NumPy versions) and the load average (other processes may share the cores) are
printed at the top and the bottom; `--json OUT` saves every number.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)

ATOMIC_TASKS = ("shift", "cumsum", "cummax", "reverse", "sort", "select", "select_fixed", "solve", "solve_fixed",
                "context_shift", "mips")

TARGET_SPEEDUP = 10.0
STRETCH_SPEEDUP = 50.0
BLAS_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# ----------------------------------------------------------------------------------------------------------------
# measurement helpers (run inside the per-task subprocess)
# ----------------------------------------------------------------------------------------------------------------

def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter of this process (Linux >= 4.0); False when not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_mib(key: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _peak_rss_mib() -> float:
    hwm = _status_mib("VmHWM")
    if hwm is not None:
        return hwm
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _keys(task, config, start: int, stop: int) -> np.ndarray:
    from ssmbench.seeding import keys_for

    return keys_for(task.name, task.version, config.to_dict(), 0, "train", start, stop, task.stream_exempt)


def _nbytes(out: dict) -> int:
    return int(sum(np.asarray(v).nbytes for v in out.values()))


def _time_generate(task, config, n: int, reps: int, threads: int, offset: int) -> dict:
    """Per-sample wall-clock (median, best) and process CPU time (median) of `reps` batches of n samples."""
    import numba

    numba.set_num_threads(threads)
    task.generate(config, _keys(task, config, 0, max(threads, 1)))  # warm the thread pool at this width
    wall, cpu = [], []
    for r in range(reps):
        lo = offset + r * n
        t0, c0 = time.perf_counter(), time.process_time()
        out = task.generate(config, _keys(task, config, lo, lo + n))
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        del out
    return {"median_s": statistics.median(wall) / n, "best_s": min(wall) / n,
            "cpu_median_s": statistics.median(cpu) / n, "cpu_best_s": min(cpu) / n,
            "cpu_first_s": cpu[0] / n}  # the first batch lands on fresh (first-touch) pages


# --- the plain-NumPy baseline: inputs drawn with NumPy in each task's layout, targets from task.oracle ----------

def _ninf(rng: np.random.Generator, n: int) -> np.ndarray:
    g = rng.standard_normal(n)
    return g / max(float(np.abs(g).max()), 1e-12)


def _pos(T: int) -> np.ndarray:
    angle = 2.0 * np.pi * np.arange(T, dtype=np.float64) / T
    return np.stack([np.cos(angle), np.sin(angle)], axis=1)


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    g = rng.standard_normal((n, d))
    return g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-12)


def _baseline_inputs(name: str, config, rng: np.random.Generator, fixed: dict) -> np.ndarray | None:
    """One sample's inputs (T, d_in) float32 drawn with plain NumPy, or None for a task without a builder."""
    L = config.L
    if name in ("shift", "cumsum", "cummax"):
        return np.column_stack([_ninf(rng, L), _pos(L)]).astype(np.float32)
    if name in ("reverse", "sort"):
        v = np.concatenate([_ninf(rng, L), np.zeros(L)])
        return np.column_stack([v, _pos(2 * L)]).astype(np.float32)
    if name in ("select", "select_fixed"):
        M = config.M
        T = L + 2 * M
        marks = fixed["positions"] if name == "select_fixed" else np.sort(rng.choice(L + M, M, replace=False))
        v = np.concatenate([_ninf(rng, L + M), np.zeros(M)])
        marker = np.zeros(T)
        marker[marks] = 1.0
        return np.column_stack([v, marker, _pos(T)]).astype(np.float32)
    if name in ("solve", "solve_fixed"):
        from ssmbench.generators.solve import solve_size

        N = solve_size(L)
        if name == "solve_fixed":
            a = fixed["A"]
        else:
            q, r = np.linalg.qr(rng.standard_normal((N, N)))
            d = np.sign(np.diag(r))
            d[d == 0] = 1.0
            a = (q * d).astype(np.float32)
        x = _unit_rows(rng, 1, N)[0]
        b = a.astype(np.float64) @ x
        v = np.zeros(L)
        v[: N * (N + 1)] = np.column_stack([a, b]).ravel()
        return np.column_stack([v, _pos(L)]).astype(np.float32)
    if name == "context_shift":
        k = int(rng.integers(0, L - 2))
        angle = 2.0 * np.pi * k / L
        v = np.concatenate([[np.cos(angle), np.sin(angle)], _ninf(rng, L - 2)])
        return np.column_stack([v, _pos(L)]).astype(np.float32)
    if name == "mips":
        D = config.D
        return np.column_stack([_unit_rows(rng, L, D), _unit_rows(rng, L, D), _unit_rows(rng, L, D),
                                _pos(L)]).astype(np.float32)
    return None


def _time_baseline(task, config, n: int) -> dict:
    """Seconds per sample of the plain-NumPy generator (NumPy inputs + task.oracle), checked against the Spec."""
    rng = np.random.default_rng(0)
    fixed = task.fixed_arrays(config) if hasattr(task, "fixed_arrays") else {}
    spec = task.spec(config)
    probe = _baseline_inputs(task.name, config, rng, fixed)
    kind = "numpy inputs + oracle"
    if probe is None:  # plug-in task: oracle alone on generated inputs
        kind = "oracle only"
        generated = task.generate(config, _keys(task, config, 0, n + 1))["inputs"]
    else:
        assert probe.shape == spec.fields["inputs"].shape, (probe.shape, spec.fields["inputs"].shape)
    first = task.oracle(config, {"inputs": probe if probe is not None else generated[0]})  # warm-up
    assert np.asarray(first["targets"]).shape == spec.fields["targets"].shape
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        x = _baseline_inputs(task.name, config, rng, fixed) if probe is not None else generated[i + 1]
        task.oracle(config, {"inputs": x})
    return {"s_per_sample": (time.perf_counter() - t0) / n, "cpu_s_per_sample": (time.process_time() - c0) / n,
            "samples": n, "kind": kind}


def _time_shards(task, config, n: int) -> dict:
    """One train shard of n samples through ssmbench.data.make.shards.write_shard, one Numba thread."""
    import numba

    from ssmbench.data.make.shards import make_plan, storage_fields, write_shard

    numba.set_num_threads(1)
    spec = task.spec(config)
    fields = storage_fields(spec)
    shard = make_plan({"train": n}, n)[0]
    gen_s = [0.0]
    gen_cpu = [0.0]
    raw = [0]

    def make_rows(lo: int, hi: int) -> dict:
        t0, c0 = time.perf_counter(), time.process_time()
        out = task.generate(config, _keys(task, config, lo, hi))
        gen_s[0] += time.perf_counter() - t0
        gen_cpu[0] += time.process_time() - c0
        raw[0] += _nbytes(out) + 8 * (hi - lo)  # + sample_id
        return out

    stats_fn = (lambda block: task.statistics(config, block)) if hasattr(task, "statistics") else None
    fixed = task.fixed_arrays(config) if hasattr(task, "fixed_arrays") else {}
    block = int(max(1, min(256, (64 << 20) // max(spec.bytes_per_sample(), 1))))  # as ssmbench.data.make.generate does
    attrs = {"task": task.name, "task_version": task.version, "config_json": json.dumps(config.to_dict())}
    with tempfile.TemporaryDirectory(prefix="ssmbench-bench-") as tmp:
        t0, c0 = time.perf_counter(), time.process_time()
        record = write_shard(Path(tmp), shard, fields, make_rows, attrs, fixed, block, stats_fn)
        total, total_cpu = time.perf_counter() - t0, time.process_time() - c0
    write_s = total - gen_s[0]
    return {"samples": n, "total_s": total, "generate_s": gen_s[0], "write_s": write_s,
            "generate_cpu_s": gen_cpu[0], "write_cpu_s": total_cpu - gen_cpu[0], "raw_bytes": raw[0],
            "file_bytes": int(record["num_bytes"]), "ratio": raw[0] / max(int(record["num_bytes"]), 1),
            "write_raw_MBps": raw[0] / write_s / 1e6, "write_disk_MBps": record["num_bytes"] / write_s / 1e6}


def _reference_ms(job: dict, task, config) -> float | None:
    """ms per sample of the DLR authors' generator for this task and L, timed here (None without --dlr)."""
    if not job.get("dlr"):
        return None
    import torch

    from benchmarks.data import reference_speed as rs
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="ssmbench-dlr-") as tmp:
        seq = rs.load_reference(Path(job["dlr"]), Path(tmp))["sequence1d"]
        seconds, _ = rs.time_reference_atomic(seq, task.name, config, 0.05 if job["quick"] else 0.3,
                                              3 if job["quick"] else 7)
    return seconds * 1e3


def worker(job: dict) -> dict:
    """Everything measured for one (task, L) in this fresh process."""
    import numba

    from ssmbench.registry import get_task

    quick = job["quick"]
    task = get_task(job["task"])
    config = task.Config(L=job["L"])
    ncpu = numba.config.NUMBA_NUM_THREADS
    t_import = time.perf_counter()
    numba.set_num_threads(1)
    warm = task.generate(config, _keys(task, config, 0, 2))  # compile / load the cache
    bytes_per_sample = _nbytes(warm) / 2
    compile_s = time.perf_counter() - t_import
    # calibration: pick the batch so one repetition takes about target_s on one thread, its outputs below glibc's
    # largest mmap threshold (32 MiB) so repetitions reuse warm pages (as write_shard's blocks mostly do), and the
    # repetition count so all repetitions take about total_s on one thread
    t0 = time.perf_counter()
    task.generate(config, _keys(task, config, 2, 6))
    est = (time.perf_counter() - t0) / 4
    target_s, total_s = (0.05, 0.3) if quick else (0.3, 2.5)
    cap_bytes = (16 if quick else 24) << 20
    n_max = 64 if quick else 512
    n = int(np.clip(target_s / max(est, 1e-9), 2 * ncpu, n_max))
    n = max(2 * ncpu, min(n, int(cap_bytes // bytes_per_sample)))
    n = -(-n // ncpu) * ncpu  # a multiple of the thread count
    reps = int(np.clip(np.ceil(total_s / (n * max(est, 1e-9))), 5 if quick else 9, 100))
    del warm
    peak_reset = _reset_peak_rss()
    rss_before = _status_mib("VmRSS")
    one = _time_generate(task, config, n, reps, 1, 10_000)
    allc = _time_generate(task, config, n, reps, ncpu, 10_000 + reps * n)
    peak = _peak_rss_mib()
    res = {"task": task.name, "L": config.L, "batch": n, "reps": reps, "threads_all": ncpu,
           "bytes_per_sample": bytes_per_sample, "compile_or_load_s": compile_s,
           "one_thread": one, "all_cores": allc,
           "peak_rss_mib": peak, "rss_before_mib": rss_before,
           "peak_rss_kind": "VmHWM (reset)" if peak_reset else "process high-water mark",
           "batch_out_mib": n * bytes_per_sample / 2**20,
           "reference_ms": None,
           "loadavg": os.getloadavg()}
    # baseline: fewer samples; O(L^2) oracle for MIPS, big arrays at 2^16 / 2^20
    if task.name == "mips":
        nb = 1 if quick else 3
    elif config.L >= 2**20:
        nb = 2
    elif config.L >= 2**16:
        nb = 4 if quick else 8
    else:
        nb = 8 if quick else 32
    res["baseline"] = _time_baseline(task, config, nb)
    res["reference_ms"] = _reference_ms(job, task, config)
    if job["shards"]:
        ns = (4 if quick else 16) if task.name == "mips" else (32 if quick else 256)
        res["shards"] = _time_shards(task, config, ns)
    return res


# ----------------------------------------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------------------------------------

def _run_job(job: dict) -> dict:
    env = {**os.environ, **BLAS_ENV, "PYTHONSAFEPATH": "1"}
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(job)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"benchmark of {job['task']} at L={job['L']} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _machine() -> dict:
    import numba

    return {"cpus": os.cpu_count(), "numba_threads": numba.config.NUMBA_NUM_THREADS, "numba": numba.__version__,
            "numpy": np.__version__, "python": platform.python_version(), "cpu": _cpu_name(),
            "platform": platform.platform(), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "loadavg_start": os.getloadavg()}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _fmt_l(L: int) -> str:
    return f"2^{L.bit_length() - 1}" if L & (L - 1) == 0 and L > 4096 else str(L)


def _per_core_s(r: dict) -> float:
    """The per-core figure: median process CPU time per sample of the one-thread runs (robust to shared cores)."""
    return r["one_thread"]["cpu_median_s"]


def _report(results: list[dict], machine: dict) -> list[str]:
    k = machine["numba_threads"]
    lines = ["", "Generation into memory (task.generate). 1 thread: CPU time per sample (median; smp/s and MB/s "
             "from it), wall median and best;", f"{k} threads: wall-clock median (the machine's real throughput now); "
             "MB/s of raw output bytes; scale = 1-thread wall / all-thread wall",
             f"{'task':<14}{'L':>6}{'batch':>6} | {'1 thr cpu us':>12}{'wall med':>10}{'best':>9}{'smp/s':>8}"
             f"{'MB/s':>7} | {f'{k} thr wall us':>14}{'smp/s':>8}{'MB/s':>7}{'scale':>6} | {'peak RSS (before)':>17}"
             f"{'batch':>7}", "-" * 136]
    for r in results:
        b = r["bytes_per_sample"]
        o, a = r["one_thread"], r["all_cores"]
        c = _per_core_s(r)
        lines.append(
            f"{r['task']:<14}{_fmt_l(r['L']):>6}{r['batch']:>6} | {c * 1e6:>12.1f}{o['median_s'] * 1e6:>10.1f}"
            f"{o['best_s'] * 1e6:>9.1f}{1 / c:>8.0f}{b / c / 1e6:>7.0f} | {a['median_s'] * 1e6:>14.1f}"
            f"{1 / a['median_s']:>8.0f}{b / a['median_s'] / 1e6:>7.0f}{o['median_s'] / a['median_s']:>6.2f} | "
            f"{r['peak_rss_mib']:>8.0f}Mi ({(r['rss_before_mib'] or 0):>3.0f}Mi){r['batch_out_mib']:>5.0f}Mi")
    lines += ["", "Per core vs the DLR authors' generator (same run, --dlr; CPU time) and vs the same-run "
              "baseline (plain-NumPy inputs + task.oracle, CPU time, n samples)",
              f"{'task':<14}{'L':>6} | {'1 thr ms/smp':>12}{'cold 1st':>10} | {'reference (same run) ms':>27}"
              f"{'x ref':>8} | {'baseline ms':>12}{'n':>4}{'x base':>8}", "-" * 107]
    for r in results:
        o = _per_core_s(r) * 1e3
        ref = r["reference_ms"]
        base = r["baseline"]["cpu_s_per_sample"] * 1e3
        cold = r["one_thread"]["cpu_first_s"] * 1e3
        lines.append(f"{r['task']:<14}{_fmt_l(r['L']):>6} | {o:>12.4f}{cold:>10.4f} | "
                     f"{(f'{ref:.4g}' if ref else 'n/a'):>27}{(f'{ref / o:.1f}' if ref else '-'):>8} | "
                     f"{base:>12.3f}{r['baseline']['samples']:>4}{base / o:>8.1f}")
    shard_rows = [r for r in results if "shards" in r]
    if shard_rows:
        lines += ["", "Shard writing, reported separately (write_shard, one thread: gzip+shuffle+fletcher32 HDF5, "
                  "content/row/file sha256, fsync); write = total - generation;",
                  "gen = CPU time of generate() inside the shard (its first block lands on fresh pages, cf. 'cold 1st'"
                  "); write and total are wall-clock, (cpu) the write's CPU time",
                  f"{'task':<14}{'n':>5} | {'gen ms/smp':>10}{'write ms/smp':>13}{'(cpu)':>8}{'total ms/smp':>13} | "
                  f"{'raw MB/s':>9}{'disk MB/s':>10}{'ratio':>7}{'file MB':>9}", "-" * 103]
        for r in shard_rows:
            s = r["shards"]
            n = s["samples"]
            gen = s["generate_cpu_s"] / n * 1e3
            lines.append(f"{r['task']:<14}{n:>5} | {gen:>10.3f}{s['write_s'] / n * 1e3:>13.3f}"
                         f"{s['write_cpu_s'] / n * 1e3:>8.3f}{s['total_s'] / n * 1e3:>13.3f} | "
                         f"{s['write_raw_MBps']:>9.0f}{s['write_disk_MBps']:>10.0f}{s['ratio']:>7.2f}"
                         f"{s['file_bytes'] / 1e6:>9.1f}")
    lines += ["", f"Target: one-thread generation >= {TARGET_SPEEDUP:g}x faster than the same-run reference "
              f"(stretch {STRETCH_SPEEDUP:g}x), judged on the median one-thread CPU time per sample"]
    for r in results:
        ref = r["reference_ms"]
        if not ref:
            continue
        o = _per_core_s(r) * 1e3
        wall = r["one_thread"]["median_s"] * 1e3
        verdict = "PASS" if ref / o >= TARGET_SPEEDUP else "FAIL"
        stretch = "; stretch 50x met" if ref / o >= STRETCH_SPEEDUP else ""
        lines.append(f"{verdict}  {r['task']:<14} L={_fmt_l(r['L']):<6} {o:.4f} ms/sample vs reference {ref:.4g} ms: "
                     f"{ref / o:.2f}x (need <= {ref / TARGET_SPEEDUP:.4g} ms; wall median {ref / wall:.1f}x){stretch}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small batches, skip SHIFT at 2^20 (< 60 s)")
    p.add_argument("--tasks", default=",".join(ATOMIC_TASKS), help="comma-separated task names")
    p.add_argument("--json", help="write every number to this JSON file")
    p.add_argument("--no-shards", action="store_true", help="skip the shard-writing measurement")
    p.add_argument("--dlr", help="checkout of ag1988/dlr: also time the authors' generators in the same run "
                                 "(benchmarks/reference_generators/README.md)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    dlr = str(Path(args.dlr).resolve()) if args.dlr else None
    jobs = [{"task": t, "L": 4096, "quick": args.quick, "shards": not args.no_shards, "dlr": dlr} for t in names]
    if "shift" in names:
        jobs.append({"task": "shift", "L": 2**16, "quick": args.quick, "shards": False, "dlr": dlr})
        if not args.quick:
            jobs.append({"task": "shift", "L": 2**20, "quick": args.quick, "shards": False, "dlr": dlr})
    machine = _machine()
    la = machine["loadavg_start"]
    print(f"ssmbench generator benchmark ({'quick' if args.quick else 'full'}) - {machine['date']}")
    print(f"machine: {machine['cpus']} CPUs ({machine['cpu']}), numba {machine['numba']} with "
          f"{machine['numba_threads']} threads, numpy {machine['numpy']}, Python {machine['python']}")
    print(f"load average at start: {la[0]:.2f} {la[1]:.2f} {la[2]:.2f} (other processes may share the cores)")
    t0 = time.perf_counter()
    results = []
    for job in jobs:
        print(f"  measuring {job['task']} at L={_fmt_l(job['L'])} ...", flush=True)
        results.append(_run_job(job))
    machine["loadavg_end"] = os.getloadavg()
    machine["wall_s"] = time.perf_counter() - t0
    for line in _report(results, machine):
        print(line)
    le = machine["loadavg_end"]
    print(f"\nload average at end: {le[0]:.2f} {le[1]:.2f} {le[2]:.2f}; benchmark wall time {machine['wall_s']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
