"""Whole `ssmbench eval` commands: a suite of N seeds (or a task group) packed, one by one, against one seed alone.

Each command runs in a fresh process with its own run folder under a temporary root (cold: process start, imports,
data workers, validation and scoring all count), one after another, in the same run of this script; the ratios are
against the one-seed command measured here. The issue's goal for MQAR on 2 CPU cores: 4 seeds in at most 2x the
time of one.

    PYTHONSAFEPATH=1 python benchmarks/harness/pack_suite.py --model attention --task mqar --seeds 4 8
    PYTHONSAFEPATH=1 python benchmarks/harness/pack_suite.py --model attention --task mad --seeds 4 --no-single
    PYTHONSAFEPATH=1 python benchmarks/harness/pack_suite.py --model dlr --task atomic --seeds 1 --no-single
    ... -o train.steps=30   (a quick check of the script itself)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(args: list[str], out: Path) -> float:
    """Seconds the eval command takes, start to exit (it must succeed)."""
    cli = Path(sys.executable).with_name("ssmbench")
    t0 = time.perf_counter()
    subprocess.run([str(cli), "eval", *args, "--out", str(out), "-q"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def pace(out: Path) -> str:
    """The runs' steady time per step and data-wait share (their metrics.json), as 'x ms a step, y % waiting'."""
    import json
    import statistics

    found = [json.loads(p.read_text()) for p in sorted(out.glob("**/metrics.json"))]
    if not found:
        return ""
    step = statistics.fmean(m["time_per_step_s"] for m in found)
    wait = statistics.fmean(m["data_wait_share"] for m in found)
    return f"  [{1e3 * step:.1f} ms a step, {100 * wait:.1f} % of it waiting for data]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="attention")
    parser.add_argument("--task", default="mqar")
    parser.add_argument("--seeds", type=int, nargs="+", default=[4])
    parser.add_argument("--no-single", action="store_true", help="skip the one-seed baseline")
    parser.add_argument("--no-unpacked", action="store_true", help="skip the one-by-one (--pack never) commands")
    parser.add_argument("--auto", action="store_true", help="also the default policy (--pack auto: packs where a "
                        "packed step measures faster)")
    parser.add_argument("-o", dest="overrides", action="append", default=[])
    a = parser.parse_args()
    keys = [x for k in a.overrides for x in ("-o", k)]
    root = Path(tempfile.mkdtemp(prefix="pack_suite-"))
    print(f"{a.model} on {a.task} ({' '.join(a.overrides) or 'quick preset'}), {time.strftime('%Y-%m-%d %H:%M')}")
    try:
        base = None
        if not a.no_single:
            base = run(["--model", a.model, "--task", a.task, "--seed", "0", *keys], root / "one")
            print(f"  1 seed alone:            {base:7.1f} s{pace(root / 'one')}")
        for n in a.seeds:
            seeds = ",".join(str(i) for i in range(n))
            packed = run(["--model", a.model, "--task", a.task, "--seeds", seeds, "--pack", "always", *keys],
                         root / f"packed{n}")
            ratio = f"  ({packed / base:.2f}x one seed)" if base else ""
            print(f"  {n} seed(s) packed:        {packed:7.1f} s{ratio}{pace(root / f'packed{n}')}")
            if a.auto:
                auto = run(["--model", a.model, "--task", a.task, "--seeds", seeds, *keys], root / f"auto{n}")
                packs = len(list((root / f"auto{n}").glob("*/pack.json")))
                ratio = f"  ({auto / base:.2f}x one seed)" if base else ""
                print(f"  {n} seed(s) --pack auto:   {auto:7.1f} s{ratio}  ({packs} of {n} runs packed)"
                      f"{pace(root / f'auto{n}')}")
            if not a.no_unpacked:
                alone = run(["--model", a.model, "--task", a.task, "--seeds", seeds, "--pack", "never", *keys],
                            root / f"alone{n}")
                ratio = f"  ({alone / base:.2f}x one seed)" if base else ""
                print(f"  {n} seed(s) one by one:    {alone:7.1f} s{ratio};  packed / one by one = "
                      f"{packed / alone:.2f}{pace(root / f'alone{n}')}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
