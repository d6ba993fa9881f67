"""Flip-flop fidelity: ssmbench's `flipflop` against FFL(T, p) as Liu et al. define it and count it, in one process.

    PYTHONSAFEPATH=1 python benchmarks/fidelity/flipflop.py [--n 20000] [--out results.txt]

The authors publish data (Hugging Face `synthseq/flipflop`), not a generator, and the data is not downloaded here.
Their side is therefore the definition of section 3.1 written out in NumPy, vectorised and independent of ssmbench's
kernel: (i) the first instruction w, the last r; (ii) the others i.i.d. with (p_w, p_r, p_i) = ((1 - p_i)/2,
(1 - p_i)/2, p_i); (iii) the bits of w and i fair coins, the bit of r the last written bit; ids from the data's
README (w r i 0 1 = 0 1 2 3 4), T = 512. The paper's own numbers are checked too: its appendix B counts the reads of
its test sets (26,508 in 10^3 FFL(0.8) sequences, 353,875 in 10^5 FFL(0.98), 345,781 in 3,000 FFL(0.1)).

Statistics, from the ids alone: instruction counts, reads per sequence, the distance from each read back to its write,
the bits of writes and of reads, and the position of the first read. Tolerance as zoology_mqar.py's. Oracle: ssmbench's
task oracle must give, on both sides' rows, exactly the bits that follow the reads. A control (ssmbench at p_i = 0.85
against the definition at 0.8) must come out DIFFERS. Speed: sequences per second, one thread each.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _compare, beside this file (scripts run with PYTHONSAFEPATH)
import _compare  # noqa: E402

T = 512
PAPER_READS = {0.8: (26508, 10**3), 0.98: (353875, 10**5), 0.1: (345781, 3000)}
"""Appendix B: (reads, sequences) of the paper's in-distribution, sparse and dense test sets."""


def definition_rows(p_ignore: float, n: int, seed: int) -> np.ndarray:
    """(n, T) ids of FFL(T, p_ignore), section 3.1 written out in NumPy."""
    rng = np.random.default_rng(seed)
    k = T // 2
    ops = rng.choice(np.array([0, 1, 2]), size=(n, k), p=[(1 - p_ignore) / 2, (1 - p_ignore) / 2, p_ignore])
    ops[:, 0], ops[:, -1] = 0, 1
    bits = rng.integers(0, 2, size=(n, k))
    writes = np.where(ops == 0, np.arange(k), -1)
    last_write = np.maximum.accumulate(writes, axis=1)  # index of the most recent w (the first one is w)
    bits = np.where(ops == 1, np.take_along_axis(bits, last_write, axis=1), bits)
    out = np.empty((n, T), np.int64)
    out[:, 0::2], out[:, 1::2] = ops, 3 + bits
    return out


def ssmbench_rows(p_ignore: float, n: int, seed: int) -> np.ndarray:
    from ssmbench.generators.flipflop import FlipFlop, FlipFlopConfig
    from ssmbench.seeding import keys_for

    task, config = FlipFlop(), FlipFlopConfig(L=T, p_ignore=p_ignore)
    return task.generate(config, keys_for(task.name, task.version, config.to_dict(), seed, "train", 0, n))[
        "inputs"].astype(np.int64)


def statistics(x: np.ndarray) -> dict[str, np.ndarray]:
    ops, bits = x[:, 0::2], x[:, 1::2]
    k = ops.shape[1]
    reads = ops == 1
    last_write = np.maximum.accumulate(np.where(ops == 0, np.arange(k), -1), axis=1)
    distance = (np.arange(k) - last_write)[reads]
    return {
        "instructions w/r/i": np.bincount(ops[:, 1:-1].ravel(), minlength=3),
        "reads per sequence": np.bincount(reads.sum(axis=1), minlength=k + 1),
        "read-to-write distance": np.bincount(np.minimum(distance, k), minlength=k + 1),
        "bits of writes": np.bincount(bits[ops == 0] - 3, minlength=2),
        "bits of reads": np.bincount(bits[reads] - 3, minlength=2),
        "first read": np.bincount(reads.argmax(axis=1), minlength=k),
    }


def oracle_agrees(x: np.ndarray, p_ignore: float) -> int:
    from ssmbench.generators.flipflop import FlipFlop, FlipFlopConfig

    task, config, good = FlipFlop(), FlipFlopConfig(L=T, p_ignore=p_ignore), 0
    for row in x:
        want = np.full(T, -100)
        reads = np.flatnonzero(row[0::2] == 1) * 2
        want[reads] = row[reads + 1]
        good += bool(np.array_equal(task.oracle(config, {"inputs": row.astype(np.uint8)})["targets"], want))
    return good


def run(n: int) -> list[str]:
    lines = [f"their side: FFL(T = {T}, p_i) from section 3.1 of Liu et al. 2023, in NumPy (no generator is published)",
             f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}, NumPy {np.__version__}; one thread each",
             f"n = {n} sequences per side and p_i",
             "tolerance: TV(ssmbench, definition) <= 2 x TV(ssmbench, ssmbench seed 1) + 0.005, and two-sample "
             "chi-square p >= 0.001", ""]
    ssmbench_rows(0.8, 4, 0)  # compile before timing
    failures = total = 0
    for p_ignore, (paper_reads, paper_n) in PAPER_READS.items():
        start = time.perf_counter()
        theirs = definition_rows(p_ignore, n, seed=123)
        their_time = time.perf_counter() - start
        start = time.perf_counter()
        ours = ssmbench_rows(p_ignore, n, seed=0)
        our_time = time.perf_counter() - start
        s_theirs, s_ours, s_again = (statistics(x) for x in (theirs, ours, ssmbench_rows(p_ignore, n, seed=1)))
        checked = min(n, 2000)
        solved = oracle_agrees(theirs[:checked], p_ignore), oracle_agrees(ours[:checked], p_ignore)
        per_seq = (ours[:, 0::2] == 1).sum(axis=1)
        sem = per_seq.std() / np.sqrt(n)
        lines.append(f"== FFL({p_ignore}): definition {n / their_time:,.0f} seq/s, ssmbench {n / our_time:,.0f} "
                     f"seq/s; oracle reproduces {solved[0]}/{checked} of the definition's rows, {solved[1]}/{checked} of ours")
        lines.append(f"   reads per sequence: ssmbench {per_seq.mean():.3f} +- {sem:.3f}, the paper's test set "
                     f"{paper_reads / paper_n:.3f} ({paper_reads:,} reads in {paper_n:,} sequences), expected "
                     f"{1 + (T // 2 - 2) * (1 - p_ignore) / 2:.3f}")
        failures += solved != (checked, checked)
        rows, off = _compare.table(s_ours, s_theirs, s_again, "def")
        lines += rows
        failures += off
        total += len(s_ours)
        lines.append("")
    lines.append(f"statistics outside the tolerance, or rows the oracle did not solve: {failures} ({total} statistics)")
    theirs = statistics(definition_rows(0.8, n, seed=123))
    ours, same = statistics(ssmbench_rows(0.85, n, seed=0)), statistics(ssmbench_rows(0.85, n, seed=1))
    lines += ["", *_compare.control("ssmbench at p_i = 0.85 against the definition at 0.8", ours, theirs, same,
                                    ("instructions w/r/i", "reads per sequence"))]
    return lines


def main(argv: list[str] | None = None) -> int:
    return _compare.main(__doc__, lambda args: run(args.n), 20_000, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
