"""The harness's training step against the bare step, interleaved on one model and optimiser: per-step cost only.

`benchmarks/harness/overhead.py` times a bare loop and then a whole `ssmbench.evaluate` run, one after the other; on a shared
machine the pace drifts between the two (DLR's bare step measured 47.8 to 54.2 ms in three runs on the 2-core VM),
and a host-bound GPU step feels anything else the host does. Here one process builds the run once
(`trainer.setup` / `trainer.start`) and alternates, in rounds of `--window` steps each, synchronised at the ends:

* bare:        zero_grad; mse(model(x), y).backward(); optimiser step -- on one batch resident on the device;
* train_step:  `trainer.train_step(loop, batch)` -- the harness's step (loss bookkeeping, schedule) on that batch;
* + feed:      `trainer.train_step` on the next batch of `train_feed` (the data workers and, on CUDA, the pinned
               staging thread): what `ssmbench eval` runs each step, evaluation and checkpoints aside.

The medians over rounds and their ratios to bare are printed; drift hits all three alike. Beside each, the training
thread's own split of a step (Linux, `/proc/thread-self/schedstat`): CPU time, time runnable but waiting for a core,
and the rest, when the thread slept: on a GPU machine with spare cores that is mostly waiting for the GIL held by
another thread of the process (the staging thread, the DataLoader's receiving side), or a blocking CUDA wait. A
host-bound step (one whose GPU work is shorter than the host's time to launch it) pays all three.

    python benchmarks/harness/step_ab.py --models dlr s4d --setting quick                    # this CPU
    python benchmarks/harness/step_ab.py --setting paper --device cuda --workers 4 --busy    # a GPU machine
    python benchmarks/harness/step_ab.py --setting paper --device cuda --workers 4 --compile --models dlr s4d
    python benchmarks/harness/step_ab.py --setting paper --device cuda --workers 4 --cuda-graph --busy  # graphs
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from benchmarks.harness.overhead import bare_step  # noqa: E402

SETTINGS = {"paper": "paper", "quick": "quick"}


def thread_clock(native_id: int | None = None) -> tuple[float, float]:
    """(CPU seconds, seconds runnable but not running) of the calling thread (or the thread of this process with
    `native_id`) so far; the second is nan where the kernel does not say (not Linux)."""
    path = "/proc/thread-self/schedstat" if native_id is None else f"/proc/self/task/{native_id}/schedstat"
    try:
        with open(path) as f:
            on_cpu, queued = f.read().split()[:2]
        return int(on_cpu) / 1e9, int(queued) / 1e9
    except OSError:
        return time.thread_time(), float("nan")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_busy(f, steps: int, device: torch.device) -> tuple[float, float]:
    """(seconds of device work, device operations) per step of `steps` calls of f on CUDA, under torch.profiler
    (the activities that ran on the H200): kernels, copies and fills, their times summed. Set against the step's unprofiled wall,
    a device busy for much less is waiting for the host's launches (a host-bound step). The staged feed's copies may
    run on a stream of their own, so with the feed the sum can include overlapping work."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    _sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            f()
        _sync(device)
    ops = [e for e in prof.key_averages() if e.device_type == DeviceType.CUDA]
    return sum(e.self_device_time_total for e in ops) / 1e6 / steps, sum(e.count for e in ops) / steps


