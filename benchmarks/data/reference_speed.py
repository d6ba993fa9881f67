"""Same-run speed of the DLR authors' reference generators and ssmbench's, on this machine's Python.

    PYTHONSAFEPATH=1 python benchmarks/data/reference_speed.py --dlr PATH            # about 10 minutes on 2 shared cores
    PYTHONSAFEPATH=1 python benchmarks/data/reference_speed.py --dlr PATH --quick    # smoke run, about 2 minutes
    PYTHONSAFEPATH=1 python benchmarks/data/reference_speed.py --dlr PATH --only atomic,listops --json out.json

PATH is a checkout (or a bare git directory) of the authors' repository ag1988/dlr at commit
580d854c2b725449c30dcb08820d440640aa1f57. The script copies the four generator files it needs into a temporary
folder, replaces the NumPy aliases that NumPy 2 removed (`np.float` -> `float`, `np.round_` -> `np.round`, nothing
else; the counts are checked) and imports them from there. benchmarks/reference_generators/README.md says where
each file comes from, under which licence, and how to get the checkout.

What is timed, all in this process, one core (BLAS, torch and Numba limited to one thread), process CPU time:

* Atomic tasks, L = 4096 (SELECT: L = 4096 noise tokens, M = 32): the reference's `sequence1d.py` functions with
  `batch_shape=()`, one sample per call as its training loader draws them (MIPS with `in_device="cpu"`), against
  `task.generate(config, keys)` on a batch of samples, as `ssmbench generate` calls it. ms per sample, median of
  several repetitions.
* ListOps: the reference's `listops.generate_data` (one worker; the DLR setting 7000 < length < 8180, max_args 9,
  max_depth 15, no parentheses; and the LRA setting 500 < length < 2000, max_args 10, max_depth 10) against the
  `listops_subtrees` / `listops` tasks' `generate()`. Seconds per accepted sample (the reference removes duplicates
  afterwards; neither side's de-duplication is timed).
* Pathfinder-Segmentation 128 / 256 / 512: the reference's `snakes2.from_wrapper` with the settings of its
  `snakes2_wrapper.py` for that size, saving nothing (`save_images`, `save_metadata`, `save_main_segments` off),
  against the `pathfinder` task's `generate()` one image per call. Seconds per image: mean over the images (the cost
  is heavy-tailed: main-pair restarts), median beside it.

Generation into memory only on both sides: no compression, hashing or writing. Other processes may share the
cores; the load average is printed at the start and the end. `--json OUT` saves every number.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before NumPy loads: one BLAS thread on both sides
os.environ.setdefault("TQDM_DISABLE", "1")  # the reference's progress bars

import argparse  # noqa: E402
import contextlib  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType, SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

DLR_COMMIT = "580d854c2b725449c30dcb08820d440640aa1f57"
DLR_FILES = {  # module name here -> path in ag1988/dlr
    "sequence1d": "src/dataloaders/sequence1d.py",
    "listops": "src/dataloaders/prepare/listops/listops.py",
    "snakes": "src/dataloaders/prepare/pathfinder/snakes.py",
    "snakes2": "src/dataloaders/prepare/pathfinder/snakes2.py",
}
ALIAS_EDITS = (  # (pattern, replacement, expected count per module): the only changes made to the reference code
    (r"np\.float\b(?!_)", "float", {"snakes": 5, "snakes2": 4}),
    (r"np\.round_\(", "np.round(", {"snakes2": 2}),
)
ATOMIC = (  # ssmbench task, reference task name, reference function
    ("shift", "shift", "shift"), ("cumsum", "cumsum", "atomic"), ("cummax", "cummax", "atomic"),
    ("reverse", "reverse", "atomic"), ("sort", "sort", "atomic"), ("select", "masked_select", "masked_select"),
    ("select_fixed", "masked_select_fixed", "masked_select"), ("solve", "solve", "solve"),
    ("solve_fixed", "solve_fixed", "solve"), ("context_shift", "context_shift", "context_shift"),
    ("mips", "mips", "mips"),
)
LISTOPS = {  # ssmbench task -> the reference's listops.py arguments (README of prepare/listops in ag1988/dlr)
    "listops_subtrees": {"min_length": 7000, "max_length": 8180, "max_args": 9, "max_depth": 15},
    "listops": {"min_length": 500, "max_length": 2000, "max_args": 10, "max_depth": 10},
}
PATHFINDER = {  # the per-size settings of the reference's snakes2_wrapper.py (commented blocks there)
    128: {"padding": 1, "paddle_margin_list": [2, 3], "seed_distance": 22, "window_size": [128, 128],
          "marker_radius": 2.1, "contour_length": 14, "paddle_thickness": 1.5, "antialias_scale": 2,
          "continuity": 1.8, "paddle_length": 5, "distractor_length": 14 // 3, "num_distractor_snakes": 64 / (14 // 3),
          "snake_contrast_list": [0.9], "mark_distractors": True},
    256: {"padding": 1, "paddle_margin_list": [4], "window_size": [256, 256], "marker_radius": 4.2,
          "contour_length": 16, "paddle_thickness": 2, "antialias_scale": 2, "continuity": 2.2,
          "distractor_length": 16 // 3, "num_distractor_snakes": 16, "snake_contrast_list": [1.0], "paddle_length": 8,
          "mark_distractors": True},
    512: {"padding": 1, "seed_distance": 40, "paddle_margin_list": [7], "window_size": [512, 512], "marker_radius": 9,
          "contour_length": 12, "paddle_thickness": 6, "antialias_scale": 3, "continuity": 2.5,
          "distractor_length": 12 // 3, "num_distractor_snakes": 18, "snake_contrast_list": [1.0],
          "paddle_length": 22, "mark_distractors": True},
}
PATHFINDER_DEFAULTS = {  # snakes2_wrapper.Args() defaults, plus what the wrapper sets after constructing it
    "batch_id": 0, "padding": 1, "antialias_scale": 4, "LABEL": 1, "seed_distance": 27, "marker_radius": 3,
    "contour_length": 15, "distractor_length": 5, "num_distractor_snakes": 6, "snake_contrast_list": [1.0],
    "use_single_paddles": False, "mark_distractors": False, "max_target_contour_retrial": 4,
    "max_distractor_contour_retrial": 4, "max_paddle_retrial": 2, "continuity": 1.4, "paddle_length": 5,
    "paddle_thickness": 1.5, "paddle_margin_list": [4], "paddle_contrast_list": [1.0], "pause_display": False,
    "seed": 0, "segmentation_task": False, "segmentation_task_double_circle": False,
    # timing generation only: nothing is written (the reference writes PNGs, pickles and metadata here)
    "save_images": False, "save_metadata": False, "save_main_segments": False,
}
EXPECTED = {  # what the issue that asked for this script expected the reference to take here (seconds)
    "atomic": (0.16e-3, 0.75e-3), "mips": 76e-3, "listops_subtrees": 0.24,
    "pathfinder_128": 2.5, "pathfinder_256": 5.3, "pathfinder_512": 11.0,
}


# ---------------------------------------------------------------------------------------------------------------
# the reference code: copied from the checkout into a temporary folder, aliases replaced, imported from there
# ---------------------------------------------------------------------------------------------------------------

def _read_dlr_file(dlr: Path, relpath: str) -> str:
    if (dlr / relpath).is_file():
        return (dlr / relpath).read_text()
    if (dlr / "HEAD").is_file() and (dlr / "objects").is_dir():  # a bare git directory
        return subprocess.run(["git", f"--git-dir={dlr}", "show", f"{DLR_COMMIT}:{relpath}"], check=True,
                              capture_output=True, text=True).stdout
    raise SystemExit(f"{dlr} has no {relpath}: pass --dlr a checkout of ag1988/dlr at {DLR_COMMIT[:7]} "
                     "(see benchmarks/reference_generators/README.md)")


def load_reference(dlr: Path, into: Path) -> dict[str, ModuleType]:
    """Copy the reference generators into `into`, replace the removed NumPy aliases and import them.

    >>> mods = load_reference(Path("dlr"), Path(tempfile.mkdtemp()))  # doctest: +SKIP
    >>> sorted(mods)                                                    # doctest: +SKIP
    ['listops', 'sequence1d', 'snakes', 'snakes2']
    """
    edits: dict[str, list[str]] = {}
    for name, relpath in DLR_FILES.items():
        text = _read_dlr_file(dlr, relpath)
        for pattern, repl, expected in ALIAS_EDITS:
            text, count = re.subn(pattern, repl, text)
            if count != expected.get(name, 0):
                raise SystemExit(f"{relpath}: {count} matches of {pattern!r}, expected {expected.get(name, 0)}; "
                                 f"is the checkout at {DLR_COMMIT[:7]}?")
            if count:
                edits.setdefault(name, []).append(f"{pattern} -> {repl} x{count}")
        (into / f"{name}.py").write_text(text)
    sys.path.insert(0, str(into))  # snakes2 does `import snakes`
    importlib.invalidate_caches()
    with contextlib.redirect_stdout(io.StringIO()):
        mods = {name: importlib.import_module(name) for name in DLR_FILES}
    logging.getLogger("listops").setLevel(logging.WARNING)
    print(f"reference: ag1988/dlr {DLR_COMMIT[:7]}, edits: {edits}")
    return mods


# ---------------------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------------------

def _cpu_per_call(fn, calls: int) -> float:
    c0 = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - c0) / calls


def _median_per_call(fn, calls: int, reps: int) -> float:
    fn()  # warm-up
    return statistics.median(_cpu_per_call(fn, calls) for _ in range(reps))


def _keys(task: Any, config: Any, split: str, start: int, stop: int) -> np.ndarray:
    from ssmbench.seeding import keys_for

    return keys_for(task.name, task.version, config.to_dict(), 0, split, start, stop, task.stream_exempt)


def _ssmbench_per_sample(task: Any, config: Any, n: int, reps: int, split: str = "train") -> float:
    """Median CPU seconds per sample of `task.generate` on batches of n fresh keys, one Numba thread."""
    task.generate(config, _keys(task, config, split, 10**7, 10**7 + 2))  # compile / load the kernels
    per = []
    for r in range(reps):
        keys = _keys(task, config, split, r * n, (r + 1) * n)
        c0 = time.process_time()
        task.generate(config, keys)
        per.append((time.process_time() - c0) / n)
    return statistics.median(per)


def reference_atomic(seq: ModuleType, name: str, config: Any) -> Any:
    """A no-argument callable drawing one sample of atomic task `name` with the reference's `sequence1d` module."""
    ref_task, fn_name = next((r, f) for n, r, f in ATOMIC if n == name)
    kwargs: dict[str, Any] = {"task": ref_task, "L": config.L, "batch_shape": ()}
    if name == "shift":
        kwargs["num_shifts"] = config.num_shifts
    if name.startswith("select"):
        kwargs["M"] = config.M
    if name == "mips":
        kwargs.update(D=config.D, causal=config.causal, in_device="cpu", out_device="cpu")
    fn = getattr(seq, fn_name)
    return lambda: fn(**kwargs)


