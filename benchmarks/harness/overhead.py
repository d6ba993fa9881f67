"""Harness overhead and data waiting: `ssmbench.evaluate` against a bare forward+backward+step loop, same run.

For each model and setting, two measurements on the same device:

* bare: the same model (built by the harness's model builder), one batch generated up front and kept on the
  device, `zero_grad; loss = mse(model(x), y); backward; step` for N steps;
* harness: `ssmbench.evaluate(...)` for N steps with fresh batches from the background workers (the paper's
  protocol), reporting its own time per step (evaluation excluded) and the share of it spent waiting for data.

Targets: harness overhead < 10 % and data waiting < 5 % (MIPS included, whose samples cost ~10 ms each at L=4096).

Each row also gives the median pace of both loops (seconds per step over 10-step stretches; the bare loop
synchronised at each stretch's end, the harness from the host clock at each batch hand-over), so that a one-off
stall, which moves the mean of a short run, is told apart from work added to every step; the slowest harness step
and where it fell; and the run's `startup_s` (its untimed first step, with every data worker's start-up).

`--feed staged loader-pinned` runs the harness twice per model: batches sent through the feed's pinned buffers
(`ssmbench/harness/feed/device_feed.py`, the default) and the former path (the DataLoader's pin-memory thread pins every
worker message). On CUDA each harness row also reports the pinned host allocations made during the run
(cudaHostAlloc calls and their time, from `torch.cuda.host_memory_stats`; the pinned cache is emptied before each
run, as in a fresh process; a staged run makes its 2 x slots buffers at the first step, which is not timed) and
where the data wait fell: its share on the first step of each worker message, and the longest single wait.

    python benchmarks/harness/overhead.py --settings quick --steps 100                  # this CPU
    python benchmarks/harness/overhead.py --settings paper quick --device cuda --steps 200   # a GPU machine
    python benchmarks/harness/overhead.py --settings paper --device cuda --steps 150 --workers 4 --feed staged loader-pinned
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import torch

SETTINGS = {
    # name: (preset, task, batch) -- `paper` is Table 5's atomic setting (L = 4096, H = 128, batch 16)
    "paper": ("paper", "cumsum", None),
    "quick": ("quick", "cumsum", None),
    "paper-mips": ("paper", "mips", None),
}
MODELS = ("dlr", "attention", "s4d", "lru")
WINDOW = 10
"""Steps per stretch for the median pace (a one-off stall moves the mean, not the median)."""
FEEDS = ("staged", "loader-pinned")


def bare_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
              y: torch.Tensor) -> Callable[[], None]:
    """One plain training step on a resident batch, as a function of nothing: zero_grad, the float32 MSE of model(x)
    against y, backward, the optimiser's step (also used by `step_ab.py` and `feed_host_cost.py`)."""
    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x).float(), y.float())
        loss.backward()
        opt.step()

    return step


