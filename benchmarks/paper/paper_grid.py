"""Run the next unfinished cells of the paper-protocol Table 1 grid, in a fixed priority order, within a time budget.

Each cell is one `ssmbench eval --preset paper` run (model, task, task variant, learning rate, seed). A cell whose
`metrics.json` is already under RESULTS/<cell>/ (committed: benchmarks/results/paper/) is skipped; a cell whose run
folder RUNS/<cell>/ holds a `last.pt` is resumed. A run still going when the budget is about to end is stopped with
SIGINT (it saves `last.pt` and exits 130; the next call of this script resumes it). Each finished cell's
`config.json`, `metrics.json`, `metrics.jsonl` and the exact command go to RESULTS/<cell>/, and a summary line per
cell is appended to RESULTS/grid_log.tsv.

Usage (GPU machine; the priority order is CELLS below; benchmarks/paper/gpu/paper_table1.sh wraps one device call):

    python3 benchmarks/paper/paper_grid.py --budget 540 --device cuda --workers 6
    python3 benchmarks/paper/paper_grid.py --budget 400 --device cuda --workers 4 --parallel 3   # 3 cells at once
    python3 benchmarks/paper/paper_grid.py --list                           # the cells, in order, done or not
    python3 benchmarks/paper/paper_grid.py --packed --budget 540 --device cuda --workers 2   # preset cells as packs

CPU smoke test with tiny steps (same code path, seconds per cell; never mixed with real results):

    python benchmarks/paper/paper_grid.py --budget 120 --device cpu --workers 1 --tiny --results /tmp/grid \\
        --runs /tmp/grid_runs --only 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from benchmarks.common import REPO  # noqa: E402

# Overrides that shrink a cell to seconds on a CPU (--tiny): the paper row's settings otherwise stay as they are.
TINY = {"L": 128, "model.d_state": 64, "model.d_model": 16, "train.steps": 12, "train.eval_every": 6,
        "eval.val_samples": 32, "eval.test_samples": 32}


@dataclass(frozen=True)
class Cell:
    """One run of the grid: `ssmbench eval --model MODEL --task TASK --preset paper` plus `overrides`."""

    model: str
    task: str
    seed: int
    overrides: dict[str, object] = field(default_factory=dict)
    """Task variant and learning rate; empty: the preset row's own values."""

    @property
    def name(self) -> str:
        parts = [self.model, self.task]
        parts += [f"{k.split('.')[-1]}{v}" for k, v in sorted(self.overrides.items())]
        return "-".join(parts + [f"s{self.seed}"])

    def command(self, device: str, workers: int, out: Path, tiny: dict[str, object] | None) -> list[str]:
        keys = dict(self.overrides, **({"data.workers": workers} | (tiny or {})))
        argv = [sys.executable, "-m", "ssmbench", "eval", "--model", self.model, "--task", self.task,
                "--preset", "paper", "--device", device, "--seed", str(self.seed), "--out", str(out), "-q"]
        for key, value in keys.items():
            argv += ["-o", f"{key}={value}"]
        return argv


def _cells() -> list[Cell]:
    """Issue 25's order: SELECT-FIXED (noise at 5e-5, zeros at 5e-5 and 1e-4), CUMMAX at both rates, seeds 0 then
    1; SELECT-FIXED noise at the table's 1e-4; then the other DLR Table-1 cells at the preset's rates, then
    ATTENTION's."""
    select_fixed = [("noise", 5e-5), ("zeros", 5e-5), ("zeros", 1e-4)]
    out = [Cell("dlr", "select_fixed", 0, {"values": v, "train.lr": lr}) for v, lr in select_fixed]
    out += [Cell("dlr", "cummax", 0, {"train.lr": lr}) for lr in (5e-5, 1e-4)]
    out += [Cell("dlr", "select_fixed", 1, {"values": v, "train.lr": lr}) for v, lr in select_fixed]
    out += [Cell("dlr", "cummax", 1, {"train.lr": lr}) for lr in (5e-5, 1e-4)]
    # the table's own reading (Table 5: 1e-4) on the default data, measured once before at b1fffb6 (.58, .61)
    out += [Cell("dlr", "select_fixed", s, {"values": "noise", "train.lr": 1e-4}) for s in (0, 1)]
    table1 = ["shift", "cumsum", "reverse", "sort", "select", "solve", "solve_fixed", "context_shift", "mips"]
    out += [Cell("dlr", task, 0) for task in table1]
    out += [Cell("attention", task, 0) for task in ["select_fixed", "cummax", *table1]]
    out += [Cell("dlr", task, 1) for task in table1]  # issue 39: the column with seeds 0 and 1 (as packs)
    out += [Cell("attention", task, 1) for task in ["select_fixed", "cummax", *table1]]
    return out


CELLS = _cells()


def _done(cell: Cell, results: Path, runs: Path) -> bool:
    return (results / cell.name / "metrics.json").is_file() or (runs / cell.name / "metrics.json").is_file()


