"""MQAR fidelity: ssmbench's `mqar` against Zoology's own generator, run in this process, distributions and speed.

    PYTHONSAFEPATH=1 python benchmarks/fidelity/zoology_mqar.py --zoology PATH [--n 20000] [--out results.txt]

PATH is a bare git directory (or a checkout) of HazyResearch/zoology; the `fetch` mirror is
/work/.mirror/HazyResearch+zoology/repo. Nothing of it is vendored: the files its generator needs (`zoology/config.py`,
`zoology/utils.py`, `zoology/data/utils.py`, `zoology/data/multiquery_ar.py` and the package `__init__`s) are
written unchanged from the snapshot's HEAD into a temporary folder and imported from there; `multiquery_ar(...)` is
called as Zoology's `MQARConfig.build` calls it. Zoology draws its random filler with the global PyTorch generator,
which it never seeds; this script seeds it (`torch.manual_seed`) so that a run is repeatable. `zoology/utils.py`
imports `wandb` and `pandas` at the top for its logging helpers, which the generator never calls; where they are not
installed an empty module stands in for them.

For each config both sides generate n samples and the same statistics are read from (inputs, labels) alone: the
positions of the queries, the first pair's query offset (order-sensitive), the recall distance (query position minus
its key's position), queries per sample, key / value / filler id frequencies (64 equal-width id bins), the fraction
of samples whose filler repeats one of their keys, and the fraction of positions scored. Each histogram pair gets a
total-variation distance (TV) and a two-sample chi-square test (bins merged left to right until each merged bin has
at least 20 counts). Tolerance: TV(ssmbench, Zoology) <= 2 x TV(ssmbench, ssmbench with another seed) + 0.005 (the
second ssmbench sample measures the noise at this n) and chi-square p >= 0.001; a statistic passes when both hold.
A control run shows the test's power: ssmbench with uniform placement (power_a = 1) against Zoology's power law
must come out DIFFERS. Speed: samples per second of each generator, one thread each (NUMBA_NUM_THREADS=1, torch.set_num_threads(1)).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

DEFAULT_MIRROR = "/work/.mirror/HazyResearch+zoology/repo"
FILES = ("zoology/__init__.py", "zoology/config.py", "zoology/utils.py", "zoology/data/__init__.py",
         "zoology/data/utils.py", "zoology/data/multiquery_ar.py")
CONFIGS = [  # (L, num_kv_pairs, random_non_queries): Figure 2's presets, then MQARConfig's own defaults
    (64, 4, False), (256, 16, False), (512, 64, False), (64, 8, True), (256, 16, True)]
VOCAB = 8192
ID_BINS = 64


def load_zoology(source: Path, into: Path) -> tuple[Callable, str]:
    """Write Zoology's generator files from the snapshot into `into`, import them; (multiquery_ar, commit)."""
    bare = not (source / ".git").exists() and (source / "HEAD").exists()
    git = ["git", f"--git-dir={source}"] if bare else ["git", "-C", str(source)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    for name in FILES:
        text = subprocess.run([*git, "show", f"HEAD:{name}"], check=True, capture_output=True).stdout
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes(text)
    for unused in ("wandb", "pandas"):  # imported at the top of zoology/utils.py, used only by its logging helpers
        if importlib.util.find_spec(unused) is None:
            sys.modules[unused] = types.ModuleType(unused)
    sys.path.insert(0, str(into))
    module = importlib.import_module("zoology.data.multiquery_ar")
    return module.multiquery_ar, commit


def zoology_samples(multiquery_ar: Callable, L: int, k: int, random_fill: bool, n: int, seed: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    import torch

    torch.manual_seed(seed)
    with contextlib.redirect_stdout(io.StringIO()):
        segment = multiquery_ar(vocab_size=VOCAB, num_examples=n, input_seq_len=L, seed=seed, power_a=0.01,
                                num_kv_pairs=k, random_non_queries=random_fill)
    return segment.inputs.numpy(), segment.labels.numpy()


def ssmbench_samples(L: int, k: int, random_fill: bool, n: int, seed: int, power_a: float = 0.01
                     ) -> tuple[np.ndarray, np.ndarray]:
    from ssmbench.generators.mqar import Mqar, MqarConfig
    from ssmbench.seeding import keys_for

    task = Mqar()
    config = MqarConfig(L=L, num_kv_pairs=k, vocab_size=VOCAB, power_a=power_a, random_non_queries=random_fill)
    out = task.generate(config, keys_for(task.name, task.version, config.to_dict(), seed, "train", 0, n))
    return out["inputs"], out["targets"]


def statistics(inputs: np.ndarray, labels: np.ndarray, L: int, k: int) -> dict[str, np.ndarray]:
    """Histograms (counts) of what a sample's layout and tokens look like, read from (inputs, labels) alone."""
    x = inputs.astype(np.int64)
    scored = labels != -100
    rows, pos = np.nonzero(scored)
    context = 2 * k
    key_slot = np.argmax(x[rows, pos][:, None] == x[rows, 0:context:2], axis=1)  # pair index of each query's key
    first = pos[key_slot == 0]
    region = x[:, context:]
    filler = region[~scored[:, context:]]
    keys = x[:, 0:context:2]
    repeats = np.array([np.isin(keys[i], region[i][~scored[i, context:]]).any() for i in range(x.shape[0])])
    bins = np.linspace(0, VOCAB, ID_BINS + 1)
    return {
        "query position": np.bincount(pos, minlength=L),
        "first pair's query offset": np.bincount((first - context) // 2, minlength=(L - context) // 2),
        "recall distance": np.bincount(pos - 2 * key_slot, minlength=L),
        "queries per sample": np.bincount(scored.sum(axis=1), minlength=k + 2),
        "key ids": np.histogram(keys, bins)[0],
        "value ids": np.histogram(x[:, 1:context:2], bins)[0],
        "filler ids": np.histogram(filler, bins)[0],
        "filler repeats a key": np.bincount(repeats.astype(np.int64), minlength=2),
        "scored positions": np.array([scored.size - scored.sum(), scored.sum()]),
    }


def total_variation(a: np.ndarray, b: np.ndarray) -> float:
    pa, pb = a / max(a.sum(), 1), b / max(b.sum(), 1)
    return 0.5 * float(np.abs(pa - pb).sum())


def chi_square_p(a: np.ndarray, b: np.ndarray, min_count: int = 20) -> float:
    """Two-sample chi-square p-value after merging bins left to right to >= min_count combined counts."""
    from scipy.stats import chi2_contingency

    merged, acc = [], np.zeros(2)
    for pair in zip(a, b, strict=True):
        acc += pair
        if acc.sum() >= min_count:
            merged.append(acc.copy())
            acc[:] = 0
    if acc.sum() and merged:
        merged[-1] += acc
    table = np.array(merged).T
    if table.shape[1] < 2:
        return 1.0  # one bin: both sides put everything there
    return float(chi2_contingency(table)[1])


def run(zoology: Path, n: int) -> list[str]:
    import torch

    torch.set_num_threads(1)
    lines = []
    with tempfile.TemporaryDirectory(prefix="zoology-") as tmp:
        multiquery_ar, commit = load_zoology(zoology, Path(tmp))
        lines += [f"Zoology snapshot: HazyResearch/zoology@{commit} (zoology/data/multiquery_ar.py, unchanged)",
                  f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
                  f"{platform.python_version()}, NumPy {np.__version__}, torch {torch.__version__}; one thread each",
                  f"n = {n} samples per side and config, vocab {VOCAB}, power_a 0.01",
                  "tolerance: TV(ssmbench, zoology) <= 2 x TV(ssmbench, ssmbench seed 1) + 0.005, and two-sample "
                  "chi-square p >= 0.001",
                  "mean: over the histogram's bins (positions, offsets, counts; id bins of 128 ids; the fraction for "
                  "the two yes/no rows)", ""]
        ssmbench_samples(16, 2, True, 4, 0)  # compile the kernel before timing
        failures = 0
        for L, k, random_fill in CONFIGS:
            start = time.perf_counter()
            theirs = zoology_samples(multiquery_ar, L, k, random_fill, n, seed=123)
            theirs_time = time.perf_counter() - start
            start = time.perf_counter()
            ours = ssmbench_samples(L, k, random_fill, n, seed=0)
            ours_time = time.perf_counter() - start
            again = ssmbench_samples(L, k, random_fill, n, seed=1)
            s_theirs, s_ours, s_again = (statistics(*side, L, k) for side in (theirs, ours, again))
            lines.append(f"== L={L} num_kv_pairs={k} random_non_queries={random_fill}: zoology {n / theirs_time:,.0f}"
                         f" samples/s, ssmbench {n / ours_time:,.0f} samples/s (x{theirs_time / ours_time:,.1f})")
            lines.append(f"   {'statistic':28s} {'TV(ssm,zoo)':>11s} {'TV(ssm,ssm)':>11s} {'chi2 p':>8s}  "
                         f"{'mean ssm':>9s} {'mean zoo':>9s}  verdict")
            for name in s_ours:
                tv, noise = total_variation(s_ours[name], s_theirs[name]), total_variation(s_ours[name], s_again[name])
                p = chi_square_p(s_ours[name], s_theirs[name])
                ok = tv <= 2 * noise + 0.005 and p >= 1e-3
                failures += not ok
                grid = np.arange(len(s_ours[name]))
                means = [float((grid * h).sum() / max(h.sum(), 1)) for h in (s_ours[name], s_theirs[name])]
                lines.append(f"   {name:28s} {tv:11.4f} {noise:11.4f} {p:8.3f}  {means[0]:9.3f} {means[1]:9.3f}  "
                             f"{'ok' if ok else 'DIFFERS'}")
            lines.append("")
        lines.append(f"statistics outside the tolerance: {failures} of {len(CONFIGS) * len(s_ours)}")
        lines += ["", *control(multiquery_ar, n)]
    return lines


def control(multiquery_ar: Callable, n: int) -> list[str]:
    """The test's power: ssmbench with uniform placement (power_a = 1) against Zoology's power law must differ."""
    L, k = 64, 4
    theirs = statistics(*zoology_samples(multiquery_ar, L, k, False, n, seed=123), L, k)
    uniform = statistics(*ssmbench_samples(L, k, False, n, seed=0, power_a=1.0), L, k)
    same = statistics(*ssmbench_samples(L, k, False, n, seed=1, power_a=1.0), L, k)
    lines = [f"control (must differ): ssmbench power_a = 1.0 (uniform) against Zoology's 0.01, L={L}, {k} pairs"]
    for name in ("query position", "recall distance"):
        tv, noise = total_variation(uniform[name], theirs[name]), total_variation(uniform[name], same[name])
        p = chi_square_p(uniform[name], theirs[name])
        verdict = "ok" if tv <= 2 * noise + 0.005 and p >= 1e-3 else "DIFFERS (as it must)"
        lines.append(f"   {name:28s} TV {tv:.4f}, noise {noise:.4f}, chi2 p {p:.2g}: {verdict}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zoology", type=Path, default=Path(DEFAULT_MIRROR), help="git directory or checkout")
    parser.add_argument("--n", type=int, default=20_000, help="samples per side and config")
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    lines = run(args.zoology, args.n)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
