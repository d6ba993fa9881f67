"""How many worker messages reach the training process through a worker's shared-memory ring (the rest take the
slower way: fresh shared memory, a descriptor over a socket, an unmap), at the paper's cumsum setting (L = 4096,
batch 16, 1 MiB a step), for a consumer taking `--step-ms` a step.

    python benchmarks/harness/ring_hits.py --workers 4 --prefetch 2
    unshare -m sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm && python benchmarks/harness/ring_hits.py --prefetch 2'

The second runs it with a container's default 64 MiB /dev/shm (a private mount namespace; needs root or
unprivileged user namespaces).
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    from ssmbench.data.read import ring
    from ssmbench.harness.feed.batches import TrainFeed, prefer_fork_safe_numba

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--prefetch", type=int, default=4, help="messages each worker reads ahead (data.prefetch)")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--step-ms", type=float, default=4.0, help="the consumer's time per step")
    args = ap.parse_args()
    prefer_fork_safe_numba()
    shm = os.statvfs("/dev/shm")  # (not ring.shm_free: this also runs against older versions of the library)
    free = shm.f_bavail * shm.f_frsize
    feed = TrainFeed("cumsum", {"L": 4096}, 0, 16, 0, args.steps, workers=args.workers, prefetch=args.prefetch)
    hits = messages = 0
    for steps, message in feed.messages():
        inputs = message["inputs"]
        messages += 1
        hits += any(r.data_ptr() <= inputs.data_ptr() < r.data_ptr() + r.numel() for r, _ in ring._held.values())
        del message, inputs  # frees the ring slot, as the trainer does once a message's steps are done
        time.sleep(args.step_ms * 1e-3 * len(steps))
    rings = [r.numel() >> 20 for r, _ in ring._held.values()]
    print(f"/dev/shm {free >> 20} MiB free, {args.workers} worker(s), prefetch {args.prefetch}: "
          f"{feed.ranges[0][1] - feed.ranges[0][0]} steps a message; {hits} of {messages} messages through a ring; rings (MiB) {rings}")


if __name__ == "__main__":
    main()
