"""What handing one batch to the training step costs the host: the training thread's CPU time per batch, and the
whole process's (the staging thread included), for the plain feed and the staged (pinned-buffer) feed.

On a GPU whose step is bound by the host launching kernels (DLR, S4D at the paper setting may be: about 700-950
operators a step), the training thread's share is what a step pays; the staging thread runs beside it, on a core of
its own on a GPU machine. The device operations are replaced by host no-ops (a pinned buffer by a plain one, the
copy to the device by the buffer itself), so this runs on any machine and measures only the host's part. Batches are
the paper's atomic setting (cumsum, L = 4096, batch 16: 1 MiB a step, 16 steps a worker message). The workers fill
their read-ahead first, so no time waiting for them is counted.

    python benchmarks/feed_host_cost.py --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def _host_only_feed(stage: bool, workers: int):
    from ssmbench.harness.batches import TrainFeed
    from ssmbench.harness.device_feed import DeviceFeed

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

    return HostOnly(TrainFeed("cumsum", {"L": 4096}, 0, 16, 0, 10 ** 6, workers=workers), "cpu", stage=stage)


def cost(stage: bool, workers: int, batches: int = 48) -> tuple[float, float, float]:
    """(wall, training-thread CPU, process CPU) seconds per batch over `batches` batches already read ahead."""
    it = iter(_host_only_feed(stage, workers))
    try:
        for _ in range(40):  # start-up, buffers, the first messages
            next(it)
        time.sleep(1.0)  # the workers fill their read-ahead (4 messages each: 64 steps)
        t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        for _ in range(batches):
            next(it)
        return ((time.perf_counter() - t0) / batches, (time.thread_time() - c0) / batches,
                (time.process_time() - p0) / batches)
    finally:
        it.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="alternating plain / staged measurements")
    args = ap.parse_args()
    from ssmbench.harness.batches import prefer_fork_safe_numba

    prefer_fork_safe_numba()
    rows: dict[str, list[tuple[float, float, float]]] = {"plain": [], "staged": []}
    for _ in range(args.rounds):
        for mode in rows:
            rows[mode].append(cost(mode == "staged", args.workers))
    print(f"cumsum L = 4096, batch 16, {args.workers} worker(s), {args.rounds} rounds; medians, microseconds a batch")
    for mode, r in rows.items():
        wall, thread, process = (statistics.median(x[i] for x in r) * 1e6 for i in range(3))
        print(f"{mode:7s} wall {wall:6.0f}  training thread CPU {thread:6.0f}  process CPU {process:6.0f}")


if __name__ == "__main__":
    main()
