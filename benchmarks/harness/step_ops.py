"""Operators a training step dispatches: `ssmbench.evaluate` against the bare loop of `benchmarks/harness/overhead.py`.

On a GPU a step of a small model is bound by the host, which launches one kernel (or more) per operator: at the
paper's atomic setting DLR, S4D, DSS_EXP, LRU, LaS and ATTENTION dispatch 1,000-1,700 operators a step, which at a few
microseconds each is the whole 5.7-9 ms step an H200 measured for the first four. So any work the harness adds to a
step shows there in full. This script counts, on the CPU (deterministic, no GPU needed), the `aten::` operators per
step of both loops with torch.profiler: runs of 4 and 12 steps, differenced, so set-up, evaluation and scoring
cancel; then lists the operators the harness adds to each step.

    python benchmarks/harness/step_ops.py                      # every model with a paper row, L = 256
    python benchmarks/harness/step_ops.py --models s4d --length 4096
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from benchmarks.harness import overhead  # noqa: E402

MODELS = ("dlr", "attention", "s4d", "lru", "dss_exp", "las", "las_chunk")


def operators(fn) -> collections.Counter:
    """How often each operator ran inside fn() (this thread and the autograd engine's)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return collections.Counter({e.key: e.count for e in prof.key_averages()})


def per_step(counts: dict[int, collections.Counter], a: int, b: int) -> dict[str, float]:
    keys = set(counts[a]) | set(counts[b])
    return {k: (counts[b][k] - counts[a][k]) / (b - a) for k in keys}


def step_operators(model: str, length: int, short: int = 4, long: int = 12) -> tuple[dict, dict]:
    """(harness operators per step, bare-loop operators per step) for `model` on the paper's cumsum row."""
    from ssmbench.harness.config.resolver import resolve_run
    from ssmbench.harness.evaluation import evaluate

    bare_loop = overhead.bare_loop
    harness, bare = {}, {}
    for n in (short, long):
        cfg = resolve_run(model, "cumsum", "paper", length=length, overrides={
            "train.steps": n, "train.eval_every": 10 ** 6, "eval.val_samples": 16, "eval.test_samples": 16,
            "data.workers": 0, "train.log_every": 10 ** 9})

        def run(cfg=cfg):
            with tempfile.TemporaryDirectory() as tmp:
                evaluate(config=cfg, out=f"{tmp}/run", quiet=True)

        harness[n] = operators(run)
        bare[n] = operators(lambda cfg=cfg, n=n: bare_loop(cfg, n, torch.device("cpu")))
    return per_step(harness, short, long), per_step(bare, short, long)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--length", type=int, default=256, help="L of the paper's cumsum row (the count does not depend "
                                                                "on it for these models)")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, cumsum paper row at L = {args.length}; aten:: operators per step")
    for model in args.models:
        h, b = step_operators(model, args.length)
        aten_h = sum(v for k, v in h.items() if k.startswith("aten::"))
        aten_b = sum(v for k, v in b.items() if k.startswith("aten::"))
        added = {k: h.get(k, 0) - b.get(k, 0) for k in set(h) | set(b)}
        added_text = ", ".join(f"{k} {v:+g}" for k, v in sorted(added.items(), key=lambda kv: (-kv[1], kv[0]))
                               if abs(v) >= 0.5)
        print(f"{model:10s} harness {aten_h:7.1f}  bare {aten_b:7.1f}  added {aten_h - aten_b:+5.1f}: {added_text}",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
