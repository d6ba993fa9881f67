"""Before a long run, estimate what it will write: disk size and time, from a probe shard written for real.

Time is modelled from CPU seconds, so the estimate does not follow the load of the moment: generation CPU per
sample (one Numba thread, over at least PROBE_CPU_S of samples, since Pathfinder's cost per image is
heavy-tailed), write CPU per sample (the probe shard: compression, hashing, HDF5), spread over the cores the build
uses (a one-worker build runs the generator's Numba threads in this process, measured as the probe's parallel
speedup, and writes serially; a pool runs one thread per worker), plus the fixed cost of a command: this
process's start-up CPU (interpreter, imports) and kernel loading, repeated by the pool's workers, this probe
(a run without --quiet makes it again) and FINALIZE_S.

The first call of a task's Numba kernels compiles them when Numba's on-disk cache is cold (a fresh install, an
edited source, a new Numba; Pathfinder: about 100 CPU-seconds, against a few for loading them from the cache). The
probe's first call is watched for Numba compile events: when it compiled, its CPU seconds are `compile_seconds`,
counted once in `seconds` but not in `probe_seconds` (a --quiet build skips the probe, not the compile, which then
happens in its own first block), and recorded in `<user cache>/ssmbench/compile-seconds.json` under the task, its
version and the Numba version (`recorded_compile_seconds`); a warm cache adds nothing, and the estimate notes what
a cold one would add (`compile_seconds_cold`) when it has been measured on this machine.

A dry run (`later=True`) estimates a build that runs afterwards, in another process. When its own probe compiled
the kernels, it also wrote them to Numba's cache, so that build only loads them: the compile is left out, the
loading (`load_seconds`: measured on a warm cache and recorded beside the compile time, else LOAD_S) put in, and
the human time says so. Counted either way exactly once: the same process (a build's own estimate) pays the compile
it measured, a later one the loading. (Before, a dry run right after a fresh install predicted 2.7 times the build
that followed: issue 37.)

The probe generates 2k training samples (k = 8 to 64, by sample size) and writes them as a shard with the build's
own storage settings (chunking, shuffle, codec, fletcher32, root attributes, fixed arrays) into a temporary
folder: its chunks give the stored bytes per row. The HDF5 metadata of each shard (chunk index, headers,
attributes, fixed arrays) does not depend on the values, so it is measured on shards of zeros of the plan's
lengths. The manifest, data card, croissant.json and preview are added for the folder's size. De-duplicated tasks
also keep their candidate shards under `.build/` until finalize, so their peak is about twice the final size.

>>> from ssmbench.data.make.generate import plan_build
>>> from ssmbench.registry import get_task
>>> task, config = get_task("cumsum"), get_task("cumsum").Config(L=64)
>>> est = estimate_build(task, config, plan_build("cumsum", config, n=4000, samples_per_shard=256), workers=1)
>>> est["probe_samples"], est["disk_bytes"] > 4000 * est["per_sample_bytes"], est["disk_human"].endswith("MiB")
(64, True, True)
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ...config import canonical_json
from ...plain import human_bytes, human_seconds
from ...seeding import keys_for
from .shards import ShardSpec, block_rows, storage_fields, write_shard

SMALL_FILES = 20 << 10
"""manifest.json, README.md and croissant.json of a folder with one shard (measured: 18-23 KiB)."""
PER_SHARD_FILES = 1 << 10
"""What each shard adds to manifest.json and croissant.json (its entry with hashes)."""
PREVIEW = 64 << 10
"""preview.png of tasks that draw one (pathfinder: 45-65 KiB)."""
PROBE_BYTES = 16 << 20
"""Raw bytes the probe writes at most: k = clamp(PROBE_BYTES / (2 * bytes per sample), 8, 64)."""
PROBE_CPU_S = 0.5
"""Generation is timed over more blocks of 2k samples until it has taken this much CPU (at most 64 blocks)."""
FINALIZE_S = 0.3
"""Manifest, data card, croissant.json and the folder check after the last shard (measured on an idle 2-core VM,
from the last progress update to exit: 0.15-0.37 s for cumsum folders of 64-4,000 samples)."""
PREVIEW_S = 0.8
"""Drawing preview.png, for tasks that have one (Pathfinder-128 with 3,000 images: 1.1 s after the last update)."""
LOAD_S = 1.0
"""CPU seconds loading a task's kernels from a warm Numba cache, until measured on this machine (Pathfinder:
0.75 s, the atomic tasks less)."""
POOL_START_S = 0.2
"""Starting a process pool (forkserver) before its workers import anything (a 64-sample 2-worker cumsum build:
0.8 s from the estimate's end to the last update, of which the workers' imports and kernel loading are the rest)."""


_cpu = time.process_time
"""The clock of the estimate's CPU seconds (tests put a fake one here)."""


