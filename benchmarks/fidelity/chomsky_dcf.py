"""Chomsky DCF and CS tasks' fidelity: ssmbench's reverse_string, stack_manipulation, modular_arithmetic_brackets,
solve_equation (`--level dcf`) and duplicate_string, missing_duplicate_string, odds_first, bucket_sort,
binary_addition, binary_multiplication, compute_sqrt (`--level cs`)
against the paper's own generators, run in this process: lengths, tokens, structure, labels, oracle.

    python -m benchmarks.fidelity.chomsky_dcf [--level dcf|cs] [--source PATH] [--n 10000] [--out results.txt]

Run from the repository root, as `chomsky_regular` (whose loader writes the snapshot's files unchanged into a
temporary package and imports them): here `tasks/dcf/*.py` with `tasks/cs/duplicate_string.py` (reverse_string
subclasses it), or the seven `tasks/cs/*.py` built so far. They need `jax`, `tqdm` and `dm-tree` (`tree`); the tasks
drawn with NumPy's or Python's global generators (they ignore the JAX key) are seeded through `np.random.seed` and
`random.seed`.

Per task and length both sides generate n samples (one-hot arrays of the paper turned into ids). Compared, each as a
pair of histograms (TV and two-sample chi-square, with `chomsky_regular`'s tolerance): the input and answer tokens,
each token kind apart (bits; digits, operators; stack bits, actions), and structure as one number per sample:
reverse_string whether the answer's first token is the input's last; stack_manipulation the initial stack's length
and the final stack's; the binary tasks the first number's width and the answer's length; compute_sqrt where the first 1 is; bucket_sort the number of
0s; missing_duplicate_string where the blank is; the bracket tasks the number of '(' and of those that open the
expression (its leftmost nesting depth); solve_equation also where `x` sits (tenths of the expression). The oracle
column: ssmbench's oracle recomputes the paper's scored answer from the paper's inputs on 1,000 samples, and its own on 1,000 of ssmbench's;
both must be 1. Controls: mab labels without `*` against the paper's with it must differ, and so must stack lengths
at L against the paper's at L + 1.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import importlib  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.fidelity.chomsky_regular import DEFAULT_MIRROR, PACKAGE, install_paper, tv_scale  # noqa: E402
from benchmarks.fidelity.zoology_mqar import chi_square_p, total_variation  # noqa: E402

LEVELS = {  # level -> (the snapshot's files, {ssmbench name: (module under tasks/, class, arguments)})
    "dcf": (("tasks/task.py", "tasks/cs/duplicate_string.py", "tasks/dcf/reverse_string.py",
             "tasks/dcf/stack_manipulation.py", "tasks/dcf/modular_arithmetic_brackets.py",
             "tasks/dcf/solve_equation.py"),
            {"reverse_string": ("dcf.reverse_string", "ReverseString", {}),
             "stack_manipulation": ("dcf.stack_manipulation", "StackManipulation", {}),
             # experiments/constants.py builds it with mult=True
             "modular_arithmetic_brackets": ("dcf.modular_arithmetic_brackets", "ModularArithmeticBrackets",
                                             {"mult": True}),
             "solve_equation": ("dcf.solve_equation", "SolveEquation", {})}),
    "cs": (("tasks/task.py", "tasks/cs/duplicate_string.py", "tasks/cs/missing_duplicate_string.py",
            "tasks/cs/odds_first.py", "tasks/cs/bucket_sort.py", "tasks/cs/binary_addition.py",
            "tasks/cs/binary_multiplication.py", "tasks/cs/compute_sqrt.py"),
           {"duplicate_string": ("cs.duplicate_string", "DuplicateString", {}),
            "missing_duplicate_string": ("cs.missing_duplicate_string", "MissingDuplicateString", {}),
            "odds_first": ("cs.odds_first", "OddsFirst", {}),
            "bucket_sort": ("cs.bucket_sort", "BucketSort", {}),
            "binary_addition": ("cs.binary_addition", "BinaryAddition", {}),
            "binary_multiplication": ("cs.binary_multiplication", "BinaryMultiplication", {}),
            "compute_sqrt": ("cs.compute_sqrt", "ComputeSqrt", {})}),
}
LENGTHS = (1, 2, 5, 40, 41, 100, 500)


def load_paper(source: Path, into: Path, level: str) -> tuple[dict[str, object], str]:
    files, tasks = LEVELS[level]
    commit = install_paper(source, into, files)
    return {ours: getattr(importlib.import_module(f"{PACKAGE}.tasks.{module}"), cls)(**kwargs)
            for ours, (module, cls, kwargs) in tasks.items()}, commit


def paper_samples(task: object, length: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(input ids (n, length), answer ids (n, T), seconds of the second call; the first compiles)."""
    import jax

    np.random.seed(seed + 1)
    random.seed(seed + 1)
    task.sample_batch(jax.random.PRNGKey(seed + 1), batch_size=n, length=length)
    np.random.seed(seed)
    random.seed(seed)
    start = time.perf_counter()
    batch = task.sample_batch(jax.random.PRNGKey(seed), batch_size=n, length=length)
    x, y = np.asarray(batch["input"]).argmax(-1), np.asarray(batch["output"]).argmax(-1)
    return x, y.reshape(n, -1), time.perf_counter() - start


