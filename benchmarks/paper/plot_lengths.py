"""One picture of several length sweeps (`ssmbench eval --checkpoint ... --lengths ...`): test accuracy against
sequence length, one line per model, the training length dotted, chance dashed (the Mamba paper's Table 2 as a plot).

    python benchmarks/paper/plot_lengths.py docs/img/induction_heads_lengths.png --chance 0.0667 \\
        attention=runs/quick_recall/zoology-attention/induction_heads_lengths/lengths.json \\
        mamba=runs/quick_recall/zoology-mamba/induction_heads_lengths/lengths.json

Each sweep's lengths.json (written by the sweep) gives its rows and its trained length; the metric plotted is
`--metric` (default: accuracy, the exact test token accuracy).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("sweeps", nargs="+", help="LABEL=path/to/lengths.json[+more/lengths.json of the same model]")
    ap.add_argument("--metric", default="accuracy")
    ap.add_argument("--chance", type=float, help="draw this score as a dashed line")
    ap.add_argument("--title", default="")
    args = ap.parse_args(argv)

    from matplotlib.figure import Figure

    from ssmbench.harness.results.plots import save_png

    fig = Figure(figsize=(6.0, 3.8), dpi=110)
    ax = fig.subplots()
    trained = set()
    for item in args.sweeps:
        label, _, paths = item.partition("=")
        sweeps = [json.loads(Path(path).read_text()) for path in paths.split("+")]  # one model's sweeps, merged
        sweep = sweeps[0]
        rows = sorted((r for s in sweeps for r in s["rows"] if "skipped" not in r), key=lambda r: r["L"])
        ax.plot([r["L"] for r in rows], [r[args.metric] for r in rows], marker="o", ms=4, lw=1.4, label=label)
        trained.add(sweep["trained_length"])
    for L in sorted(trained):
        ax.axvline(L, color="grey", ls=":", lw=1, label=f"trained (L={L})")
    if args.chance is not None:
        ax.axhline(args.chance, color="black", ls="--", lw=0.8, label="chance")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.02)
    ax.set(xlabel="test sequence length L", ylabel=f"test {args.metric}", title=args.title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_png(fig, args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
