"""Loader throughput: samples/s of `ssmbench.open_dataset` + DataLoader per worker count, against the same arrays
held uncompressed in memory (the upper bound), and the share of a training step spent waiting for data.

    PYTHONSAFEPATH=1 python benchmarks/loader.py                         # builds 512-sample folders in a temp dir
    PYTHONSAFEPATH=1 python benchmarks/loader.py --step-ms 40 --save benchmarks/results/loader_cpu.txt

What is measured, for Pathfinder 128 / 256 / 512 and ListOps-Subtrees (preset dlr), each built by
`ssmbench generate ... --n N --samples-per-shard 64` twice, with the default gzip-4 and with `--codec zstd:3`:

* read: `FolderDataset.read_rows` alone in the main process (HDF5 read + decode, no transform, no torch), ms per
  sample, in the training sampler's order. For the in-memory source this is a NumPy gather.
* samples/s through `torch.utils.data.DataLoader(ds, batch_size=B, sampler=ShardAwareSampler(ds),
  num_workers=w, persistent_workers=True)` for w in --workers, over whole epochs of the train split after one
  warm-up epoch (worker start and file opens excluded), best of --repeats. B is the paper's per-device batch:
  PF-128 16, PF-256 6, PF-512 2, ListOps 32. "mem" is the same dataset class reading the split from an
  uncompressed in-memory array (decoded once beforehand) with the same transform, sampler and collation: the
  ratio file/mem is what HDF5 and decoding cost.
* ms per batch (B / samples/s) and the model step time above which waiting for data stays under 5 %: with
  w >= 1 workers prefetching, waiting per step is about max(0, t_batch - t_step), so t_step >= 0.95 t_batch;
  with w = 0 the read is serial, waiting = t_batch, so t_step >= 19 t_batch.
* With --step-ms S: one epoch at the default worker count (--wait-workers) with a simulated step of S ms
  (time.sleep, i.e. a GPU step during which the CPU is free), measuring the share of wall time spent in next().

On this 2-core machine other jobs share the cores (the load average is printed); workers > 2 oversubscribe it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ssmbench.data.loader import FolderDataset, ShardAwareSampler, open_dataset

DATASETS = {  # key: (generate arguments, paper batch size per device)
    "pf128": (["pathfinder", "--size", "128"], 16),
    "pf256": (["pathfinder", "--size", "256"], 6),
    "pf512": (["pathfinder", "--size", "512"], 2),
    "listops": (["listops_subtrees", "--preset", "dlr"], 32),
}


class InMemory(FolderDataset):
    """The same dataset reading its split from uncompressed in-memory arrays (decoded once): the upper bound."""

    def __init__(self, ds: FolderDataset) -> None:
        self.__dict__.update(ds.__getstate__())
        full = ds.read_rows(np.arange(len(ds)))
        ds.close()
        self._mem = {k: np.ascontiguousarray(full[k]) for k in self._read}

    def read_rows(self, indices) -> dict[str, np.ndarray]:
        idx = np.asarray(indices, dtype=np.int64)
        out = {k: v[idx] for k, v in self._mem.items()}  # a copy, as a read would make
        out["sample_index"] = idx
        return out


def build(root: Path, key: str, codec: str | None, n: int) -> Path:
    args, _ = DATASETS[key]
    cmd = ["ssmbench", "generate", *args, "--n", str(n), "--samples-per-shard", "64", "--out",
           str(root / (codec or "gzip").replace(":", "")), "-q", "--json", "--workers", "2"]
    if codec:
        cmd += ["--codec", codec]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return Path(json.loads(out.stdout)["path"])


def read_ms(ds: FolderDataset, batch: int) -> float:
    """ms per sample of read_rows alone, batch by batch in the training sampler's order (fresh file handles)."""
    ds.close()
    order = ShardAwareSampler(ds, seed=1, rank=0, world_size=1).indices()
    t = time.perf_counter()
    for a in range(0, len(order), batch):
        ds.read_rows(order[a:a + batch])
    dt = time.perf_counter() - t
    ds.close()
    return dt / len(order) * 1e3


def loader_rate(ds: FolderDataset, batch: int, workers: int, repeats: int, epochs: int) -> float:
    """Best samples/s over `repeats` timings of `epochs` epochs, after one warm-up epoch."""
    import torch

    ds.close()
    sampler = ShardAwareSampler(ds, seed=0, rank=0, world_size=1)
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers,
                                         persistent_workers=workers > 0, prefetch_factor=4 if workers else None)
    for _ in loader:  # warm-up: workers start, files open
        pass
    best = 0.0
    for r in range(repeats):
        n, t = 0, time.perf_counter()
        for e in range(epochs):
            sampler.set_epoch(1 + r * epochs + e)
            for b in loader:
                n += len(b["sample_index"])
        best = max(best, n / (time.perf_counter() - t))
    del loader
    return best