def ssmbench_samples(name: str, length: int, n: int, seed: int, **changes) -> tuple[np.ndarray, np.ndarray, float]:
    """(input ids (n, L), answer ids (n, T) with -100 where unscored, seconds)."""
    from ssmbench.registry import get_task
    from ssmbench.seeding import keys_for

    task = get_task(name)
    config = dataclasses.replace(task.presets[task.default_preset], L=length, **changes)
    start = time.perf_counter()
    out = task.generate(config, keys_for(task.name, task.version, config.to_dict(), seed, "train", 0, n))
    seconds = time.perf_counter() - start
    return out["inputs"][:, :length], out["targets"][:, length:], seconds


def scored(name: str, y: np.ndarray) -> np.ndarray:
    """The answer with -100 where neither side scores: after the termination token (class 2) of stack_manipulation
    and the binary tasks."""
    y = y.astype(np.int64)
    if name not in ("stack_manipulation", "binary_addition", "binary_multiplication"):
        return y
    ends = (y == 2).argmax(axis=1)
    return np.where(np.arange(y.shape[1])[None, :] <= ends[:, None], y, -100)


def histograms(name: str, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """Histograms whose entries are independent given what another statistic compares (tokens of one kind, or one
    number per sample): pooling all tokens of a tape would count a sample's structure (how many brackets, how long
    the stack) once per token and make the chi-square far too sharp."""
    x, y = x.astype(np.int64), scored(name, y)
    T = x.shape[1] + 1
    if name in ("duplicate_string", "odds_first"):
        return {"bits": np.bincount(x.ravel(), minlength=2), "answer": np.bincount(y.ravel(), minlength=2)}
    if name == "bucket_sort":
        return {"symbols": np.bincount(x.ravel(), minlength=5), "answer": np.bincount(y.ravel(), minlength=5),
                "0s a sample": np.bincount((x == 0).sum(axis=1), minlength=T)}
    if name == "missing_duplicate_string":
        return {"bits": np.bincount(x[x < 2], minlength=2), "blank at": np.bincount((x == 2).argmax(axis=1),
                                                                                    minlength=T),
                "answer": np.bincount(y.ravel(), minlength=2)}
    if name in ("binary_addition", "binary_multiplication"):
        return {"bits": np.bincount(x[x < 2], minlength=2), "width": np.bincount((x == 2).argmax(axis=1), minlength=T),
                "answer bits": np.bincount(y[(y >= 0) & (y < 2)], minlength=2),
                "answer len": np.bincount((y == 2).argmax(axis=1), minlength=T + 1)}
    if name == "compute_sqrt":
        return {"bits": np.bincount(x.ravel(), minlength=2), "answer": np.bincount(y.ravel(), minlength=2),
                "top 1 at": np.bincount(x.argmax(axis=1), minlength=T)}
    if name == "reverse_string":
        return {"bits": np.bincount(x.ravel(), minlength=2), "answer": np.bincount(y.ravel(), minlength=2),
                "first=last": np.bincount((y[:, 0] == x[:, -1]).astype(np.int64), minlength=2)}
    if name == "stack_manipulation":
        has_action = x >= 2
        start = np.where(has_action.any(axis=1), has_action.argmax(axis=1), x.shape[1])
        return {"stack bits": np.bincount(x[x < 2], minlength=2), "actions": np.bincount(x[x >= 2] - 2, minlength=3),
                "answer bits": np.bincount(y[(y >= 0) & (y < 2)], minlength=2),
                "stack in": np.bincount(start, minlength=T), "stack out": np.bincount((y == 2).argmax(axis=1),
                                                                                       minlength=T)}
    lp = 8 if name == "modular_arithmetic_brackets" else 7
    out = {"digits": np.bincount(x[x < 5], minlength=5),
           "operators": np.bincount(x[(x >= 5) & (x <= 7) & (x != lp)] - 5, minlength=3),
           "'(' count": np.bincount((x == lp).sum(axis=1), minlength=T),
           "opening (": np.bincount((x != lp).argmax(axis=1), minlength=T),
           "answer": np.bincount(y.ravel(), minlength=5)}
    if name == "solve_equation" and x.shape[1] >= 3:
        out["x at"] = np.bincount((x == 9).argmax(axis=1) * 10 // (x.shape[1] - 2), minlength=10)
    return out


def oracle_agreement(name: str, length: int, x: np.ndarray, y: np.ndarray) -> float:
    """Fraction of samples whose scored answer ssmbench's oracle recomputes from the inputs alone."""
    from ssmbench.registry import get_task

    task = get_task(name)
    config = dataclasses.replace(task.presets[task.default_preset], L=length)
    spec = task.spec(config)
    query, T = spec.d_input - 1, spec.seq_len - length
    y = scored(name, y)
    hits = 0
    for row, answer in zip(x, y, strict=True):
        tape = np.concatenate([row, np.full(T, query)]).astype(np.uint8)
        targets = np.concatenate([np.full(length, -100), answer]).astype(np.int8)
        got = task.oracle(config, {"inputs": tape, "targets": targets})["targets"][length:]
        hits += int((got == answer).all())
    return hits / len(y)


def run(source: Path, n: int, level: str) -> list[str]:
    import jax

    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"chomsky-{level}-") as tmp:
        tasks, commit = load_paper(source, Path(tmp), level)
        lines += [f"paper snapshot: google-deepmind/neural_networks_chomsky_hierarchy@{commit} "
                  f"({', '.join(LEVELS[level][0][1:])}, unchanged)",
                  f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
                  f"{platform.python_version()}, NumPy {np.__version__}, jax {jax.__version__}; one thread each",
                  f"n = {n} samples per side, task and length; lengths {', '.join(map(str, LENGTHS))}",
                  "tolerance (chomsky_regular's): TV <= 0.005 + 3 x its sampling scale, chi-square p >= 0.001, equal "
                  "tape lengths, the oracle agreeing on 1,000 samples of each side; TV(ssm,ssm) is a second "
                  "ssmbench seed, for reference",
                  "speed: samples/s of one call of n samples (the paper's after a first call at that length)", ""]
        for name in tasks:
            ssmbench_samples(name, 5, 4, 0)  # load the compiled kernels before timing
        failures = total = 0
        for name, task in tasks.items():
            lines.append(f"== {name}")
            lines.append(f"   {'L':>4s} {'T paper/ours':>12s} {'statistic':10s} {'TV(ssm,pap)':>11s} "
                         f"{'TV(ssm,ssm)':>11s} {'chi2 p':>7s}  {'oracle pap/own':>14s}  "
                         f"{'samples/s paper, ours':>22s}  verdict")
            for length in LENGTHS:
                px, py, p_time = paper_samples(task, length, n, seed=123)
                ox, oy, o_time = ssmbench_samples(name, length, n, seed=0)
                ax, ay, _ = ssmbench_samples(name, length, n, seed=1)
                agree = oracle_agreement(name, length, px[:1000], py[:1000])
                mine = oracle_agreement(name, length, ox[:1000], oy[:1000])
                same = px.shape == ox.shape and py.shape[1] == oy.shape[1]
                h_paper, h_ours, h_again = (histograms(name, *side) for side in ((px, py), (ox, oy), (ax, ay)))
                for stat in h_ours:
                    tv = total_variation(h_ours[stat], h_paper[stat])
                    noise = total_variation(h_ours[stat], h_again[stat])
                    bound = 0.005 + 3 * tv_scale(h_ours[stat] + h_paper[stat], n)
                    p = chi_square_p(h_ours[stat], h_paper[stat]) if (h_ours[stat] > 0).sum() + (
                        h_paper[stat] > 0).sum() > 2 else 1.0
                    ok = tv <= bound and p >= 1e-3 and same and agree == 1.0 and mine == 1.0
                    failures += not ok
                    total += 1
                    lines.append(f"   {length:4d} {py.shape[1]:>5d}/{oy.shape[1]:<6d} {stat:10s} {tv:11.4f} "
                                 f"{noise:11.4f} {p:7.3f}  {agree:6.4f}/{mine:6.4f}  {n / p_time:>10,.0f} "
                                 f"{n / o_time:>11,.0f}  {'ok' if ok else 'DIFFERS'}")
            lines.append("")
        lines.append(f"statistics outside the tolerance: {failures} of {total}")
        if level == "dcf":
            lines += ["", *control(tasks, n)]
    return lines


def control(tasks: dict[str, object], n: int) -> list[str]:
    """The test's power: a law without `*`, and a length off by one, must both be caught."""
    out = ["controls (must differ):"]
    for what, (px, py), (ox, oy) in [
        ("modular_arithmetic_brackets labels at L = 9, ssmbench mult=false against the paper's mult=True",
         paper_samples(tasks["modular_arithmetic_brackets"], 9, n, 123)[:2],
         ssmbench_samples("modular_arithmetic_brackets", 9, n, 0, mult=False)[:2]),
        ("stack_manipulation initial stack length, ssmbench L = 20 against the paper's L = 21",
         paper_samples(tasks["stack_manipulation"], 21, n, 123)[:2],
         ssmbench_samples("stack_manipulation", 20, n, 0)[:2])]:
        stat = "answer" if "labels" in what else "stack in"
        name = "modular_arithmetic_brackets" if "labels" in what else "stack_manipulation"
        a, b = histograms(name, ox, oy)[stat], histograms(name, px, py)[stat]
        size = max(len(a), len(b))
        a, b = np.pad(a, (0, size - len(a))), np.pad(b, (0, size - len(b)))
        tv, p = total_variation(a, b), chi_square_p(a, b)
        verdict = "ok" if tv <= 0.005 + 3 * tv_scale(a + b, n) and p >= 1e-3 else "DIFFERS (as it must)"
        out.append(f"   {what}: TV {tv:.4f}, chi2 p {p:.2g}: {verdict}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=Path(DEFAULT_MIRROR), help="git directory or checkout")
    parser.add_argument("--n", type=int, default=10_000, help="samples per side, task and length")
    parser.add_argument("--level", choices=sorted(LEVELS), default="dcf", help="the paper's tasks/<level> to compare")
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    text = "\n".join(run(args.source, args.n, args.level)) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
