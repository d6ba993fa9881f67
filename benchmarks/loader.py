"""Loader throughput: samples/s of `ssmbench.open_dataset` + DataLoader per worker count, against the same arrays
held uncompressed in memory (the upper bound), and the share of a training step spent waiting for data.

    PYTHONSAFEPATH=1 python benchmarks/loader.py                         # builds 512-sample folders in a temp dir
    PYTHONSAFEPATH=1 python benchmarks/loader.py --step-ms 40 --save benchmarks/results/loader_cpu.txt

What is measured, for Pathfinder 128 / 256 / 512 and ListOps-Subtrees (preset dlr), each built by
`ssmbench generate ... --n N --samples-per-shard 64` twice, with the default gzip-4 and with `--codec zstd:3`:

* read: `FolderDataset.read_rows` alone in the main process (HDF5 read + decode, no transform, no torch), ms per
  sample, in the training sampler's order. For the in-memory source this is a NumPy gather.
* samples/s through `torch.utils.data.DataLoader(ds, batch_size=B, sampler=ShardAwareSampler(ds),
  num_workers=w, prefetch_factor=4, collate_fn=ds.collate)` for w in --workers: about --samples samples (at least 30 batches) timed
  after a warm-up of 2 batches per worker (worker start and file opens excluded), epochs chained, best of
  --repeats. B is the paper's per-device batch: PF-128 16, PF-256 6, PF-512 2, ListOps 32. "mem" is the same
  dataset class reading the split from an uncompressed in-memory array (decoded once beforehand) with the same
  transform, sampler and collation: the ratio file/mem is what HDF5 and decoding cost. Both transforms are timed:
  "model" (float32 pixels in [-1, 1], int64 ids and targets, made in the workers) and "compact" (stored uint8 /
  int8, to be widened on the device).
* ms per batch (B / samples/s) and the model step time above which waiting for data stays under 5 %: with
  w >= 1 workers prefetching, waiting per step is about max(0, t_batch - t_step), so t_step >= 0.95 t_batch;
  with w = 0 the read is serial, waiting = t_batch, so t_step >= 19 t_batch.
* With --step-ms S: 60 steps at --wait-workers workers with a simulated step of S ms (time.sleep, i.e. a GPU
  step during which the CPU is free), measuring the share of wall time spent in next(), for the default codec and
  for the in-memory source, and for batches of zeros of the same shapes made without any work ("zeros": what
  remains there is the DataLoader's own cost of handing a batch from a worker to the main process, plus, on a
  shared machine, the wait for a core after each sleep).

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

from ssmbench.data.loader import Batch, FolderDataset, ShardAwareSampler, collate, open_dataset

DATASETS = {  # key: (generate arguments, paper batch size per device)
    "pf128": (["pathfinder", "--size", "128"], 16),
    "pf256": (["pathfinder", "--size", "256"], 6),
    "pf512": (["pathfinder", "--size", "512"], 2),
    "listops": (["listops_subtrees", "--preset", "dlr"], 32),
}


COLLATE = [collate]
"""The DataLoader's collate_fn: the loader's own (no re-stacking copy) unless --default-collate."""


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


class Floor:
    """Batches of zeros with the shapes and dtypes of `ds`'s batches, made without any work: what remains of the
    waiting with this source is the DataLoader's own cost of handing a batch from a worker to the main process."""

    def __init__(self, ds: FolderDataset, batch: int) -> None:
        self.n, self.columns = len(ds), {k: v.zero_() for k, v in collate(ds.__getitems__(range(batch))).items()}

    def __len__(self) -> int:
        return self.n

    def __getitems__(self, indices) -> Batch:
        return Batch([], {k: v[: len(indices)].clone() for k, v in self.columns.items()})

    def close(self) -> None:
        pass


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