def _collect(cell: Cell, run: Path, results: Path, argv: list[str], device_name: str) -> dict:
    dest = results / cell.name
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "metrics.json", "metrics.jsonl"):
        if (run / name).is_file():
            shutil.copy2(run / name, dest / name)
    shown = ["ssmbench", *argv[3:]]
    (dest / "command.txt").write_text(" ".join(shown) + f"\n# device: {device_name}\n"
                                      f"# commit: {os.environ.get('SSMBENCH_COMMIT', 'unknown')}\n")
    return json.loads((run / "metrics.json").read_text())


def _device_name(device: str) -> str:
    if not device.startswith("cuda"):
        return "cpu"
    import torch

    return torch.cuda.get_device_name(0)


def _start(cell: Cell, device: str, workers: int, runs: Path, tiny: dict[str, object] | None) -> subprocess.Popen:
    run = runs / cell.name
    argv = cell.command(device, workers, run, tiny)
    resume = (run / "checkpoints" / "last.pt").is_file()
    if resume:
        argv = [sys.executable, "-m", "ssmbench", "eval", "--resume", str(run), "-q", "--device", device]
    elif run.exists():
        shutil.rmtree(run)  # started but never checkpointed: nothing to keep
    print(f"[grid] {'resume' if resume else 'start'} {cell.name}: {' '.join(argv[3:])}", flush=True)
    return subprocess.Popen(argv, cwd=REPO)


def _record(cell: Cell, rc: int, wall: float, device: str, workers: int, results: Path, runs: Path,
            tiny: dict[str, object] | None, device_name: str) -> bool:
    """Log one ended cell (grid_log.tsv and stdout); copy a finished one's files to RESULTS. True when finished."""
    run = runs / cell.name
    status = "finished" if rc == 0 and (run / "metrics.json").is_file() else f"stopped (exit {rc})"
    line = [cell.name, status, f"{wall:.0f}s", device_name]
    if status == "finished":
        metrics = _collect(cell, run, results, cell.command(device, workers, run, tiny), device_name)
        test = metrics.get("test", {})
        line += [f"test_r2={test.get('r2', float('nan')):.4f}",
                 f"test_r2_batchavg={test.get('r2_batchavg', float('nan')):.4f}"]
    print("[grid] " + "  ".join(line), flush=True)
    with open(results / "grid_log.tsv", "a") as log:
        log.write("\t".join(line) + "\n")
    return status == "finished"


def run_grid(budget: float, device: str, workers: int, results: Path, runs: Path,
             tiny: dict[str, object] | None, only: int | None, margin: float, parallel: int = 1) -> int:
    """Run cells in order until the budget is spent, up to `parallel` at once (one GPU shared: small models leave
    most of it idle); returns the number of cells finished in this call. Runs still going `margin` seconds before
    the deadline get SIGINT, save `last.pt` and exit 130."""
    deadline = time.monotonic() + budget
    device_name = _device_name(device)
    results.mkdir(parents=True, exist_ok=True)
    todo = [c for c in CELLS if not _done(c, results, runs)]
    todo = todo[:only] if only else todo
    running: dict[str, tuple[Cell, subprocess.Popen, float]] = {}
    finished, failed, interrupted = 0, False, False
    while todo or running:
        while todo and len(running) < parallel and not failed and not interrupted:
            left = deadline - time.monotonic()
            if left < margin + 30:
                print(f"[grid] {left:.0f} s left: stopping before {todo[0].name}", flush=True)
                todo = []
                break
            cell = todo.pop(0)
            running[cell.name] = (cell, _start(cell, device, workers, runs, tiny), time.monotonic())
        if not running:
            break
        if not interrupted and time.monotonic() > deadline - margin:
            for _, proc, _ in running.values():
                proc.send_signal(signal.SIGINT)  # each run saves last.pt and exits 130
            interrupted = True
        for name, (cell, proc, t0) in list(running.items()):
            rc = proc.poll()
            if rc is None:
                continue
            del running[name]
            finished += _record(cell, rc, time.monotonic() - t0, device, workers, results, runs, tiny, device_name)
            if rc not in (0, 130):
                print(f"[grid] {cell.name} failed (exit {rc}); starting no more cells", flush=True)
                failed = True
        time.sleep(0.5)
    return finished


def packed_suites(todo: list[Cell]) -> list[tuple[str, list[Cell]]]:
    """The pending cells at their preset's own settings (no overrides), one suite per model: its tasks x its seeds
    in one `ssmbench eval` command, which trains the cells that share shapes as packs."""
    models: dict[str, list[Cell]] = {}
    for cell in todo:
        if not cell.overrides:
            models.setdefault(cell.model, []).append(cell)
    return list(models.items())


