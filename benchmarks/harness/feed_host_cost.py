"""What handing one batch to the training step costs the host: the training thread's CPU time per batch, and the
staging thread's beside it, for the plain feed and the staged (pinned-buffer) feed.

On a GPU whose step is bound by the host launching kernels (DLR, S4D at the paper setting may be: about 700-950
operators a step), the training thread's share is what a step pays; the staging thread runs beside it, on a core of
its own on a GPU machine. The device operations are replaced by host no-ops (a pinned buffer by a plain one, the
copy to the device by the buffer itself), so this runs on any machine and measures only the host's part. Batches are
the paper's atomic setting (cumsum, L = 4096, batch 16: 1 MiB a step, 16 steps a worker message). The workers fill
their read-ahead first, so no time waiting for them is counted.

`--beside-step` measures the other half: the same feeds consumed by a host-bound training step running beside them
(a one-layer DLR with H = 8 at L = 64, batch 2: the paper step's operators on tiny tensors, so the host's dispatch
is the whole step, as on a GPU that outruns the host). The training thread's wall time per step is split into its
CPU time, its time waiting for a core, and the rest, when it slept: waiting for the GIL, which the staging thread
and the DataLoader's receiving side take between the training thread's operators (each operator releases it).
On a machine with a core for every thread the second is ~0 and the third is what the feed costs a host-bound step.

    python benchmarks/harness/feed_host_cost.py --rounds 3
    python benchmarks/harness/feed_host_cost.py --beside-step --rounds 12
    py-spy record --gil --threads -r 200 -f raw -o gil.txt -- python benchmarks/harness/feed_host_cost.py --hold 25
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from benchmarks.harness.overhead import bare_step  # noqa: E402
from benchmarks.harness.step_ab import thread_clock  # noqa: E402


def _messages_line(workers: int) -> str:
    """'K steps a message, /dev/shm N MiB free': what sized the workers' messages (`message_size.message_bytes`)."""
    from ssmbench.data.read.ring import shm_free
    from ssmbench.harness.feed.batches import TrainFeed

    k = TrainFeed("cumsum", {"L": 4096}, 0, 16, 0, 10 ** 6, workers=workers).steps_per_message
    return f"{k} steps a message, /dev/shm {(shm_free() or 0) >> 20} MiB free"


def _host_only_feed(stage: bool, workers: int):
    from ssmbench.harness.feed.batches import TrainFeed
    from ssmbench.harness.feed.device_feed import DeviceFeed

    class HostOnly(DeviceFeed):
        def _pinned(self, nbytes: int) -> torch.Tensor:
            return torch.empty(nbytes, dtype=torch.uint8)

        def _to_device(self, host: torch.Tensor) -> torch.Tensor:
            return host

        def _record(self, event):
            class Passed:
                def synchronize(self) -> None:
                    pass

            return Passed()

        def _copy_in(self, fields, slot):
            self.staged_bytes += sum(v.nbytes for k, v in fields.items() if k in self.fields)
            return super()._copy_in(fields, slot)

    HostOnly.staged_bytes = 0
    return HostOnly(TrainFeed("cumsum", {"L": 4096}, 0, 16, 0, 10 ** 6, workers=workers), "cpu", stage=stage)


def cost(stage: bool, workers: int, batches: int = 32) -> tuple[float, float, float]:
    """(wall, training-thread CPU, staging-thread CPU) seconds per batch: the training thread's over `batches`
    batches already read ahead, the staging thread's over the batches it staged in that time (it copies whole
    worker messages, and runs ahead by up to its buffers)."""
    import threading

    clock = thread_clock
    feed = _host_only_feed(stage, workers)
    it = iter(feed)
    try:
        for _ in range(40):  # start-up, buffers, the first messages
            next(it)
        time.sleep(1.0)  # the workers fill their read-ahead (4 messages each: 64 steps)
        helper = next((t for t in threading.enumerate() if t.name == "ssmbench-staging"), None)
        helper_cpu = (lambda: clock(helper.native_id)[0]) if helper is not None else (lambda: 0.0)
        staged, h0 = feed.staged_bytes, helper_cpu()
        t0, c0 = time.perf_counter(), clock()[0]
        for _ in range(batches):
            next(it)
        t1, c1 = time.perf_counter(), clock()[0]
        time.sleep(0.5)  # the staging thread refills the buffers freed in the window
        step_bytes = 16 * 4096 * 4 * 4  # inputs (3 channels) and targets (1), float32
        staged_batches = (feed.staged_bytes - staged) / step_bytes
        per_batch = (helper_cpu() - h0) / staged_batches if staged_batches else 0.0
        return (t1 - t0) / batches, (c1 - c0) / batches, per_batch
    finally:
        it.close()