def time_reference_atomic(seq: ModuleType, name: str, config: Any, budget_s: float, reps: int) -> tuple[float, int]:
    """(median CPU seconds per sample, samples timed) of the reference, about budget_s per repetition."""
    draw = reference_atomic(seq, name, config)
    probe = _cpu_per_call(draw, 2)
    calls = max(1, min(400, int(budget_s / max(probe, 1e-6))))
    return _median_per_call(draw, calls, reps), calls * reps


def bench_atomic(ref: dict[str, ModuleType], quick: bool) -> list[dict]:
    from ssmbench.registry import get_task

    rows = []
    for name, _, _ in ATOMIC:
        task = get_task(name)
        config = task.Config(L=4096)
        reps = 3 if quick else 7
        ref_s, ref_n = time_reference_atomic(ref["sequence1d"], name, config, 0.05 if quick else 0.3, reps)
        n = max(2, min(512, int((0.05 if quick else 0.3) / max(ref_s / 20, 1e-6))))
        ours = _ssmbench_per_sample(task, config, n, reps)
        rows.append({"group": "atomic" if name != "mips" else "mips", "task": name, "setting": "L=4096",
                     "unit": "ms/sample", "scale": 1e3, "reference_s": ref_s, "reference_n": ref_n,
                     "ssmbench_s": ours, "ssmbench_n": n * reps})
        print(f"  {name:<14} reference {ref_s * 1e3:8.3f} ms   ssmbench {ours * 1e3:8.4f} ms   "
              f"x{ref_s / ours:7.1f}", flush=True)
    return rows


