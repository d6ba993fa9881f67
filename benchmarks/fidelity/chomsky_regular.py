"""Chomsky regular tasks' fidelity: ssmbench's parity_check, even_pairs, cycle_navigation and modular_arithmetic
against the paper's own JAX generators, run in this process: lengths, tokens, labels, the oracle, speed.

    python -m benchmarks.fidelity.chomsky_regular [--source PATH] [--n 20000] [--out results.txt]

Run from the repository root. PATH is a bare git directory (or a checkout) of
google-deepmind/neural_networks_chomsky_hierarchy (default: the `fetch` mirror). Nothing of it is vendored:
`tasks/task.py` and `tasks/regular/*.py` are written unchanged from the snapshot's HEAD into a temporary package
`neural_networks_chomsky_hierarchy` and imported; each task's `sample_batch(rng, batch_size, length)` is called as
the paper's training loop calls it (`jax.random.PRNGKey`, one length per batch). It needs `jax` (CPU is enough);
`chex`, imported by the tasks for type annotations only, is replaced by an empty stand-in where it is not installed.

Per task and length both sides generate n samples; the one-hot arrays of the paper are turned into ids (argmax).
Compared: the string length (exact), the symbol frequencies (for modular arithmetic digits and operators apart),
the label frequencies, and the label computed by ssmbench's oracle from the paper's inputs (must agree with the
paper's label on every sample: the oracle solves the task from its inputs, on both sides). Each histogram pair gets
a total-variation distance and a two-sample chi-square test; a statistic passes when TV <= 0.005 + 3 x its sampling
scale (0.5 x sum_k sqrt(2 p_k (1 - p_k) / n), p pooled), p >= 0.001, the lengths agree and the oracle agrees on
every sample. Controls show the power: cycle_navigation's labels at L = 2 against the paper's at L = 3 must differ,
and so must a wrong solver (modular arithmetic left to right, no precedence) on the paper's inputs.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.fidelity.zoology_mqar import chi_square_p, total_variation  # noqa: E402

DEFAULT_MIRROR = "/work/.mirror/google-deepmind+neural_networks_chomsky_hierarchy/repo"
PACKAGE = "neural_networks_chomsky_hierarchy"
FILES = ("tasks/task.py", "tasks/regular/parity_check.py", "tasks/regular/even_pairs.py",
         "tasks/regular/cycle_navigation.py", "tasks/regular/modular_arithmetic.py")
TASKS = {  # ssmbench name -> (module, class)
    "parity_check": ("parity_check", "ParityCheck"),
    "even_pairs": ("even_pairs", "EvenPairs"),
    "cycle_navigation": ("cycle_navigation", "CycleNavigation"),
    "modular_arithmetic": ("modular_arithmetic", "ModularArithmetic"),
}
LENGTHS = (1, 2, 5, 40, 41, 100, 500)
"""Training lengths (1..40: both ends), the first test length 41, and test lengths up to the paper's 500."""