def _chunk_bytes(path: Path) -> int:
    """Bytes the stored (compressed) rows of an HDF5 shard take: every dataset but the fixed arrays, no metadata."""
    import h5py

    sizes: list[int] = []

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset) and not name.startswith("fixed/"):
            sizes.append(obj.id.get_storage_size())

    with h5py.File(path, "r", locking=False) as h5:
        h5.visititems(visit)
    return sum(sizes)


def say_on_stderr(message: str) -> None:
    """One line on stderr (a build's notices; the progress bar, when there is one, says it instead)."""
    import sys

    print(message, file=sys.stderr, flush=True)


def estimate_build(task: Any, config: Any, plan: Any, workers: int, probe: int | None = None,
                   later: bool = False, say: Callable[[str], None] | None = say_on_stderr) -> dict[str, Any]:
    """Disk bytes (final folder, and peak while building) and seconds of the plan, from a written probe; `later`:
    of a build that runs afterwards in another process (a dry run's), which finds the kernels this probe compiled
    in Numba's cache. `say` is told when the probe starts compiling kernels (default: a line on stderr; None:
    silent, for the checks a --quiet build runs too).

    Returns `disk_bytes`, `peak_bytes`, `seconds` (`probe_seconds` of it are this probe, which a --quiet build
    skips), their human forms, `raw_bytes` (uncompressed samples),
    `per_sample_bytes` (stored bytes of a row), `metadata_bytes` (of every shard) and `probe_samples`.
    """
    spec = task.spec(config)
    startup = _cpu()  # CPU this process spent before: interpreter and imports (each worker repeats it)
    k = probe or int(np.clip(PROBE_BYTES // (2 * max(spec.bytes_per_sample(), 1)), 8, 64))
    keys = keys_for(plan.task, plan.version, plan.config, plan.seed, "train", 0, 2 * k, task.stream_exempt)
    load, compiled = load_kernels(task, config, keys[:1], say)  # compile / load the kernels outside the timing
    compile_s = load if compiled else 0.0
    record_compile_seconds(task, load, "compile" if compiled else "load")
    warm_load = recorded_compile_seconds(task, "load") if compiled else load
    warm_load = LOAD_S if warm_load is None else warm_load  # what a process that finds the cache warm pays
    gen_seconds, par, block = _generation_cost(task, config, plan, keys)
    fields = storage_fields(spec, plan.codec)
    attrs = {"task": plan.task, "task_version": plan.version, "dataset_id": plan.dataset_id,
             "config_json": canonical_json(plan.config).decode(), "split": "train"}
    fixed = task.fixed_arrays(config)

    def rows(lo: int, hi: int) -> dict[str, np.ndarray]:
        return {name: block[name][lo:hi] for name in fields if name != "sample_id"}

    rows_per_block = block_rows(spec.bytes_per_sample())

    def zeros(lo: int, hi: int) -> dict[str, np.ndarray]:
        return {name: np.zeros((hi - lo, *f.shape), f.dtype) for name, f in fields.items() if name != "sample_id"}

    with tempfile.TemporaryDirectory(prefix="ssmbench-estimate-") as tmp:
        c1 = _cpu()
        probe_shard = ShardSpec("train", 0, 1, 0, 2 * k)
        write_shard(Path(tmp) / "probe", probe_shard, fields, rows, attrs, fixed, 2 * k)
        write_seconds = (_cpu() - c1) / (2 * k)
        per_sample = _chunk_bytes(Path(tmp) / "probe" / probe_shard.relpath) / (2 * k)
        # HDF5 metadata (chunk index, headers, attributes, fixed arrays) depends on the row count, not the values:
        # measured on a shard of zeros of each length the plan uses
        meta = {}
        for m in sorted({s.stop - s.start for s in plan.shards}):
            shard = ShardSpec("train", 0, 1, 0, m)
            record = write_shard(Path(tmp) / f"z{m}", shard, fields, zeros, attrs, fixed, min(m, rows_per_block))
            meta[m] = record["num_bytes"] - _chunk_bytes(Path(tmp) / f"z{m}" / shard.relpath)
    total = sum(plan.sizes.values())
    shards = len(plan.shards)
    metadata = sum(meta[s.stop - s.start] for s in plan.shards)
    disk = metadata + per_sample * total + SMALL_FILES + PER_SHARD_FILES * shards
    disk += PREVIEW if task.card_preview else 0
    disk += sum(a.nbytes + 128 for a in fixed.values())  # fixed.npy
    cores = os.cpu_count() or 1
    fixed_s = FINALIZE_S + (PREVIEW_S if task.card_preview else 0.0)
    if workers <= 1:  # this process: the generator's threads, then a serial write
        per_sample_s = gen_seconds / par + write_seconds
    else:  # a pool: one thread per worker, workers busy until the shards run out
        busy = min(workers, cores, max(1, len(plan.shards)))
        per_sample_s = (gen_seconds + write_seconds) / busy
        # the workers load what this process compiled (from the cache) or loaded
        fixed_s += POOL_START_S + (startup + warm_load) * max(1.0, workers / cores)
    probe_s = _cpu() - startup - load  # a run that is not --quiet pays for this estimate too
    kernels_s = warm_load if later else load  # a later process loads what this one compiled; this one paid it
    seconds = fixed_s + startup + kernels_s + probe_s + per_sample_s * total
    peak = disk
    if task.deduplicate:  # candidates (total + about 1 %) stay under .build/ until finalize copies the survivors
        peak += (metadata + per_sample * total) * 1.01
        seconds += write_seconds * total / (1 if workers <= 1 else min(workers, cores))
    raw = sum(np.asarray(block[name]).nbytes for name in fields if name in block) / (2 * k)
    cold = recorded_compile_seconds(task) if not compiled else compile_s
    time_human = human_seconds(seconds)
    if compiled and later:
        time_human += (f" (this dry run compiled the {task.name} kernels in {human_seconds(compile_s)}, once per "
                       "machine, and cached them for the build)")
    elif compiled:
        time_human += (f" ({human_seconds(compile_s)} of it compiling the {task.name} kernels, once per machine: "
                       "Numba's cache was cold)")
    return {"seconds": seconds, "time_human": time_human, "disk_bytes": int(disk),
            "disk_human": human_bytes(disk), "peak_bytes": int(peak), "peak_human": human_bytes(peak),
            "raw_bytes": int(raw * total), "per_sample_bytes": per_sample, "metadata_bytes": metadata,
            "probe_samples": k, "gen_cpu_per_sample": gen_seconds, "write_cpu_per_sample": write_seconds,
            "fixed_seconds": fixed_s + startup + kernels_s + probe_s, "probe_seconds": probe_s,
            "load_seconds": warm_load,
            "generator_threads_speedup": par, "compile_seconds": compile_s, "numba_cache": "cold" if compiled else
            "warm", "compile_seconds_cold": cold}


def load_kernels(task: Any, config: Any, keys: np.ndarray,
                 say: Callable[[str], None] | None = None) -> tuple[float, bool]:
    """(CPU seconds, whether Numba compiled) of the task's first `generate` and `statistics` calls in this
    process: every kernel a build calls is compiled there when Numba's cache is cold, else loaded from it (or
    already in memory). `statistics` too: Pathfinder's `value_counts` was otherwise compiled by the build that
    followed a dry run, uncounted. `say` gets `compiling_notice` once if a compile starts."""
    c0 = _cpu()
    try:
        from numba.core import event
    except ImportError:  # pragma: no cover - numba is a dependency
        task.statistics(config, task.generate(config, keys))
        return _cpu() - c0, False
    with event.install_recorder("numba:compile") as recorder, announce_compiles(task, say):
        task.statistics(config, task.generate(config, keys))
    return _cpu() - c0, bool(recorder.buffer)


def compiling_notice(task: Any) -> str:
    """What a build says while Numba compiles the task's kernels (otherwise a silent minute for Pathfinder).

    >>> from ssmbench.registry import get_task
    >>> compiling_notice(get_task("cumsum")).startswith("compiling the cumsum kernels (first run only")
    True
    """
    took = recorded_compile_seconds(task)
    about = f", about {human_seconds(took)}" if took else ""
    return f"compiling the {task.name} kernels (first run only{about})..."


@contextmanager
def announce_compiles(task: Any, say: Callable[[str], None] | None) -> Iterator[None]:
    """Within the block, call `say(compiling_notice(task))` once, when Numba starts compiling (nothing on a warm
    cache, nothing when `say` is None)."""
    if say is None:
        yield
        return
    from numba.core import event

    said = []

    class Notice(event.Listener):
        def on_start(self, ev: Any) -> None:
            if not said:
                said.append(True)
                say(compiling_notice(task))

        def on_end(self, ev: Any) -> None:
            pass

    with event.install_listener("numba:compile", Notice()):
        yield


def compile_record_file() -> Path:
    """`$XDG_CACHE_HOME/ssmbench/compile-seconds.json` (default `~/.cache/...`): measured kernel compile times."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ssmbench" / "compile-seconds.json"


def _compile_key(task: Any, kind: str = "compile") -> str:
    try:
        import numba

        version = numba.__version__
    except ImportError:  # pragma: no cover
        version = "none"
    key = f"{task.name} v{task.version} numba {version}"
    return key if kind == "compile" else f"{key} {kind}"


def recorded_compile_seconds(task: Any, kind: str = "compile") -> float | None:
    """CPU seconds compiling (`kind="load"`: loading from a warm cache) `task`'s kernels took when last measured on
    this machine (this task version and Numba version), or None."""
    import json

    try:
        value = json.loads(compile_record_file().read_text()).get(_compile_key(task, kind))
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def record_compile_seconds(task: Any, seconds: float, kind: str = "compile") -> None:
    """Remember a measured compile (or `kind="load"`) time (best effort: an unwritable cache folder only loses the
    record)."""
    import json

    file = compile_record_file()
    try:
        try:
            records = json.loads(file.read_text())
            records = records if isinstance(records, dict) else {}
        except (OSError, ValueError):
            records = {}
        records[_compile_key(task, kind)] = round(float(seconds), 3)
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(records, indent=1, sort_keys=True))
        os.replace(tmp, file)
    except OSError:
        pass


def _generation_cost(task: Any, config: Any, plan: Any, keys: np.ndarray) -> tuple[float, float, dict]:
    """(CPU s per sample with one Numba thread, the speedup of the default thread count, the first block)."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        numba = None
    threads = numba.get_num_threads() if numba is not None else 1
    t0 = time.perf_counter()
    block = task.generate(config, keys)  # all threads, as a one-worker build runs it
    wall = time.perf_counter() - t0
    n = len(keys)
    if numba is not None:
        numba.set_num_threads(1)
    try:
        spent, count, first = 0.0, 0, 0.0
        while (spent < PROBE_CPU_S or count == 0) and count < 64 * n:
            more = keys if count == 0 else keys_for(plan.task, plan.version, plan.config, plan.seed, "train",
                                                     count, count + n, task.stream_exempt)
            c1 = time.process_time()
            task.generate(config, more)
            spent += time.process_time() - c1
            first = first or spent
            count += n
    finally:
        if numba is not None:
            numba.set_num_threads(threads)
    per_sample = spent / count
    par = float(np.clip(first / max(wall, 1e-9), 1.0, max(threads, 1)))  # the same keys on all threads, 1 thread
    return per_sample, par, block