def bench_listops(ref: dict[str, ModuleType], quick: bool) -> list[dict]:
    from ssmbench.registry import get_task

    rows = []
    for name, setting in LISTOPS.items():
        n_ref = {"listops_subtrees": 6 if quick else 40, "listops": 20 if quick else 200}[name]
        args = SimpleNamespace(seed=0, per_worker_samples=n_ref, num_workers=1, no_paranthesis=True, **setting)
        c0 = time.process_time()
        out = ref["listops"].generate_data(0, args)
        ref_s = (time.process_time() - c0) / len(out)
        task = get_task(name)
        config = task.presets[task.default_preset]
        assert (config.min_length, config.max_length, config.max_args, config.max_depth) == tuple(
            setting[k] for k in ("min_length", "max_length", "max_args", "max_depth")), config
        n = 200 if quick else 2000
        ours = _ssmbench_per_sample(task, config, n, 3, split="candidates")
        rows.append({"group": name, "task": name, "setting": f"{setting['min_length']} < length < "
                     f"{setting['max_length']}", "unit": "s/sample", "scale": 1.0, "reference_s": ref_s,
                     "reference_n": len(out), "ssmbench_s": ours, "ssmbench_n": 3 * n})
        print(f"  {name:<16} reference {ref_s:8.4f} s   ssmbench {ours * 1e3:8.3f} ms   x{ref_s / ours:7.0f}",
              flush=True)
    return rows


