"""Build-time estimates against measured builds: estimate / measured wall time per paper dataset.

    PYTHONSAFEPATH=1 python benchmarks/data/estimates.py --fraction 0.0625 --workers 2
    PYTHONSAFEPATH=1 python benchmarks/data/estimates.py --only pathfinder-512 cumsum-4096 --fraction 0.01
    PYTHONSAFEPATH=1 python benchmarks/data/estimates.py --against benchmarks/results/paper_suite.json

For each of the 15 paper datasets (the 11 atomic tasks at L = 4096 with 16,000 samples, ListOps-Subtrees preset
dlr and Pathfinder 128 / 256 / 512 with 100,000), at a stated fraction of the paper's sample count (the estimate
is checked for that n; it scales linearly in n beyond the fixed cost):

* estimate: `ssmbench generate ... -n N --workers W --dry-run --json` (its "seconds", fixed cost included);
* measured: the wall time of the same command without --dry-run (not --quiet, so it estimates too, as a user's run
  does), in a fresh temporary data root, from process start to exit; also the CPU seconds of its whole process
  tree (workers included, polled from /proc by `build_memory.watch`).

With `--against RESULTS` nothing is built: each full-size dataset that `ssmbench.data.hub.catalog_build` built and
verified in that run is estimated with its own generate arguments and workers (`--dry-run`), and the estimate is
set against that run's measured build wall time; the suite builds with --quiet, which skips the estimate's probe
(1-3 s), so the probe's own seconds (`probe_seconds`) are taken out of the estimate. Run it on the machine, and in
the conditions, of that suite run.

Prints estimate / measured per dataset and the load average before and after each (timings on a shared machine
follow its load; the estimate is built from CPU time so that it does not). As a load-independent check it also
prints estimate / CPU seconds of the tree: on an idle machine the wall time lies between CPU / cores and CPU (plus
any I/O wait), so that ratio should lie between 1 / cores and 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from benchmarks.data.build_memory import watch  # noqa: E402

ATOMIC = ("shift", "reverse", "cumsum", "cummax", "sort", "select", "select_fixed", "solve", "solve_fixed",
          "context_shift", "mips")
DATASETS = {**{f"{t}-4096": ([t, "--length", "4096"], 16000) for t in ATOMIC},
            "listops_subtrees-dlr": (["listops_subtrees", "--preset", "dlr"], 100_000),
            **{f"pathfinder-{s}": (["pathfinder", "--size", str(s)], 100_000) for s in (128, 256, 512)}}


def _watch(cmd: list[str]) -> dict:
    """`benchmarks.data.build_memory.watch`: wall, CPU and peak RSS of a command's process tree."""
    return watch(cmd)


def _cli() -> str:
    return str(Path(sys.executable).with_name("ssmbench"))


def run(name: str, n: int, workers: int) -> dict:
    args, _ = DATASETS[name]
    with tempfile.TemporaryDirectory(prefix="ssmbench-est-") as tmp:
        base = [_cli(), "generate", *args, "-n", str(n), "--workers", str(workers), "--out", tmp]
        dry = subprocess.run([*base, "--dry-run", "--json"], capture_output=True, text=True, check=True)
        est = json.loads(dry.stdout)["estimate"]
        load0 = os.getloadavg()[0]
        got = _watch(base)
    wall, cpu = got["wall_s"], got["cpu_s"]
    return {"name": name, "n": n, "workers": workers, "estimate_s": est["seconds"], "fixed_s": est["fixed_seconds"],
            "measured_s": wall, "cpu_s": cpu, "ratio": est["seconds"] / wall, "load_start": load0,
            "load_end": os.getloadavg()[0]}


def against(results: Path) -> list[dict]:
    """Dry-run estimates of the full-size, verified datasets of a catalog_build results file vs their build walls."""
    rows = []
    for r in json.loads(results.read_text())["rows"]:
        if r.get("extrapolated") or r.get("verify", {}).get("rc") != 0:
            continue
        workers = r.get("workers", 2)
        with tempfile.TemporaryDirectory(prefix="ssmbench-est-") as tmp:
            cmd = [_cli(), *r["argv"], "--workers", str(workers), "--out", tmp, "--dry-run", "--json"]
            load0 = os.getloadavg()[0]
            est = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["estimate"]
        wall, cpu = r["build"]["wall_s"], r["build"]["cpu_s"]
        seconds = est["seconds"] - est["probe_seconds"]  # the suite's builds are --quiet: no probe
        rows.append({"name": r["name"], "n": r["n"], "workers": workers, "estimate_s": seconds,
                     "fixed_s": est["fixed_seconds"] - est["probe_seconds"], "measured_s": wall, "cpu_s": cpu,
                     "ratio": seconds / wall, "load_start": load0, "load_end": os.getloadavg()[0]})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fraction", type=float, default=1 / 16, help="share of each paper sample count to build")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=None, choices=sorted(DATASETS), metavar="NAME")
    ap.add_argument("--against", type=Path, help="a catalog_build results JSON: estimate its builds, build nothing")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.against:
        print(f"{os.cpu_count()} CPUs; estimates of the full-size builds in {args.against} against their build walls")
        rows = against(args.against)
    else:
        print(f"{os.cpu_count()} CPUs; fraction {args.fraction:g} of the paper sample counts, --workers "
              f"{args.workers}")
        rows = [run(name, max(64, round(DATASETS[name][1] * args.fraction)), args.workers)
                for name in args.only or DATASETS]
    print(f"{'dataset':24s} {'n':>7s} {'estimate s':>10s} {'(fixed)':>8s} {'measured s':>10s} {'CPU s':>7s} "
          f"{'est/meas':>8s} {'est/CPU':>7s}  load start/end")
    for r in rows:
        print(f"{r['name']:24s} {r['n']:7d} {r['estimate_s']:10.1f} {r['fixed_s']:8.1f} {r['measured_s']:10.1f} "
              f"{r['cpu_s']:7.1f} {r['ratio']:8.2f} {r['estimate_s'] / r['cpu_s']:7.2f}  "
              f"{r['load_start']:.2f}/{r['load_end']:.2f}", flush=True)
    ratios = [r["ratio"] for r in rows]
    print(f"est/measured: min {min(ratios):.2f}, max {max(ratios):.2f}; within +-25 %: "
          f"{sum(0.75 <= x <= 1.25 for x in ratios)}/{len(ratios)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