class Epochs:
    """ShardAwareSampler orders for epochs 0, 1, 2, ... chained: as many samples as `total` asks for."""

    def __init__(self, ds: FolderDataset, total: int, seed: int) -> None:
        self.sampler, self.total = ShardAwareSampler(ds, seed=seed, rank=0, world_size=1), total

    def __iter__(self):
        n, epoch = 0, 0
        while n < self.total:
            self.sampler.set_epoch(epoch)
            for i in self.sampler.indices()[: self.total - n].tolist():
                yield i
            n, epoch = min(self.total, n + len(self.sampler)), epoch + 1

    def __len__(self) -> int:
        return self.total


def loader_rate(ds: FolderDataset, batch: int, workers: int, repeats: int, samples: int) -> float:
    """Best samples/s over `repeats` timings of about `samples` samples (at least 30 batches), each after a warm-up
    of 2 batches per worker (worker start and file opens excluded). Epochs chain, so a timing may cross one."""
    import torch

    warm = 2 * max(workers, 1)
    timed = max(30, -(-samples // batch))
    best = 0.0
    for r in range(repeats):
        ds.close()
        loader = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=Epochs(ds, (warm + timed) * batch, r),
                                             num_workers=workers, prefetch_factor=4 if workers else None,
                                             collate_fn=COLLATE[0])
        it = iter(loader)
        for _ in range(warm):
            next(it)
        t = time.perf_counter()
        n = sum(len(b["sample_index"]) for b in it)
        best = max(best, n / (time.perf_counter() - t))
        del it, loader
    return best


def wait_share(ds: FolderDataset, batch: int, workers: int, step_ms: float, steps: int = 60) -> float:
    """Share of wall time spent waiting in next() over `steps` steps with a simulated step of step_ms."""
    import torch

    ds.close()
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=Epochs(ds, (steps + 1) * batch, 2),
                                         num_workers=workers, prefetch_factor=4 if workers else None,
                                         collate_fn=COLLATE[0])
    it = iter(loader)
    next(it)  # worker start is a one-off cost (persistent workers), not a per-step wait
    waited, t0 = 0.0, time.perf_counter()
    for _ in range(steps):
        time.sleep(step_ms / 1e3)
        t = time.perf_counter()
        next(it)
        waited += time.perf_counter() - t
    return waited / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    p.add_argument("--codecs", nargs="+", default=["gzip:4", "zstd:3"], help="builds to time (gzip:4 = default)")
    p.add_argument("--n", type=int, default=512, help="samples per build (80 %% train)")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2, 4])
    p.add_argument("--transforms", nargs="+", default=["model", "compact"], choices=["model", "compact"])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--samples", type=int, default=300, help="samples per timing (at least 30 batches)")
    p.add_argument("--step-ms", type=float, nargs="*", default=[], help="simulated model step times (ms)")
    p.add_argument("--wait-workers", type=int, default=2)
    p.add_argument("--default-collate", action="store_true", help="torch's default_collate instead of ds.collate")
    p.add_argument("--root", type=Path, help="keep the builds here (default: a temporary folder)")
    p.add_argument("--save", type=Path, help="also write the report to this file")
    args = p.parse_args(argv)

    import warnings

    import torch

    warnings.filterwarnings("ignore", message="This DataLoader will create")  # more workers than cores: on purpose
    if args.default_collate:
        COLLATE[0] = torch.utils.data.default_collate
    torch.set_num_threads(1)  # collation in the main process is much slower with 2 intra-op threads here
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    say("$ PYTHONSAFEPATH=1 python benchmarks/loader.py " + shlex.join(argv if argv is not None else sys.argv[1:]))
    say(f"{platform.node()}: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
        f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}; "
        f"{args.n} samples per build, train split read; best of {args.repeats} timings of ~{args.samples} samples; "
        f"collate_fn={'default_collate' if args.default_collate else 'ds.collate'}")
    tmp = tempfile.TemporaryDirectory(prefix="ssmbench-loader-") if args.root is None else None
    root = args.root or Path(tmp.name)
    t_start = time.perf_counter()
    codecs = [c.replace(":", "") for c in args.codecs]
    say()
    say("read = ms per sample of HDF5 read + decode alone (main process, no transform); s/s = samples/s through the "
        "DataLoader; ms/b = ms per batch; /mem = samples/s relative to the in-memory upper bound")
    say(f"{'dataset':8} {'transform':9} {'source':6} {'B':>3} {'read':>6}  " + " ".join(f"{f'w={w} s/s':>9}"
        for w in args.workers) + "  " + " ".join(f"{f'w={w} ms/b':>9}" for w in args.workers)
        + "  " + " ".join(f"{f'w={w} /mem':>8}" for w in args.workers))
    needs: list[str] = []
    waits: list[str] = []
    builds: list[str] = []
    for key in args.datasets:
        batch = DATASETS[key][1]
        folders = {}
        for codec, name in zip(args.codecs, codecs, strict=True):
            t = time.perf_counter()
            folders[name] = build(root, key, None if codec == "gzip:4" else codec, args.n)
            mib = sum(f.stat().st_size for f in folders[name].rglob("*.h5")) / 2**20
            builds.append(f"{key} {codec}: {time.perf_counter() - t:.1f} s, {mib:.1f} MiB of shards")
        reads: dict[str, float] = {}
        for transform in args.transforms:
            sources = {"mem": InMemory(open_dataset(folders[codecs[0]], "train", transform=transform))}
            sources.update({name: open_dataset(folder, "train", transform=transform)
                            for name, folder in folders.items()})
            rates: dict[str, list[float]] = {}
            for name, d in sources.items():  # the upper bound first, so each row can show its ratio to it
                if name not in reads:
                    reads[name] = read_ms(d, batch)
                rates[name] = [loader_rate(d, batch, w, args.repeats, args.samples) for w in args.workers]
                say(f"{key:8} {transform:9} {name:6} {batch:>3} {reads[name]:6.3f}  "
                    + " ".join(f"{x:9.0f}" for x in rates[name]) + "  "
                    + " ".join(f"{batch / x * 1e3:9.2f}" for x in rates[name]) + "  "
                    + " ".join(f"{x / m:8.2f}" for x, m in zip(rates[name], rates["mem"], strict=True)))
            for name in codecs:
                i = max(range(len(args.workers)), key=lambda j, name=name: rates[name][j])
                tb, w = batch / rates[name][i] * 1e3, args.workers[i]
                need = 0.95 * tb if w > 0 else 19 * tb
                needs.append(f"  {key:8} {transform:9} {name:6} best w={w}: {tb:6.2f} ms per batch of {batch}; "
                             f"step >= {need:6.1f} ms keeps waiting < 5 %")
            for s in args.step_ms:
                sources["zeros"] = Floor(sources["mem"], batch)
                shares = {name: wait_share(sources[name], batch, args.wait_workers, s)
                          for name in (codecs[0], "mem", "zeros")}
                waits.append(f"  {key:8} {transform:9} w={args.wait_workers}, step {s:5.1f} ms: waiting "
                             + ", ".join(f"{100 * v:4.1f} % ({k})" for k, v in shares.items()))
    say()
    say("Model step time that keeps waiting for data under 5 % (w >= 1 prefetching: step >= 0.95 t_batch; "
        "w = 0 serial: step >= 19 t_batch), at the best worker count measured here:")
    for line in needs:
        say(line)
    if waits:
        say("Measured with a simulated model step (time.sleep: the CPU is free during the step, as on a GPU):")
        for line in waits:
            say(line)
    say("Builds (ssmbench generate --workers 2 --samples-per-shard 64): " + "; ".join(builds))
    say(f"load average {os.getloadavg()[0]:.2f} at the end; total {time.perf_counter() - t_start:.0f} s "
        "(builds included)")
    if tmp is not None:
        tmp.cleanup()
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
