"""Word-problem fidelity: ssmbench's `word_problem` against jopetty/word-problem's `src/generate_data.py`, run in
this process: the group numbering, every label, token and product frequencies, repeats, speed.

    python -m benchmarks.fidelity.word_problem [--source PATH] [--algebra PATH] [--n 20000] [--out results.txt]

Run from the repository root. PATH and --algebra are bare git directories (or checkouts) of jopetty/word-problem
and of its dependency jopetty/abstract_algebra (default: the `fetch` mirrors). Nothing is vendored: the generator
file and the `abstract_algebra` package are written unchanged from the snapshots' HEAD into a temporary folder and
imported. The generator's `main(group, k, samples, data_dir, seed, overwrite)` runs as its command line runs it;
three imports it makes for its command line and CSV file stand in for themselves where not installed (`fire`, not
called; `pyrootutils.find_root`, asked for the project root at import; `polars.from_dicts(...).write_csv`, which
here hands the rows back instead of writing them).

Compared per group (S5, A5, A4_x_Z5, Z60): the Cayley table of the paper's group object against ssmbench's (every
entry: the token ids are the same elements), and at k = 2, 5, 20: ssmbench's oracle on the paper's inputs gives the
paper's targets at every position of every sample; token frequencies, the final product's frequencies and the
products at every position (TV and chi-square as in the other fidelity scripts: TV <= 0.005 + 3 x its sampling
scale, p >= 0.001); the share of repeated sequences (the paper draws without replacement, ssmbench independently).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from functools import reduce  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.fidelity.chomsky_regular import tv_scale  # noqa: E402
from benchmarks.fidelity.zoology_mqar import chi_square_p, total_variation  # noqa: E402

DEFAULT_SOURCE = "/work/.mirror/jopetty+word-problem/repo"
DEFAULT_ALGEBRA = "/work/.mirror/jopetty+abstract_algebra/repo"
GROUPS = ("S5", "A5", "A4_x_Z5", "Z60")
LENGTHS = (2, 5, 20)
CAPTURED: list[list[dict[str, Any]]] = []


def _git(source: Path) -> list[str]:
    bare = not (source / ".git").exists() and (source / "HEAD").exists()
    return ["git", f"--git-dir={source}"] if bare else ["git", "-C", str(source)]


def _commit(source: Path) -> str:
    return subprocess.run([*_git(source), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def _stand_ins(root: Path) -> None:
    """The command-line and CSV imports of generate_data.py, where they are not installed."""
    if importlib.util.find_spec("fire") is None:
        sys.modules["fire"] = types.ModuleType("fire")
    if importlib.util.find_spec("pyrootutils") is None:
        rootutils = types.ModuleType("pyrootutils")
        rootutils.find_root = lambda **_: root  # type: ignore[attr-defined]
        sys.modules["pyrootutils"] = rootutils
    polars = types.ModuleType("polars")  # always: the rows come back here instead of into a CSV file

    class Frame:
        def __init__(self, rows: list[dict[str, Any]]) -> None:
            self.rows = rows

        def write_csv(self, _path: object) -> None:
            CAPTURED.append(self.rows)

    polars.from_dicts = Frame  # type: ignore[attr-defined]
    sys.modules["polars"] = polars


def load_paper(source: Path, algebra: Path, into: Path) -> tuple[types.ModuleType, str, str]:
    (into / "src").mkdir(parents=True)
    text = subprocess.run([*_git(source), "show", "HEAD:src/generate_data.py"], check=True,
                          capture_output=True).stdout
    (into / "src" / "generate_data.py").write_bytes(text)
    archive = subprocess.run([*_git(algebra), "archive", "HEAD", "src/abstract_algebra"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
        tar.extractall(into / "algebra", filter="data")
    sys.path[:0] = [str(into / "src"), str(into / "algebra" / "src")]
    _stand_ins(into)
    return importlib.import_module("generate_data"), _commit(source), _commit(algebra)


def paper_samples(module: types.ModuleType, group: str, k: int, n: int, seed: int, into: Path
                  ) -> tuple[np.ndarray, np.ndarray, float]:
    CAPTURED.clear()
    start = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            module.main(group=group, k=k, samples=n, data_dir=into, seed=seed, overwrite=True)
        finally:
            sys.stdout = stdout
    seconds = time.perf_counter() - start
    rows = CAPTURED[-1]
    x = np.array([[int(t) for t in r["input"].split()] for r in rows])
    y = np.array([[int(t) for t in r["target"].split()] for r in rows])
    return x, y, seconds


def ssmbench_samples(group: str, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    from ssmbench.generators.word_problem import WordProblem, WordProblemConfig
    from ssmbench.seeding import keys_for

    task, config = WordProblem(), WordProblemConfig(group=group, L=k)
    start = time.perf_counter()
    out = task.generate(config, keys_for(task.name, task.version, config.to_dict(), seed, "train", 0, n))
    return out["inputs"].astype(np.int64), out["targets"].astype(np.int64), time.perf_counter() - start


def paper_table(module: types.ModuleType, group: str) -> np.ndarray:
    factors = [module.generate_group((g[0], int(g[1:]))) for g in group.split("_x_")]
    g = reduce(lambda a, b: a * b, factors)
    return np.array([[g.elements.index(g.op(a, b)) for b in g.elements] for a in g.elements])


def repeats(x: np.ndarray) -> float:
    return 1.0 - len({tuple(r) for r in x.tolist()}) / len(x)


def run(source: Path, algebra: Path, n: int) -> list[str]:
    from ssmbench.generators._groups import cayley_table
    from ssmbench.generators.word_problem import WordProblem, WordProblemConfig

    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="word-problem-") as tmp:
        module, commit, algebra_commit = load_paper(source, algebra, Path(tmp))
        lines += [f"paper snapshot: jopetty/word-problem@{commit} (src/generate_data.py, unchanged), "
                  f"jopetty/abstract_algebra@{algebra_commit}",
                  f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
                  f"{platform.python_version()}, NumPy {np.__version__}; one thread each",
                  f"n = {n} samples per side (the paper's `--samples`), group and k",
                  "tolerance: TV <= 0.005 + 3 x 0.5 sum_k sqrt(2 p_k (1 - p_k) / n) (p pooled) and two-sample "
                  "chi-square p >= 0.001; oracle: ssmbench's oracle on the paper's inputs gives the paper's "
                  "targets at every position", ""]
        WordProblem().generate(WordProblemConfig(L=2), np.arange(2, dtype=np.uint64))  # compile before timing
        failures = total = 0
        for group in GROUPS:
            same = bool((paper_table(module, group) == cayley_table(group)).all())
            failures += not same
            total += 1
            lines.append(f"== {group}: Cayley table identical to the paper's group object: {same}")
            lines.append(f"   {'k':>3s} {'statistic':16s} {'TV(ssm,pap)':>11s} {'bound':>7s} {'chi2 p':>7s}  "
                         f"{'oracle':>7s} {'repeats pap/ssm':>16s} {'samples/s pap, ssm':>20s}  verdict")
            for k in LENGTHS:
                px, py, p_time = paper_samples(module, group, k, n, seed=123, into=Path(tmp))
                ox, oy, o_time = ssmbench_samples(group, k, len(px), seed=0)
                task, config = WordProblem(), WordProblemConfig(group=group, L=k)
                agree = float(np.mean([np.array_equal(task.oracle(config, {"inputs": a})["targets"], b)
                                       for a, b in zip(px, py, strict=True)]))
                order = cayley_table(group).shape[0]
                stats = {"tokens": (np.bincount(ox.ravel(), minlength=order), np.bincount(px.ravel(), minlength=order)),
                         "final product": (np.bincount(oy[:, -1], minlength=order),
                                           np.bincount(py[:, -1], minlength=order)),
                         "all products": (np.bincount(oy.ravel(), minlength=order),
                                          np.bincount(py.ravel(), minlength=order))}
                for name, (ours, theirs) in stats.items():
                    tv = total_variation(ours, theirs)
                    bound = 0.005 + 3 * tv_scale(ours + theirs, len(px) * (k if name != "final product" else 1))
                    p = chi_square_p(ours, theirs)
                    ok = tv <= bound and p >= 1e-3 and agree == 1.0
                    failures += not ok
                    total += 1
                    lines.append(f"   {k:3d} {name:16s} {tv:11.4f} {bound:7.4f} {p:7.3f}  {agree:7.4f} "
                                 f"{repeats(px):7.4f}/{repeats(ox):<8.4f} {len(px) / p_time:>9,.0f} "
                                 f"{len(px) / o_time:>10,.0f}  {'ok' if ok else 'DIFFERS'}")
            lines.append("")
        lines.append(f"checks outside the tolerance: {failures} of {total}")
        lines += ["", *control(module, n, Path(tmp))]
    return lines


def control(module: types.ModuleType, n: int, into: Path) -> list[str]:
    """The oracle column's power: products taken in the other order (g_t ... g_0) on the paper's S5 samples."""
    from ssmbench.generators._groups import cayley_table

    px, py, _ = paper_samples(module, "S5", 5, min(n, 2000), seed=7, into=into)
    table = cayley_table("S5")
    hits = 0
    for x, y in zip(px.tolist(), py.tolist(), strict=True):
        product, out = 0, []
        for g in x:
            product = int(table[g, product])
            out.append(product)
        hits += out == y
    share = hits / len(px)
    return ["control (must differ): S5, k = 5, products in the other order on the paper's inputs: equal targets on "
            f"{share:.4f} of {len(px)} samples: {'DIFFERS (as it must)' if share < 1 else 'ok'}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=Path(DEFAULT_SOURCE), help="jopetty/word-problem")
    parser.add_argument("--algebra", type=Path, default=Path(DEFAULT_ALGEBRA), help="jopetty/abstract_algebra")
    parser.add_argument("--n", type=int, default=20_000, help="samples per side, group and k")
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    text = "\n".join(run(args.source, args.algebra, args.n)) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