def bench_pathfinder(ref: dict[str, ModuleType], quick: bool, sizes: list[int]) -> list[dict]:
    from ssmbench.generators.pathfinder import PRESETS, Pathfinder

    snakes2 = ref["snakes2"]
    task = Pathfinder()
    rows = []
    for size in sizes:
        n_ref = ({128: 3, 256: 2, 512: 1} if quick else {128: 40, 256: 20, 512: 12})[size]
        ref_times = []
        for i in range(n_ref):  # one image per call, batch_id i (the reference seeds each batch from its id)
            args = SimpleNamespace(**{**PATHFINDER_DEFAULTS, **PATHFINDER[size], "batch_id": i, "n_images": 1,
                                      "contour_path": tempfile.gettempdir()})
            c0 = time.process_time()
            with contextlib.redirect_stdout(io.StringIO()):
                snakes2.from_wrapper(args)
            ref_times.append(time.process_time() - c0)
        cfg = PRESETS[str(size)]
        task.generate(cfg, _keys(task, cfg, "train", 10**7, 10**7 + 1))  # compile / load the kernels
        n = 20 if quick else {128: 300, 256: 200, 512: 100}[size]
        keys = _keys(task, cfg, "train", 0, n)
        ours = []
        for i in range(n):
            c0 = time.process_time()
            task.generate(cfg, keys[i:i + 1])
            ours.append(time.process_time() - c0)
        ref_s, ours_s = statistics.fmean(ref_times), statistics.fmean(ours)
        rows.append({"group": f"pathfinder_{size}", "task": "pathfinder", "setting": f"{size}x{size}",
                     "unit": "s/image", "scale": 1.0, "reference_s": ref_s, "reference_n": n_ref,
                     "reference_median_s": statistics.median(ref_times), "reference_max_s": max(ref_times),
                     "ssmbench_s": ours_s, "ssmbench_n": n, "ssmbench_median_s": statistics.median(ours)})
        print(f"  pathfinder {size:<5} reference {ref_s:7.2f} s (median {statistics.median(ref_times):.2f}, "
              f"max {max(ref_times):.1f}, {n_ref} images)   ssmbench {ours_s * 1e3:7.2f} ms   "
              f"x{ref_s / ours_s:7.0f}", flush=True)
    return rows