def wait_share(ds: FolderDataset, batch: int, workers: int, step_ms: float) -> float:
    """Share of wall time spent waiting in next() over one epoch with a simulated step of step_ms."""
    import torch

    ds.close()
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=ShardAwareSampler(ds, seed=2, rank=0,
                                         world_size=1), num_workers=workers, prefetch_factor=4 if workers else None)
    it = iter(loader)
    next(it)  # worker start is a one-off cost (persistent workers), not a per-step wait
    waited, t0 = 0.0, time.perf_counter()
    while True:
        time.sleep(step_ms / 1e3)
        t = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        waited += time.perf_counter() - t
    return waited / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    p.add_argument("--codecs", nargs="+", default=["gzip:4", "zstd:3"], help="builds to time (gzip:4 = default)")
    p.add_argument("--n", type=int, default=512, help="samples per build (80 %% train)")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2, 4])
    p.add_argument("--transform", default="model", choices=["model", "compact"])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1, help="epochs per timing")
    p.add_argument("--step-ms", type=float, nargs="*", default=[], help="simulated model step times (ms)")
    p.add_argument("--wait-workers", type=int, default=2)
    p.add_argument("--root", type=Path, help="keep the builds here (default: a temporary folder)")
    p.add_argument("--save", type=Path, help="also write the report to this file")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(1)  # collation in the main process is much slower with 2 intra-op threads here
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    say("$ PYTHONSAFEPATH=1 python benchmarks/loader.py " + shlex.join(argv if argv is not None else sys.argv[1:]))
    say(f"{platform.node()}: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
        f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}; "
        f"transform={args.transform}, n={args.n} per build (train split timed), best of {args.repeats}")
    tmp = tempfile.TemporaryDirectory(prefix="ssmbench-loader-") if args.root is None else None
    root = args.root or Path(tmp.name)
    t_start = time.perf_counter()
    head = (f"{'dataset':8} {'source':7} {'B':>3} {'read ms/s':>9} " + " ".join(f"{f'w={w} s/s':>9}"
            for w in args.workers) + "  " + " ".join(f"{f'w={w} ms/b':>9}" for w in args.workers)
            + "  " + " ".join(f"{f'w={w} /mem':>8}" for w in args.workers))
    say()
    say(head)
    summary: list[tuple] = []
    builds: list[str] = []
    for key in args.datasets:
        batch = DATASETS[key][1]
        rates: dict[str, list[float]] = {}
        for codec in args.codecs:
            t = time.perf_counter()
            folder = build(root, key, None if codec == "gzip:4" else codec, args.n)
            build_s = time.perf_counter() - t
            ds = open_dataset(folder, "train", transform=args.transform)
            sources = [(codec.replace(":", ""), ds)]
            if codec == args.codecs[0]:
                sources.append(("mem", InMemory(open_dataset(folder, "train", transform=args.transform))))
            mib = sum(f.stat().st_size for f in folder.rglob("*.h5")) / 2**20
            builds.append(f"{key} {codec}: {build_s:.1f} s, {mib:.1f} MiB of shards")
            for name, d in sources:
                rates[name + "_read"] = [read_ms(d, batch)]
                rates[name] = [loader_rate(d, batch, w, args.repeats, args.epochs) for w in args.workers]
                if name != "mem" and codec == args.codecs[0]:
                    for s in args.step_ms:
                        summary.append((key, name, args.wait_workers, s, wait_share(d, batch, args.wait_workers, s)))
        mem = rates["mem"]
        for name in [c.replace(":", "") for c in args.codecs] + ["mem"]:
            rate = rates[name]
            say(f"{key:8} {name:7} {batch:>3} {rates[name + '_read'][0]:9.3f} "
                + " ".join(f"{x:9.0f}" for x in rate) + "  "
                + " ".join(f"{batch / x * 1e3:9.2f}" for x in rate) + "  "
                + " ".join(f"{x / m:8.2f}" for x, m in zip(rate, mem, strict=True)))
        best_w = max(range(len(args.workers)), key=lambda i: rates[args.codecs[0].replace(":", "")][i])
        tb = batch / rates[args.codecs[0].replace(":", "")][best_w] * 1e3
        if args.workers[best_w] > 0:
            need = f"step >= {0.95 * tb:.1f} ms keeps waiting < 5 % (w={args.workers[best_w]}, prefetching)"
        else:
            need = f"step >= {19 * tb:.1f} ms keeps waiting < 5 % (w=0, serial reads)"
        summary.append((key, need))
    say()
    say("Model step time that keeps waiting for data under 5 %, default codec, best worker count measured here:")
    for row in summary:
        if len(row) == 2:
            say(f"  {row[0]:8} {row[1]}")
    waits = [row for row in summary if len(row) == 5]
    if waits:
        say(f"Measured share of wall time waiting for data with a simulated step (w={args.wait_workers}):")
        for key, name, _, s, share in waits:
            say(f"  {key:8} {name:6} step {s:6.1f} ms: {100 * share:5.1f} % waiting")
    say("Builds (ssmbench generate --workers 2): " + "; ".join(builds))
    say(f"load average {os.getloadavg()[0]:.2f} at the end; total {time.perf_counter() - t_start:.0f} s "
        "(builds included)")
    if tmp is not None:
        tmp.cleanup()
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