def compare(model: str, setting: str, device: str, workers: int, rounds: int, window: int,
            compile_model: bool = False, busy: dict | None = None,
            cuda_graph: bool = False) -> dict[str, tuple[float, float, float]]:
    """Per kind (bare / train_step / train_step + feed), medians over `rounds` interleaved rounds of seconds per
    step: (wall, the training thread's CPU, its time waiting for a core). With `busy` (a dict) on CUDA, each kind's
    `device_busy` over one more round is stored in it."""
    from ssmbench.harness.config.resolver import resolve_run
    from ssmbench.harness.feed.batches import EvalSet, prefer_fork_safe_numba
    from ssmbench.harness.feed.device_feed import train_feed
    from ssmbench.harness.results.run_folder import RunFolder
    from ssmbench.harness.runtime.threads import apply_threads
    from ssmbench.harness.training import trainer

    prefer_fork_safe_numba()
    steps = 3 * rounds * window + 10
    cfg = resolve_run(model, "cumsum", SETTINGS[setting], overrides={
        "train.steps": steps, "data.workers": workers, "hardware.device": device, "eval.val_samples": 16,
        "hardware.compile": compile_model, "hardware.cuda_graph": cuda_graph})
    apply_threads(cfg.hardware.threads, cfg.data.workers)
    s = trainer.setup(cfg)
    dev = s.env.device
    with tempfile.TemporaryDirectory() as tmp:
        loop = trainer.start(s, RunFolder(f"{tmp}/run"), resume=False, quiet=True, logger=None)
        b = EvalSet.build(cfg.task, cfg.task_config, cfg.data.seed, "train", cfg.train.batch_size)
        x, y = b.inputs.to(dev), b.targets.to(dev)  # (B, T, d_input), (B, l_output, d_output)
        resident = {"inputs": x, "targets": y}
        model_, opt = s.model, loop.optimizer
        feed = iter(train_feed(cfg, 0, s.env))

        bare = bare_step(model_, opt, x, y)
        kinds = {"bare": bare, "train_step": lambda: trainer.train_step(loop, resident),
                 "train_step + feed": lambda: trainer.train_step(loop, next(feed)[1])}
        if cuda_graph:  # the captured step (3 eager steps, then one graph a step) on the next batch of the feed
            graphed = trainer.step_function(loop)
            kinds["graph + feed"] = lambda: graphed(next(feed)[1])
        for f in kinds.values():  # warm-up: allocator, kernels, the workers' start-up
            for _ in range(3):
                f()
        _sync(dev)
        times: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kinds}
        try:
            for _ in range(rounds):
                for kind, f in kinds.items():
                    t0, (c0, q0) = time.perf_counter(), thread_clock()
                    for _ in range(window):
                        f()
                    _sync(dev)
                    (c1, q1), t1 = thread_clock(), time.perf_counter()
                    times[kind].append(((t1 - t0) / window, (c1 - c0) / window, (q1 - q0) / window))
            if busy is not None and dev.type == "cuda":  # after the timed rounds: the profiler's cost stays out
                for kind, f in kinds.items():
                    try:
                        busy[kind] = device_busy(f, window, dev)
                    except Exception as e:  # noqa: BLE001 -- a profiler failure must not cost the rows above
                        print(f"device_busy({kind}): {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            feed.close()  # the staging thread and the data workers stop here
    return {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in times.items()}


def split_line(wall: float, cpu: float, queued: float) -> str:
    """'cpu C / queued Q / slept S' in ms of one step: the training thread's share of its wall time."""
    return f"cpu {1e3 * cpu:.2f} / queued {1e3 * queued:.2f} / slept {1e3 * (wall - cpu - queued):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["dlr", "attention", "s4d", "lru"])
    ap.add_argument("--setting", default="quick", choices=sorted(SETTINGS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--window", type=int, default=10, help="steps per round and kind")
    ap.add_argument("--busy", action="store_true", help="on CUDA, also profile one round of each kind: how much of "
                    "a step the device spends in kernels (a host-bound step leaves it idle)")
    ap.add_argument("--compile", action="store_true", help="-o hardware.compile=true: torch.compile the model (fewer, "
                    "fused kernels: what a step bound by the host's launches gains)")
    ap.add_argument("--cuda-graph", action="store_true", help="-o hardware.cuda_graph=true: also the step captured as "
                    "a CUDA graph and replayed (`graph + feed`; its optimiser is capturable in every kind)")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {args.setting} setting (cumsum), device {args.device}, {args.workers} "
          f"worker(s), {args.rounds} rounds x {args.window} steps, medians per step"
          f"{', torch.compile' if args.compile else ''}", flush=True)
    for model in args.models:
        busy: dict | None = {} if args.busy else None
        m = compare(model, args.setting, args.device, args.workers, args.rounds, args.window, args.compile, busy,
                    args.cuda_graph)
        base = m["bare"][0]
        print(f"{model:10s} " + "  ".join(f"{k} {1e3 * v[0]:8.2f} ms ({100 * (v[0] / base - 1):+5.1f} %)"
                                          for k, v in m.items()), flush=True)
        print(f"{'':10s} training thread, ms a step: " + "  ".join(f"{k}: {split_line(*v)}" for k, v in m.items()),
              flush=True)
        if busy:
            print(f"{'':10s} device busy (profiled round against the median wall): " + "  ".join(
                f"{k}: {1e3 * b:.2f} of {1e3 * m[k][0]:.2f} ms ({100 * b / m[k][0]:.0f} %), {n:.0f} device ops"
                for k, (b, n) in busy.items()), flush=True)


if __name__ == "__main__":
    main()
