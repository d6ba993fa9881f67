"""The state-tracking reproductions as tables, the published numbers beside ours.

Reads the folders that `benchmarks/paper/cpu/{state_tracking_parity,chomsky_regular,word_problems,flipflop}.sh`
write (OUT/<suite>/<task>-seed<S>/metrics.json, one suite a row) and prints one row a suite: the seeds, the test
accuracy at the training length, and, for train-short/test-long runs, each seed's accuracy and scaled accuracy
(0 = chance, 1 = perfect) averaged over the test lengths, summarised over seeds as the papers do (max: Delétang et
al. report the best of 10 seeds, Grazzi et al. the best of 3) and as mean ± std; the accuracy at each test length
(mean over seeds) shows where a model stops generalising. A checkpoint scored again at other task settings
(flip-flop's RUN/dense and RUN/sparse) adds a column each (accuracy, worst seed first: the paper's point is rare
errors).

Published numbers: only those read from the papers' own text, with their source, go into `PUBLISHED`. In this
session the tables of Grazzi et al. 2025 (Table 3), Delétang et al. 2023 (Table 2), Merrill et al. 2024 and Liu et
al. 2023 could not be read (the `search` tool returned only the papers' opening pages), so the column is empty.

    python benchmarks/paper/state_tracking_table.py OUT [OUT ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from ssmbench.harness.runtime.lengths import over_seeds  # noqa: E402

PUBLISHED: dict[str, tuple[float, str]] = {}
"""suite name (as the scripts name them, e.g. "parity-mamba_neg") -> (published value, its source: paper, table,
row and column). Empty: no table text could be read (module doc)."""


def seed_rows(suite: Path) -> list[dict]:
    """Per seed of one suite folder: test accuracy, the length summary and any re-scorings (RUN/<name>/)."""
    rows = []
    for run in sorted(p for p in suite.iterdir() if (p / "metrics.json").is_file() and (p / "config.json").is_file()):
        m = json.loads((run / "metrics.json").read_text())
        row: dict = {"seed": json.loads((run / "config.json").read_text()).get("seed"),
                     "test": m.get("test", {}).get("accuracy")}
        lengths = m.get("lengths")
        if lengths and lengths.get("rows"):
            per = lengths["rows"]
            row["long"] = statistics.fmean(r["accuracy"] for r in per)
            if all("scaled_accuracy" in r for r in per):
                row["long_scaled"] = statistics.fmean(r["scaled_accuracy"] for r in per)
            row["by_length"] = {r["L"]: r["accuracy"] for r in per}
        for sub in sorted(p for p in run.iterdir() if p.is_dir() and (p / "metrics.json").is_file()):
            scored = json.loads((sub / "metrics.json").read_text())
            if "scored_checkpoint" in scored:
                row.setdefault("rescored", {})[sub.name] = scored.get("test", {}).get("accuracy")
        rows.append(row)
    return rows


def _summary(values: list[float]) -> str:
    s = over_seeds(values)
    std = f" ± {s['std']:.3f}" if s["std"] is not None else ""
    return f"{s['max']:.3f} / {s['mean']:.3f}{std}"


def table(outs: list[Path]) -> str:
    """The Markdown table of every suite folder under `outs`."""
    lines = ["| suite | seeds | test acc (train length) | long: acc max / mean ± std | long: scaled max / mean ± std "
             "| acc by test length (mean over seeds) | re-scored (worst seed) | published (source) |",
             "|---|---|---|---|---|---|---|---|"]
    for out in outs:
        for suite in sorted(p for p in out.iterdir() if p.is_dir()):
            rows = seed_rows(suite)
            if not rows:
                continue
            test = [r["test"] for r in rows if r["test"] is not None]
            long = [r["long"] for r in rows if "long" in r]
            scaled = [r["long_scaled"] for r in rows if "long_scaled" in r]
            lengths = sorted({n for r in rows for n in r.get("by_length", {})})
            by_length = ", ".join(
                f"{n}: {statistics.fmean(r['by_length'][n] for r in rows if n in r.get('by_length', {})):.2f}"
                for n in lengths)
            rescored = sorted({k for r in rows for k in r.get("rescored", {})})
            resc = ", ".join(f"{k} {min(r['rescored'][k] for r in rows if k in r.get('rescored', {})):.4f}"
                             for k in rescored)
            pub = PUBLISHED.get(suite.name)
            lines.append(f"| {suite.name} | {len(rows)} | {statistics.fmean(test):.3f} | "
                         f"{_summary(long) if long else ''} | {_summary(scaled) if scaled else ''} | {by_length} | "
                         f"{resc} | {f'{pub[0]} ({pub[1]})' if pub else ''} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="+", type=Path, help="folders the reproduction scripts wrote")
    args = parser.parse_args(argv)
    print(table(args.out))


if __name__ == "__main__":
    main()