def bare_loop(cfg, steps: int, device: torch.device) -> tuple[float, int, float]:
    """Seconds per step, peak bytes and the median seconds per step over WINDOW-step stretches of a plain loop over
    one resident batch."""
    from ssmbench.harness.feed.batches import EvalSet
    from ssmbench.harness.models.optim_groups import param_groups
    from ssmbench.harness.runtime.threads import apply_threads
    from ssmbench.harness.training.trainer import setup

    s = setup(cfg)
    t = cfg.train
    opt = torch.optim.AdamW(param_groups(s.bare, lr=t.lr, weight_decay=t.weight_decay, lr_ssm=t.lr_ssm), lr=t.lr,
                            betas=(t.beta1, t.beta2), eps=t.eps, weight_decay=t.weight_decay)
    batch = EvalSet.build(cfg.task, cfg.task_config, cfg.data.seed, "train", cfg.train.batch_size)
    x, y = batch.inputs.to(device), batch.targets.to(device)
    apply_threads(cfg.hardware.threads, cfg.data.workers)  # the harness run's torch threads, after any Numba start
    model = s.model.train()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    step = bare_step(model, opt, x, y)
    for _ in range(3):
        step()
    _sync(device)
    windows = []  # seconds per step of each WINDOW-step stretch, synchronised at both ends
    t0 = time.perf_counter()
    for done in range(0, steps, WINDOW):
        w0 = time.perf_counter()
        for _ in range(min(WINDOW, steps - done)):
            step()
        _sync(device)
        windows.append((time.perf_counter() - w0) / min(WINDOW, steps - done))
    dt = (time.perf_counter() - t0) / steps
    return dt, _peak(device), statistics.median(windows)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _empty_host_cache(device: torch.device) -> None:
    """Return cached pinned blocks to CUDA, so that each harness run starts like a fresh process."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        empty = getattr(getattr(torch, "accelerator", None), "empty_host_cache", None)
        if empty is not None:
            empty()


def _host_allocs(device: torch.device) -> tuple[int, float]:
    """(pinned blocks created so far, microseconds spent creating them) in this process; zeros off CUDA."""
    if device.type != "cuda" or not hasattr(torch.cuda, "host_memory_stats"):
        return 0, 0.0
    stats = torch.cuda.host_memory_stats()
    return int(stats.get("num_host_alloc", 0)), float(stats.get("host_alloc_time.total", 0.0))


@contextlib.contextmanager
def _recorded_steps():
    """For the runs inside, in step order: the trainer's data wait of each step (`DeviceFeed.last_wait`) and the
    host clock when the step's batch was handed over (differences: one step's host time, its data wait included)."""
    from ssmbench.harness.feed import device_feed

    waits: list[float] = []
    handed: list[float] = []
    original = device_feed.DeviceFeed

    class Recording(original):  # type: ignore[misc, valid-type]
        def __iter__(self):
            for item in super().__iter__():
                waits.append(self.last_wait)
                handed.append(time.perf_counter())
                yield item

    device_feed.DeviceFeed = Recording
    try:
        yield waits, handed
    finally:
        device_feed.DeviceFeed = original


def _paces(handed: list[float]) -> tuple[float, float, int]:
    """(median seconds per step over WINDOW-step stretches, longest single step, its step) of the timed steps: the
    steps between the second and the last hand-over (the first step is start-up, the last one's end is unseen)."""
    steps = [b - a for a, b in zip(handed[1:], handed[2:], strict=False)]  # steps[i]: step i + 1 (and i + 2's wait)
    if not steps:
        return 0.0, 0.0, 0
    windows = [sum(steps[i:i + WINDOW]) / len(steps[i:i + WINDOW]) for i in range(0, len(steps), WINDOW)]
    slowest = max(range(len(steps)), key=steps.__getitem__)
    return statistics.median(windows), steps[slowest], slowest + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", nargs="+", default=["quick"], choices=sorted(SETTINGS))
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workers", type=int, default=2, help="data.workers of the harness runs")
    ap.add_argument("--feed", nargs="+", default=["staged"], choices=FEEDS,
                    help="how batches reach the device: the feed's pinned buffers (staged) and/or the former "
                         "DataLoader pin-memory thread (loader-pinned); one harness run per model for each")
    ap.add_argument("--json", dest="json_out", help="also write the rows to this JSON file")
    args = ap.parse_args()

    from ssmbench.harness.config.resolver import resolve_run
    from ssmbench.harness.evaluation import evaluate
    from ssmbench.harness.feed import device_feed
    from ssmbench.harness.feed.batches import prefer_fork_safe_numba
    from ssmbench.harness.feed.message_size import auto_steps_per_message, message_bytes

    prefer_fork_safe_numba()  # as `ssmbench eval` does before any batch: forked workers, and torch's threads kept
    device = torch.device(args.device if args.device != "cuda" else "cuda:0")
    rows = []
    print(f"device {device}, torch {torch.__version__}, threads {torch.get_num_threads()}, steps {args.steps}",
          file=sys.stderr)
    for setting in args.settings:
        preset, task, _ = SETTINGS[setting]
        for model in args.models:
            keys = {"train.steps": args.steps + 5, "train.eval_every": args.steps + 5, "eval.val_samples": 16,
                    "eval.test_samples": 16, "data.workers": args.workers, "hardware.device": args.device,
                    "train.log_every": 10 ** 9}
            try:
                cfg = resolve_run(model, task, preset, overrides=keys)
            except Exception as exc:  # noqa: BLE001 - a model without a row is reported, not fatal
                print(f"skip {setting}/{model}: {exc}", file=sys.stderr)
                continue
            bare, bare_peak, bare_median = bare_loop(cfg, args.steps, device)
            size = message_bytes(cfg.data.prefetch, workers=cfg.data.workers)  # as the run's TrainFeed sizes them
            k = 1 if cfg.data.path else auto_steps_per_message(cfg.resolved_task.spec, cfg.train.batch_size, size)
            for feed in args.feed:
                device_feed.LOADER_PINS = feed == "loader-pinned"
                _empty_host_cache(device)
                before = _host_allocs(device)
                with _recorded_steps() as (waits, handed), tempfile.TemporaryDirectory() as tmp:
                    r = evaluate(config=cfg, out=f"{tmp}/run", quiet=True)
                device_feed.LOADER_PINS = False
                after = _host_allocs(device)
                m = r.metrics
                timed = waits[1:]  # the trainer does not time the first step (worker start-up)
                median, slowest, slowest_step = _paces(handed)
                row = {"setting": setting, "task": task, "model": model, "feed": feed, "L": cfg.task_config.get("L"),
                       "batch": cfg.train.batch_size, "params": m["parameters"], "bare_ms": bare * 1e3,
                       "harness_ms": m["time_per_step_s"] * 1e3, "overhead": m["time_per_step_s"] / bare - 1,
                       "data_wait": m["data_wait_share"], "peak_mib_bare": bare_peak / 2 ** 20,
                       "peak_mib_harness": m["peak_memory_bytes"] / 2 ** 20, "steps_per_message": k,
                       "wait_at_message_starts": (sum(w for i, w in enumerate(timed, 1) if i % k == 0)
                                                  / max(1e-12, sum(timed))),
                       "longest_wait_ms": 1e3 * max(timed, default=0.0),
                       "longest_wait_step": 1 + max(range(len(timed)), key=timed.__getitem__) if timed else 0,
                       "bare_median_ms": bare_median * 1e3, "harness_median_ms": median * 1e3,
                       "overhead_median": median / bare_median - 1, "slowest_step_ms": slowest * 1e3,
                       "slowest_step": slowest_step, "startup_s": m["startup_s"],
                       "host_allocs": after[0] - before[0], "host_alloc_ms": (after[1] - before[1]) / 1e3}
                rows.append(row)
                extra = (f"  pinned allocs {row['host_allocs']:3d} ({row['host_alloc_ms']:7.1f} ms)"
                         if device.type == "cuda" else "")
                print(f"{setting:10s} {model:10s} {feed:13s} L={row['L']:<5} B={row['batch']:<3} "
                      f"bare {row['bare_ms']:8.2f} ms  harness {row['harness_ms']:8.2f} ms  "
                      f"overhead {100 * row['overhead']:+6.1f} %  data wait {100 * row['data_wait']:5.1f} % "
                      f"(at message starts {100 * row['wait_at_message_starts']:3.0f} %, longest "
                      f"{row['longest_wait_ms']:6.1f} ms at step {row['longest_wait_step']})  median pace: bare "
                      f"{row['bare_median_ms']:.2f} ms, harness {row['harness_median_ms']:.2f} ms "
                      f"({100 * row['overhead_median']:+.1f} %)  slowest step {row['slowest_step_ms']:.1f} ms "
                      f"(step {row['slowest_step']})  start-up {row['startup_s']:.2f} s  "
                      f"peak {row['peak_mib_harness']:8.0f} MiB{extra}", flush=True)
                if args.json_out:  # after every row: a run stopped by a time limit keeps what it measured
                    with open(args.json_out, "w") as f:
                        json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
