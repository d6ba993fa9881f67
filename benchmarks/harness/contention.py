"""Step time of the same short `ssmbench eval` on an idle and a busy machine, by torch thread setting (same run).

    PYTHONSAFEPATH=1 python benchmarks/harness/contention.py [--competitors 0,1,3] [--rounds 2] [--steps 60]

For each number of competing CPU-bound processes (pure-Python busy loops, one per competitor), the same quick-preset
DLR CUMSUM run (L = 512, `train.steps` = --steps, 1 data worker) is timed with three thread settings, interleaved
round by round so that every setting sees the same background:

* `chosen`  -- the harness's rule (`ssmbench.harness.runtime.threads`: usable CPUs minus data workers);
* `1`       -- `-o hardware.threads=1`;
* `cores`   -- one thread per core (`-o hardware.threads=<os.cpu_count()>`): torch's own default, what the harness
  did before it chose.

It prints the median time per step (metrics.json `time_per_step_s`) of each, and the ratios chosen / 1 thread and
cores / 1 thread. The goal: chosen within 1.3x of the best fixed setting on a busy machine, not slower than `cores`
on an idle one. The load average at start and end says how idle "0 competitors" really was.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _spin(stop: mp.Event) -> None:  # type: ignore[valid-type]
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def run_once(threads: str | None, steps: int, out: Path) -> float:
    exe = Path(sys.executable).with_name("ssmbench")
    args = [str(exe), "eval", "--model", "dlr", "--task", "cumsum", "-o", f"train.steps={steps}",
            "-o", f"train.eval_every={steps}", "-o", "eval.val_samples=32", "-o", "eval.test_samples=32",
            "-o", "data.workers=1", "-q", "--out", str(out)]
    if threads is not None:
        args += ["-o", f"hardware.threads={threads}"]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return float(json.loads((out / "metrics.json").read_text())["time_per_step_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--competitors", default="0,1,3")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    settings = {"chosen": None, "1": "1", "cores": str(cores)}
    print(f"cores {cores}, load average at start {os.getloadavg()}, steps {args.steps}, rounds {args.rounds}")
    print(f"{'competitors':>11} | {'chosen s/step':>13} | {'1 thread':>9} | {'cores':>9} | chosen/1 | cores/1")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(c) for c in args.competitors.split(",")):
            stop = mp.Event()
            procs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(n)]
            for p in procs:
                p.start()
            time.sleep(1.0)
            times: dict[str, list[float]] = {k: [] for k in settings}
            try:
                for r in range(args.rounds):
                    for name, threads in settings.items():
                        times[name].append(run_once(threads, args.steps, Path(tmp) / f"{n}-{name}-{r}"))
            finally:
                stop.set()
                for p in procs:
                    p.join()
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"{n:>11} | {med['chosen']:>13.4f} | {med['1']:>9.4f} | {med['cores']:>9.4f} | "
                  f"{med['chosen'] / med['1']:>8.2f} | {med['cores'] / med['1']:>7.2f}", flush=True)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