# ---------------------------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------------------------

def _versions() -> str:
    import numba
    import scipy
    import torch

    mods = [f"python {platform.python_version()}", f"numpy {np.__version__}", f"scipy {scipy.__version__}",
            f"torch {torch.__version__}", f"numba {numba.__version__}"]
    for name in ("cv2", "PIL"):
        with contextlib.suppress(ImportError):
            mods.append(f"{name} {importlib.import_module(name).__version__}")
    return ", ".join(mods)


def _expected(group: str) -> str:
    e = EXPECTED.get(group)
    if e is None:
        return "-"
    if isinstance(e, tuple):
        return f"{e[0] * 1e3:g}-{e[1] * 1e3:g} ms"
    return f"{e * 1e3:g} ms" if e < 1 else f"{e:g} s"


def report(rows: list[dict]) -> list[str]:
    lines = ["", "Same run, one core, CPU time per sample (generation into memory on both sides)",
             f"{'generator':<18}{'setting':<22}{'unit':<10}{'reference':>11}{'n':>5}{'ssmbench':>12}{'n':>6}"
             f"{'ratio':>9}   {'issue expected ref':>18}", "-" * 113]
    for r in rows:
        sc = r["scale"]
        lines.append(f"{r['task']:<18}{r['setting']:<22}{r['unit']:<10}{r['reference_s'] * sc:>11.4g}"
                     f"{r['reference_n']:>5}{r['ssmbench_s'] * sc:>12.4g}{r['ssmbench_n']:>6}"
                     f"{r['reference_s'] / r['ssmbench_s']:>8.0f}x   {_expected(r['group']):>18}")
    atomic = [r["reference_s"] / r["ssmbench_s"] for r in rows if r["group"] == "atomic"]
    if atomic:
        lines.append(f"atomic tasks (10, MIPS apart): ratio {min(atomic):.0f}x to {max(atomic):.0f}x, "
                     f"median {statistics.median(atomic):.0f}x")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dlr", type=Path, default=Path(os.environ.get("SSMBENCH_DLR", "benchmarks/reference_generators/dlr")),
                    help="checkout or bare git directory of ag1988/dlr (default $SSMBENCH_DLR, else "
                         "benchmarks/reference_generators/dlr)")
    ap.add_argument("--quick", action="store_true", help="few samples: a smoke run, not numbers to quote")
    ap.add_argument("--only", default="atomic,listops,pathfinder", help="comma list of atomic, listops, pathfinder")
    ap.add_argument("--sizes", default="128,256,512", help="Pathfinder sizes")
    ap.add_argument("--json", type=Path, help="also write every number here")
    args = ap.parse_args()
    only = set(args.only.split(","))

    import numba
    import torch

    torch.set_num_threads(1)
    numba.set_num_threads(1)
    start = time.time()
    load0 = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}; {platform.platform()}; {os.cpu_count()} CPUs; {_versions()}")
    print(f"load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ssmbench-dlr-") as tmp:
        ref = load_reference(args.dlr, Path(tmp))
        if "atomic" in only:
            print("atomic tasks, L = 4096", flush=True)
            rows += bench_atomic(ref, args.quick)
        if "listops" in only:
            print("ListOps", flush=True)
            rows += bench_listops(ref, args.quick)
        if "pathfinder" in only:
            print("Pathfinder-Segmentation", flush=True)
            rows += bench_pathfinder(ref, args.quick, [int(s) for s in args.sizes.split(",")])
    load1 = os.getloadavg()
    lines = report(rows) + [f"load average at end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; "
                            f"{time.time() - start:.0f} s in all"]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "load_start": load0, "load_end": load1,
                                         "versions": _versions(), "dlr_commit": DLR_COMMIT}, indent=1))


if __name__ == "__main__":
    main()