def suite_command(model: str, cells: list[Cell], device: str, workers: int, out: Path,
                  tiny: dict[str, object] | None) -> list[str]:
    tasks = list(dict.fromkeys(c.task for c in cells))
    seeds = sorted({c.seed for c in cells})
    argv = [sys.executable, "-m", "ssmbench", "eval", "--model", model, "--task", ",".join(tasks), "--seeds",
            ",".join(map(str, seeds)), "--preset", "paper", "--device", device, "--out", str(out), "-q"]
    for key, value in ({"data.workers": workers} | (tiny or {})).items():
        argv += ["-o", f"{key}={value}"]
    return argv


def run_packed(budget: float, device: str, workers: int, results: Path, runs: Path, tiny: dict[str, object] | None,
               margin: float) -> int:
    """Each model's pending preset cells as one packed suite (`packed_suites`), in turn, within the budget; the
    suite is stopped with SIGINT `margin` seconds before the end (every member saves last.pt; the same call
    continues it). Each finished member is collected as its cell. Returns the cells finished in this call."""
    deadline = time.monotonic() + budget
    device_name = _device_name(device)
    results.mkdir(parents=True, exist_ok=True)
    finished = 0
    for model, cells in packed_suites([c for c in CELLS if not _done(c, results, runs)]):
        if deadline - time.monotonic() < margin + 60:
            print(f"[grid] too little time left for the {model} suite", flush=True)
            break
        suite = runs / f"suite-{model}"
        argv = suite_command(model, cells, device, workers, suite, tiny)
        print(f"[grid] suite {model}: {' '.join(argv[3:])}", flush=True)
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=REPO)
        while proc.poll() is None:
            if time.monotonic() > deadline - margin:
                proc.send_signal(signal.SIGINT)  # every member saves last.pt; exit 130
                proc.wait()
                break
            time.sleep(0.5)
        wall = time.monotonic() - t0
        for cell in cells:
            member = suite / f"{cell.task}-seed{cell.seed}"
            if (member / "metrics.json").is_file() and not (results / cell.name / "metrics.json").is_file():
                metrics = _collect(cell, member, results, argv, device_name)
                (results / cell.name / "command.txt").write_text(
                    "ssmbench " + " ".join(argv[3:]) + f"\n# device: {device_name}\n# member {member.name} of the "
                    f"suite; commit: {os.environ.get('SSMBENCH_COMMIT', 'unknown')}\n")
                for name in ("pack.json",):
                    if (member / name).is_file():
                        shutil.copy2(member / name, results / cell.name / name)
                test = metrics.get("test", {})
                line = [cell.name, "finished (packed suite)", f"{wall:.0f}s", device_name,
                        f"test_r2={test.get('r2', float('nan')):.4f}",
                        f"test_r2_batchavg={test.get('r2_batchavg', float('nan')):.4f}"]
                print("[grid] " + "  ".join(line), flush=True)
                with open(results / "grid_log.tsv", "a") as log:
                    log.write("\t".join(line) + "\n")
                finished += 1
        if proc.returncode not in (0, 130):
            print(f"[grid] the {model} suite failed (exit {proc.returncode})", flush=True)
            break
    return finished


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=float, default=540, help="seconds for the whole call (default 540)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=6, help="data workers per run (default 6)")
    parser.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results" / "paper")
    parser.add_argument("--runs", type=Path, default=REPO / "runs" / "paper")
    parser.add_argument("--margin", type=float, default=25, help="seconds kept for a stopped run's checkpoint")
    parser.add_argument("--only", type=int, default=None, help="run at most this many cells")
    parser.add_argument("--parallel", type=int, default=1, help="cells run at once on the one device (default 1)")
    parser.add_argument("--tiny", action="store_true", help="CPU smoke test: tiny steps and sizes (see TINY)")
    parser.add_argument("--tiny-steps", type=int, default=None, help="with --tiny: steps per run (default 12)")
    parser.add_argument("--list", action="store_true", help="print the cells in order and whether each is done")
    parser.add_argument("--packed", action="store_true", help="the cells at their preset's own settings, one "
                        "packed suite per model (tasks x seeds in one process) instead of one process per cell")
    args = parser.parse_args()
    if args.list:
        for i, cell in enumerate(CELLS):
            print(f"{i:2d}  {'done' if _done(cell, args.results, args.runs) else '    '}  {cell.name}")
        return
    default_results = REPO / "benchmarks" / "results" / "paper"
    if args.tiny and args.results.resolve() == default_results.resolve():
        parser.error("--tiny results are not paper results: give --results (and --runs) outside the repository")
    tiny = dict(TINY, **({"train.steps": args.tiny_steps} if args.tiny_steps else {})) if args.tiny else None
    if args.packed:
        run_packed(args.budget, args.device, args.workers, args.results, args.runs, tiny, args.margin)
        return
    run_grid(args.budget, args.device, args.workers, args.results, args.runs, tiny, args.only, args.margin,
             args.parallel)


if __name__ == "__main__":
    main()
