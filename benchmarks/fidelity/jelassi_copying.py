"""Copying fidelity: ssmbench's `string_copy`, `prefix_ngram`, `suffix_ngram`, `duplicate_ngram` against Jelassi et
al.'s own generator, run in this process: distributions, the solving oracle on both sides, and speed.

    PYTHONSAFEPATH=1 python benchmarks/fidelity/jelassi_copying.py [--repo PATH] [--n 5000] [--out results.txt]

PATH is a bare git directory (or a checkout) of sjelassi/transformers_ssm_copy; the `fetch` mirror is the default.
Nothing of it is vendored: `synthetic_exps/data_utils.py` is written unchanged from the snapshot's HEAD into a
temporary folder and imported from there. Their side is `EvalCopyDataset` (one example a row, padded with `*` to the
context length, the loss mask on the answer and its `.`), called with the context length set to ssmbench's L, so that
both sides give (n, L) id rows and a mask of the answer tokens; ssmbench's mask is its scored positions moved one
right (a label sits on the position that predicts its token). NumPy's and Python's global generators are seeded.

Statistics, read from (ids, mask) alone: string length, example length (tokens before the padding), answer length,
the first answer token's position, the key's first occurrence in the string (lookup tasks), whether the string
repeats an n-gram (duplicate task), letter frequencies. Tolerance as in zoology_mqar.py: TV(ssmbench, theirs) <=
2 x TV(ssmbench, ssmbench with another seed) + 0.005 and two-sample chi-square p >= 0.001. Oracle: ssmbench's task
oracle reads each of their rows' question and must give exactly their labels (the ids under their mask). A control
(ssmbench with strings one letter longer) must come out DIFFERS. Speed: samples per second, one thread each.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import importlib.util  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _compare, beside this file (scripts run with PYTHONSAFEPATH)
import _compare  # noqa: E402

DEFAULT_MIRROR = "/work/.mirror/sjelassi+transformers_ssm_copy/repo"
SOURCE = "synthetic_exps/data_utils.py"
TASKS = {"string_copy": "copy", "prefix_ngram": "prefix_ngram", "suffix_ngram": "suffix_ngram",
         "duplicate_ngram": "duplicate_ngram"}
SETTINGS = [  # (task, config fields): the training range, a test length, a short answer, a small alphabet
    ("string_copy", {"min_length": 5, "max_length": 20}), ("string_copy", {"min_length": 50, "max_length": 50}),
    ("string_copy", {"length_answer": 5, "pad_to": 43}),  # their context must exceed 2 x max_length
    ("prefix_ngram", {}), ("prefix_ngram", {"length_answer": 4, "min_length": 10, "max_length": 40, "pad_to": 84}),
    ("prefix_ngram", {"vocab_size": 4, "n_gram": 2}),
    ("suffix_ngram", {}), ("suffix_ngram", {"min_length": 40, "max_length": 40}),
    ("duplicate_ngram", {}), ("duplicate_ngram", {"min_length": 30, "max_length": 30}),
]


def load_theirs(source: Path, into: Path) -> tuple[Any, str]:
    bare = not (source / ".git").exists() and (source / "HEAD").exists()
    git = ["git", f"--git-dir={source}"] if bare else ["git", "-C", str(source)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (into / "data_utils.py").write_bytes(subprocess.run([*git, "show", f"HEAD:{SOURCE}"], check=True,
                                                        capture_output=True).stdout)
    spec = importlib.util.spec_from_file_location("jelassi_data_utils", into / "data_utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, commit


def their_rows(module: Any, task: str, config: Any, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, answer mask), both (n, L), from their EvalCopyDataset with the context length set to L."""
    np.random.seed(seed)
    random.seed(seed)
    args = argparse.Namespace(vocab_size=config.vocab_size)
    tokenizer, to_token, _ = module.get_tokenizer(args)
    data = module.EvalCopyDataset(tokenizer, to_token, vocab_size=config.vocab_size,
                                  n_gram=getattr(config, "n_gram", 0), length_answer=config.length_answer,
                                  eval_task=TASKS[task], sequence_length=config.L, min_length=config.min_length,
                                  max_length=config.max_length, num_examples=1, batch_size=n)
    batch = data[0]
    return batch["input_ids"].numpy(), batch["mask"].numpy().astype(bool)