def _host_bound_step():
    """A bare training step (zero_grad, MSE, backward, AdamW) of a tiny DLR: dispatch-bound on any device."""
    from ssmbench.harness.config.resolver import resolve_run
    from ssmbench.harness.training import trainer

    cfg = resolve_run("dlr", "cumsum", "quick", overrides={
        "task.L": 64, "model.d_model": 8, "train.batch_size": 2, "data.workers": 0, "hardware.threads": 1,
        "hardware.device": "cpu"})  # host only, also where a GPU is present (the model is built on the run's device)
    model = trainer.setup(cfg).model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = torch.randn(2, 64, 3), torch.randn(2, 64, 1)  # (B, L, d_input), (B, L, d_output)
    return bare_step(model, opt, x, y)


def beside_step(workers: int, rounds: int, window: int = 48) -> dict[str, tuple[float, ...]]:
    """Per feed (none / plain / staged), medians over interleaved rounds of the training thread's seconds a step:
    (wall, CPU, waiting for a core, the feed's data wait: for the plain feed this includes receiving the workers'
    messages in this thread), each step taking one batch of that feed first."""
    clock = thread_clock
    torch.set_num_threads(1)
    step = _host_bound_step()
    sources = {"plain": _host_only_feed(False, workers), "staged": _host_only_feed(True, workers)}
    feeds = {"none": None, **{k: iter(v) for k, v in sources.items()}}
    try:
        for f in feeds.values():
            for _ in range(40):  # start-up, buffers, the first messages; the kernels and the allocator warm
                if f is not None:
                    next(f)
                step()
        time.sleep(1.0)  # the workers fill their read-ahead
        rows: dict[str, list[tuple[float, ...]]] = {k: [] for k in feeds}
        for _ in range(rounds):
            for kind, f in feeds.items():
                waited = sources[kind].waited if kind in sources else 0.0
                t0, (c0, q0) = time.perf_counter(), clock()
                for _ in range(window):
                    if f is not None:
                        next(f)
                    step()
                (c1, q1), t1 = clock(), time.perf_counter()
                waited = (sources[kind].waited if kind in sources else 0.0) - waited
                rows[kind].append(tuple(x / window for x in (t1 - t0, c1 - c0, q1 - q0, waited)))
    finally:
        for f in feeds.values():
            if f is not None:
                f.close()
    return {k: tuple(statistics.median(r[i] for r in v) for i in range(4)) for k, v in rows.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="alternating plain / staged measurements")
    ap.add_argument("--beside-step", action="store_true", help="the feeds beside a host-bound training step")
    ap.add_argument("--hold", type=float, metavar="SECONDS",
                    help="only run the host-bound step beside the staged feed this long (for a profiler)")
    args = ap.parse_args()
    from ssmbench.harness.feed.batches import prefer_fork_safe_numba

    prefer_fork_safe_numba()
    if args.hold:
        torch.set_num_threads(1)
        step, feed = _host_bound_step(), iter(_host_only_feed(True, args.workers))
        steps, end = 0, time.perf_counter() + args.hold
        while time.perf_counter() < end:
            next(feed)
            step()
            steps += 1
        feed.close()
        print(f"{steps} steps beside the staged feed in {args.hold:g} s")
        return
    messages = _messages_line(args.workers)  # before the workers' rings take their part of /dev/shm
    if args.beside_step:
        rows = beside_step(args.workers, args.rounds)
        print(f"beside a host-bound step (DLR H = 8, L = 64, batch 2; one thread): cumsum L = 4096, batch 16, "
              f"{args.workers} worker(s), {messages}, {args.rounds} rounds x 48 steps; medians, ms a step")
        base = rows["none"][0]
        for kind, (wall, cpu, queued, waited) in rows.items():
            print(f"feed {kind:7s} wall {1e3 * wall:6.3f} ({100 * (wall / base - 1):+5.1f} %)  training thread: "
                  f"cpu {1e3 * cpu:6.3f}  waiting for a core {1e3 * queued:6.3f}  "
                  f"asleep {1e3 * (wall - cpu - queued):6.3f}  (the feed's data wait {1e3 * waited:6.3f})",
                  flush=True)
        return
    rows: dict[str, list[tuple[float, float, float]]] = {"plain": [], "staged": []}
    for _ in range(args.rounds):
        for mode in rows:
            rows[mode].append(cost(mode == "staged", args.workers))
    print(f"cumsum L = 4096, batch 16, {args.workers} worker(s), {messages}, {args.rounds} rounds; medians, "
          "microseconds a batch")
    for mode, r in rows.items():
        wall, thread, helper = (statistics.median(x[i] for x in r) * 1e6 for i in range(3))
        print(f"{mode:7s} wall {wall:6.0f}  training thread CPU {thread:6.0f}  staging thread CPU {helper:6.0f}")


if __name__ == "__main__":
    main()