def install_paper(source: Path, into: Path, files: tuple[str, ...]) -> str:
    """Write the paper's `files` from the snapshot's HEAD, unchanged, as the package `into/PACKAGE` and put `into` on
    sys.path (chex stubbed where missing); the snapshot's commit."""
    bare = not (source / ".git").exists() and (source / "HEAD").exists()
    git = ["git", f"--git-dir={source}"] if bare else ["git", "-C", str(source)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    for name in files:
        text = subprocess.run([*git, "show", f"HEAD:{name}"], check=True, capture_output=True).stdout
        (into / PACKAGE / name).parent.mkdir(parents=True, exist_ok=True)
        (into / PACKAGE / name).write_bytes(text)
    for package in {"", *(str(Path(name).parent) for name in files)}:
        (into / PACKAGE / package / "__init__.py").touch()
    if importlib.util.find_spec("chex") is None:  # annotations only: chex.PRNGKey, chex.Array
        chex = types.ModuleType("chex")
        chex.PRNGKey = chex.Array = object  # type: ignore[attr-defined]
        sys.modules["chex"] = chex
    sys.path.insert(0, str(into))
    return commit


def load_paper(source: Path, into: Path) -> tuple[dict[str, type], str]:
    """Write the paper's task files from the snapshot into `into`, import them; ({name: class}, commit)."""
    commit = install_paper(source, into, FILES)
    classes = {ours: getattr(importlib.import_module(f"{PACKAGE}.tasks.regular.{module}"), cls)
               for ours, (module, cls) in TASKS.items()}
    return classes, commit


def paper_samples(cls: type, length: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(string ids (n, length'), labels (n,), seconds) from a fresh task object (see `operators_are_consumed`); the
    time is the second call's (the first compiles for this length)."""
    import jax

    task = cls()
    task.sample_batch(jax.random.PRNGKey(seed + 1), batch_size=n, length=length)
    start = time.perf_counter()
    batch = task.sample_batch(jax.random.PRNGKey(seed), batch_size=n, length=length)
    x, y = np.asarray(batch["input"]), np.asarray(batch["output"])
    seconds = time.perf_counter() - start
    return x.argmax(-1), y.argmax(-1), seconds


def ssmbench_samples(name: str, length: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float, dict]:
    from ssmbench.registry import get_task
    from ssmbench.seeding import keys_for

    task = get_task(name)
    config = task.Config(L=length)
    start = time.perf_counter()
    out = task.generate(config, keys_for(task.name, task.version, config.to_dict(), seed, "train", 0, n))
    seconds = time.perf_counter() - start
    return out["inputs"][:, :-1], out["targets"][:, -1], seconds, out


def histograms(name: str, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    x = x.astype(np.int64)
    if name == "modular_arithmetic":
        return {"digits": np.bincount(x[:, 0::2].ravel(), minlength=5),
                "operators": np.bincount(x[:, 1::2].ravel() - 5, minlength=4) if x.shape[1] > 1 else np.zeros(4),
                "labels": np.bincount(y.astype(np.int64), minlength=5)}
    symbols = 3 if name == "cycle_navigation" else 2
    return {"symbols": np.bincount(x.ravel(), minlength=symbols),
            "labels": np.bincount(y.astype(np.int64), minlength=5 if name == "cycle_navigation" else 2)}


def tv_scale(pooled: np.ndarray, n: int) -> float:
    """The sampling scale of TV between two n-sample histograms of one law: 0.5 x sum_k sqrt(2 p_k (1 - p_k) / n),
    p the pooled frequencies (the standard deviation of each bin's difference, summed)."""
    p = pooled / max(pooled.sum(), 1)
    return 0.5 * float(np.sqrt(2 * p * (1 - p) / n).sum())


def oracle_agreement(name: str, length: int, x: np.ndarray, y: np.ndarray) -> float:
    """Fraction of the samples whose label ssmbench's oracle recomputes from the inputs (query token appended)."""
    from ssmbench.registry import get_task

    task = get_task(name)
    config = task.Config(L=length)
    query = task.spec(config).d_input - 1
    hits = 0
    for row, label in zip(x, y, strict=True):
        tape = np.append(row, query).astype(np.uint8)
        targets = np.full(tape.shape, -100, np.int8)
        targets[-1] = label
        hits += int(task.oracle(config, {"inputs": tape, "targets": targets})["targets"][-1] == label)
    return hits / len(y)


def operators_are_consumed(cls: type) -> str:
    """The paper's ModularArithmetic keeps its operators in a generator expression, which the first jit trace
    consumes; a second length (a new trace) then draws from an empty operator list. What happens here, in words."""
    import jax

    task = cls()
    task.sample_batch(jax.random.PRNGKey(0), batch_size=4, length=11)
    try:
        batch = task.sample_batch(jax.random.PRNGKey(1), batch_size=4, length=7)
    except Exception as error:  # noqa: BLE001 (reported, whatever it is)
        return f"second length on the same object raises {type(error).__name__}: {str(error).splitlines()[0][:100]}"
    ops = np.asarray(batch["input"]).argmax(-1)[:, 1::2]
    return f"second length on the same object runs; operator ids drawn: {sorted(set(ops.ravel().tolist()))}"


def run(source: Path, n: int) -> list[str]:
    import jax

    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="chomsky-") as tmp:
        classes, commit = load_paper(source, Path(tmp))
        lines += [f"paper snapshot: google-deepmind/neural_networks_chomsky_hierarchy@{commit} (tasks/regular, "
                  "unchanged)",
                  f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
                  f"{platform.python_version()}, NumPy {np.__version__}, jax {jax.__version__}; one thread each",
                  f"n = {n} samples per side, task and length; lengths {', '.join(map(str, LENGTHS))}",
                  "tolerance: TV(ssmbench, paper) <= 0.005 + 3 x 0.5 sum_k sqrt(2 p_k (1 - p_k) / n) (p pooled: the "
                  "sampling scale), two-sample chi-square p >= 0.001, equal lengths, and ssmbench's oracle giving "
                  "the paper's label on 2,000 of the paper's samples (and its own) every time; TV(ssm,ssm) is a "
                  "second ssmbench seed, for reference",
                  "speed: samples/s of one call of n samples, after a first call has compiled the paper's for that length", ""]
        ssmbench_samples("parity_check", 3, 4, 0)  # compile before timing
        failures = total = 0
        for name in TASKS:
            lines.append(f"== {name}")
            lines.append(f"   {'L':>4s} {'len paper/ours':>14s} {'statistic':10s} {'TV(ssm,pap)':>11s} "
                         f"{'TV(ssm,ssm)':>11s} {'chi2 p':>7s}  {'oracle on paper':>15s}  {'samples/s paper, ours':>22s}"
                         f"  verdict")
            for length in LENGTHS:
                px, py, p_time = paper_samples(classes[name], length, n, seed=123)
                ox, oy, o_time, _ = ssmbench_samples(name, length, n, seed=0)
                ax, ay, _, _ = ssmbench_samples(name, length, n, seed=1)
                agree = oracle_agreement(name, length, px[:2000], py[:2000])
                mine = oracle_agreement(name, length, ox[:2000], oy[:2000])
                same_length = px.shape[1] == ox.shape[1]
                h_paper, h_ours, h_again = (histograms(name, *side) for side in ((px, py), (ox, oy), (ax, ay)))
                for stat in h_ours:
                    tv = total_variation(h_ours[stat], h_paper[stat])
                    noise = total_variation(h_ours[stat], h_again[stat])
                    bound = 0.005 + 3 * tv_scale(h_ours[stat] + h_paper[stat], n)
                    empty = h_ours[stat].sum() + h_paper[stat].sum() < 20  # no operator in a 1-token expression
                    p = 1.0 if empty else chi_square_p(h_ours[stat], h_paper[stat])
                    ok = tv <= bound and p >= 1e-3 and same_length and agree == 1.0 and mine == 1.0
                    failures += not ok
                    total += 1
                    lines.append(f"   {length:4d} {px.shape[1]:>6d}/{ox.shape[1]:<7d} {stat:10s} {tv:11.4f} "
                                 f"{noise:11.4f} {p:7.3f}  {agree:15.4f}  {n / p_time:>10,.0f} {n / o_time:>11,.0f}"
                                 f"  {'ok' if ok else 'DIFFERS'}")
            lines.append("")
        lines.append(f"statistics outside the tolerance: {failures} of {total}")
        lines += ["", f"modular_arithmetic, one object used at two lengths: "
                      f"{operators_are_consumed(classes['modular_arithmetic'])}", "", *control(classes, n)]
    return lines


def control(classes: dict[str, type], n: int) -> list[str]:
    """The test's power: a length off by one, and a solver without precedence, must both be caught."""
    _, py, _ = paper_samples(classes["cycle_navigation"], 3, n, seed=123)
    _, oy, _, _ = ssmbench_samples("cycle_navigation", 2, n, seed=0)
    a, b = np.bincount(oy.astype(np.int64), minlength=5), np.bincount(py, minlength=5)
    tv, p = total_variation(a, b), chi_square_p(a, b)
    verdict = "ok" if tv <= 0.005 + 3 * tv_scale(a + b, n) and p >= 1e-3 else "DIFFERS (as it must)"
    px, py, _ = paper_samples(classes["modular_arithmetic"], 9, 2000, seed=123)
    left_to_right = []
    for row in px.tolist():
        value = row[0]
        for op, digit in zip(row[1::2], row[2::2], strict=True):
            value = value + digit if op == 5 else value - digit if op == 6 else value * digit
        left_to_right.append(value % 5)
    hits = float(np.mean(np.array(left_to_right) == py))
    return ["controls (must differ):",
            f"   cycle_navigation labels, ssmbench L = 2 against the paper's L = 3: TV {tv:.4f}, chi2 p {p:.2g}: "
            f"{verdict}",
            f"   modular_arithmetic L = 9 evaluated left to right (no precedence) on the paper's inputs: agrees on "
            f"{hits:.4f} of 2,000 samples: {'DIFFERS (as it must)' if hits < 1 else 'ok'}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=Path(DEFAULT_MIRROR), help="git directory or checkout")
    parser.add_argument("--n", type=int, default=20_000, help="samples per side, task and length")
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    text = "\n".join(run(args.source, args.n)) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