def our_rows(task: str, config: Any, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from ssmbench.registry import get_task
    from ssmbench.seeding import keys_for

    t = get_task(task)
    out = t.generate(config, keys_for(t.name, t.version, config.to_dict(), seed, "train", 0, n))
    mask = np.zeros(out["targets"].shape, bool)
    mask[:, 1:] = out["targets"][:, :-1] != -100  # the token each label names
    return out["inputs"].astype(np.int64), mask


def statistics(task: str, config: Any, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    V, L = config.vocab_size, config.L
    seps = [np.flatnonzero(row == V + 1) for row in ids]
    string = []
    for row, s in zip(ids, seps, strict=True):
        start, stop = (s[0] + 1, s[1]) if task == "prefix_ngram" else (1, s[0])
        string.append(row[start:stop])
    lengths = np.array([len(s) for s in string])
    out = {
        "string length": np.bincount(lengths, minlength=config.max_length + 1),
        "example length": np.bincount((ids != V + 3).sum(axis=1), minlength=L + 1),
        "answer length": np.bincount(mask.sum(axis=1), minlength=L + 1),
        "first answer position": np.bincount(mask.argmax(axis=1), minlength=L),
        "letter ids": np.bincount(np.concatenate(string), minlength=V),
    }
    if task in ("prefix_ngram", "suffix_ngram"):
        k = config.n_gram
        keys = [row[1:1 + k] if task == "prefix_ngram" else row[s[0] + 1: s[0] + 1 + k]
                for row, s in zip(ids, seps, strict=True)]
        first = [next(p for p in range(len(s) - k + 1) if (s[p:p + k] == g).all())
                 for s, g in zip(string, keys, strict=True)]
        out["key position"] = np.bincount(first, minlength=config.max_length)
    if task == "duplicate_ngram":
        k = config.n_gram
        repeats = [len({tuple(s[i:i + k]) for i in range(len(s) - k + 1)}) < len(s) - k + 1 for s in string]
        out["repeats an n-gram"] = np.bincount(np.array(repeats, np.int64), minlength=2)
    return out


def oracle_agrees(task: str, config: Any, ids: np.ndarray, mask: np.ndarray) -> tuple[int, int]:
    """(rows whose labels ssmbench's oracle reproduces exactly, rows)."""
    from ssmbench.registry import get_task

    t, good = get_task(task), 0
    for row, m in zip(ids, mask, strict=True):
        want = np.full(row.shape, -100)
        want[:-1][m[1:]] = row[1:][m[1:]]
        got = t.oracle(config, {"inputs": row.astype(np.uint8)})["targets"]
        good += bool(np.array_equal(got, want))
    return good, len(ids)


def run(source: Path, n: int) -> list[str]:
    import torch

    from ssmbench.registry import get_task

    torch.set_num_threads(1)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="jelassi-") as tmp:
        module, commit = load_theirs(source, Path(tmp))
        lines += [f"authors' generator: sjelassi/transformers_ssm_copy@{commit} ({SOURCE}, unchanged: "
                  "EvalCopyDataset, sample_str)",
                  f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
                  f"{platform.python_version()}, NumPy {np.__version__}, torch {torch.__version__}; one thread each",
                  f"n = {n} rows per side and setting",
                  "tolerance: TV(ssmbench, theirs) <= 2 x TV(ssmbench, ssmbench seed 1) + 0.005, and two-sample "
                  "chi-square p >= 0.001", ""]
        failures = total = 0
        our_rows("string_copy", get_task("string_copy").Config(), 4, 0)  # compile before timing
        for task, fields in SETTINGS:
            config = get_task(task).Config(**fields)
            start = time.perf_counter()
            theirs = their_rows(module, task, config, n, seed=123)
            their_time = time.perf_counter() - start
            our_rows(task, config, 4, 9)
            start = time.perf_counter()
            ours = our_rows(task, config, n, seed=0)
            our_time = time.perf_counter() - start
            again = our_rows(task, config, n, seed=1)
            s_theirs, s_ours, s_again = (statistics(task, config, *side) for side in (theirs, ours, again))
            good_theirs, good_ours = oracle_agrees(task, config, *theirs)[0], oracle_agrees(task, config, *ours)[0]
            shown = {k: v for k, v in config.to_dict().items() if k in fields or k == "n_gram"}
            lines.append(f"== {task} {shown} (L = {config.L}): theirs {n / their_time:,.0f} rows/s, ssmbench "
                         f"{n / our_time:,.0f} rows/s (x{their_time / our_time:,.1f}); oracle reproduces "
                         f"{good_theirs}/{n} of their rows, {good_ours}/{n} of ours")
            failures += good_theirs != n or good_ours != n
            rows, off = _compare.table(s_ours, s_theirs, s_again, "th")
            lines += rows
            failures += off
            total += len(s_ours)
            lines.append("")
        lines.append(f"statistics outside the tolerance, or rows the oracle did not solve: {failures} "
                     f"({total} statistics, {len(SETTINGS)} settings)")
        lines += ["", *control(module, n)]
    return lines


def control(module: Any, n: int) -> list[str]:
    """The test's power: ssmbench with strings of 5-21 letters against theirs at 5-20 must differ."""
    from ssmbench.registry import get_task

    config = get_task("string_copy").Config(min_length=5, max_length=20)
    longer = dataclasses.replace(config, max_length=21)
    theirs = statistics("string_copy", longer, *their_rows(module, "string_copy", config, n, seed=123))
    ours = statistics("string_copy", longer, *our_rows("string_copy", longer, n, seed=0))
    same = statistics("string_copy", longer, *our_rows("string_copy", longer, n, seed=1))
    return _compare.control("ssmbench string_copy with 5-21 letters against theirs with 5-20", ours, theirs, same,
                            ("string length", "answer length"))


def main(argv: list[str] | None = None) -> int:
    def repo(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--repo", type=Path, default=Path(DEFAULT_MIRROR), help="git directory or checkout")

    return _compare.main(__doc__, lambda args: run(args.repo, args.n), 5000, repo, argv)


if __name__ == "__main__":
    sys.exit(main())
