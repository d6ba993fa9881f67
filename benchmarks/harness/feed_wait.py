"""Share of a training step spent waiting for the atomic-task batch feed: one step per worker message (baseline)
against the automatic stacking of several steps per message, in the same run.

The model step is simulated by a busy loop of `--step-ms` milliseconds that holds the GIL, as a kernel-launching
GPU step does (5.7 ms is the bare DLR 1-layer step at the paper's atomic setting on an H100). Steps 40 .. N are
timed, so worker start-up is excluded.

    python benchmarks/harness/feed_wait.py --tasks cumsum shift --length 4096 --workers 2 --step-ms 5.7

`--train-lengths A-B` draws each step's length in [A, B] (train short, test long, `runtime.lengths`): the stacked
messages then pad their steps to the longest and the feed cuts each back (`TrainFeed.trim`, inside the timed wait).
"""

from __future__ import annotations

import argparse
import time


def wait_share(task: str, length: int, workers: int, step_ms: float, steps: int, k: int | None,
               lengths: object = None) -> float:
    from ssmbench.harness.feed.batches import TrainFeed

    feed = iter(TrainFeed(task, {"L": length}, 0, 16, 0, steps, workers=workers, prefetch=4, steps_per_message=k,
                          lengths=lengths))
    for _ in range(40):
        next(feed)
    waited, start = 0.0, time.perf_counter()
    while True:
        asked = time.perf_counter()
        if next(feed, None) is None:
            break
        waited += time.perf_counter() - asked
        end = time.perf_counter() + step_ms / 1e3
        while time.perf_counter() < end:
            pass
    return waited / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["cumsum", "shift"])
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--step-ms", type=float, default=5.7)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--train-lengths", metavar="A-B", help="draw each step's length in [A, B] (L is B)")
    args = parser.parse_args()

    from ssmbench.harness.feed.batches import prefer_fork_safe_numba
    from ssmbench.harness.feed.message_size import auto_steps_per_message, message_bytes
    from ssmbench.task_config import ResolvedTask

    prefer_fork_safe_numba()
    lengths = None
    if args.train_lengths:
        from ssmbench.harness.runtime.lengths import TrainLengths

        low, high = (int(v) for v in args.train_lengths.split("-"))
        lengths, args.length = TrainLengths(low, high, 0), high
    drawn = f" (each step's L drawn in {args.train_lengths})" if lengths else ""
    print(f"batch 16, L={args.length}{drawn}, {args.workers} workers, simulated step {args.step_ms} ms")
    for task in args.tasks:
        k = auto_steps_per_message(ResolvedTask.of(task, {"L": args.length}).spec, 16,
                                   message_bytes(4, workers=args.workers))  # as TrainFeed
        one = wait_share(task, args.length, args.workers, args.step_ms, args.steps, 1, lengths)
        auto = wait_share(task, args.length, args.workers, args.step_ms, args.steps, None, lengths)
        print(f"{task:8s} waiting: 1 step/message {one:6.1%}   {k} steps/message {auto:6.1%}   "
              f"ratio {auto / max(one, 1e-9):.2f}x")


if __name__ == "__main__":
    main()
