"""The size of `checkpoints/last.pt` for each `--preset paper` row of the atomic tasks (what a time-limited job writes
at every checkpoint and when it stops), measured on real files.

For each row the model is built at the row's settings (`resolver.resolve_run` with the row's preset) and the trainer's
own `start` + `checkpoint` write `last.pt` after one optimiser update with zero gradients: the same file a 1-step
run writes (model, AdamW state with both moments, schedule, loop state, random state, config), without materialising
an L = 4096 kernel on the CPU. `--check ROW` also runs the row for one real step through `ssmbench eval` (small
batch and evaluation sets: they do not change the checkpoint) and compares the two files' sizes.

    python benchmarks/harness/checkpoint_sizes.py                       # every dlr_paper/atomic* row: a Markdown table
    python benchmarks/harness/checkpoint_sizes.py --check dlr_paper/atomic512/dlr
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TASK = {"atomic": ("cumsum", 4096), "atomic512": ("cumsum", 512)}
SMALL = {"eval.val_samples": 16, "eval.test_samples": 16, "eval.batch_size": 2, "eval.metric_batch_size": 2,
         "train.batch_size": 2,
         "data.workers": 0}


def rows() -> list[str]:
    from ssmbench.harness.config.presets import list_presets

    return [i["name"] for i in list_presets() if i["name"].split("/")[:2] in (["dlr_paper", "atomic"],
                                                                          ["dlr_paper", "atomic512"])]


def model_of(row: str) -> str:
    name = row.rsplit("/", 1)[1]
    return "dlr" if name.startswith("dlr") else name


def synthetic(row: str, folder: Path) -> tuple[int, int]:
    """(parameters, bytes of last.pt) from the trainer's own checkpoint after one zero-gradient update."""
    import torch

    from ssmbench.harness.config.resolver import resolve_run
    from ssmbench.harness.results.run_folder import RunFolder
    from ssmbench.harness.runtime import distributed as D
    from ssmbench.harness.training.trainer import checkpoint, setup, start

    task, length = TASK[row.split("/")[1]]
    cfg = resolve_run(model_of(row), task, row, length=length, overrides=SMALL)
    s = setup(cfg, D.init_distributed("cpu"))
    run = RunFolder(folder)
    run.create()
    loop = start(s, run, resume=False, quiet=True, logger=None)
    for group in loop.optimizer.param_groups:
        for p in group["params"]:
            p.grad = torch.zeros_like(p)
    loop.optimizer.step()
    loop.scheduler.step()
    loop.state.step = 1
    checkpoint(loop, run.last)
    return sum(p.numel() for p in s.bare.parameters()), run.last.stat().st_size


def real(row: str, folder: Path) -> tuple[int, int]:
    """(parameters, bytes of last.pt) of a 1-step `ssmbench eval` run of the row."""
    task, length = TASK[row.split("/")[1]]
    keys = [x for k, v in {**SMALL, "train.steps": 1}.items() for x in ("-o", f"{k}={v}")]
    exe = Path(sys.executable).with_name("ssmbench")
    subprocess.run([str(exe), "eval", "--model", model_of(row), "--task", task, "--length", str(length),
                    "--preset", row, *keys, "--out", str(folder), "-q", "--force", "--device", "cpu"], check=True)
    return json.loads((folder / "metrics.json").read_text())["parameters"], (folder / "checkpoints" /
                                                                             "last.pt").stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", nargs="*", default=[], help="rows also run for one real step")
    parser.add_argument("--rows", nargs="*", help="rows to measure [default: every dlr_paper/atomic* row]")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    print("| row | L | parameters | last.pt (MiB) |\n|---|---|---:|---:|")
    for row in rows() if args.rows is None else args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            params, size = synthetic(row, Path(tmp) / "run")
        print(f"| {row} | {TASK[row.split('/')[1]][1]} | {params:,} | {size / 2**20:.2f} |", flush=True)
    for row in args.check:
        with tempfile.TemporaryDirectory() as tmp:
            params_a, a = synthetic(row, Path(tmp) / "a")
            params_b, b = real(row, Path(tmp) / "b")
        print(f"check {row}: built {params_a:,} parameters, {a:,} bytes; 1-step run {params_b:,} parameters, "
              f"{b:,} bytes")


if __name__ == "__main__":
    main()
