"""Table and picture of MQAR test accuracy against model width, from the runs `benchmarks/paper/mqar_widths.sh OUT ...` made.

    python benchmarks/paper/mqar_widths.py runs/mqar_widths --png docs/img/mqar_widths.png --md benchmarks/results/x.md

Reads every finished run folder directly under OUT (config.json and metrics.json): the model, `model.d_model`, the
parameter count, the exact test accuracy and the training time. The picture is Zoology's Figure 2 axis at one
sequence length: accuracy (y) against d_model (x, log2), one line per model.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(out: Path) -> list[dict]:
    rows = []
    for run in sorted(p for p in out.iterdir() if (p / "metrics.json").exists()):
        cfg = json.loads((run / "config.json").read_text())
        m = json.loads((run / "metrics.json").read_text())
        rows.append({"model": cfg["model"].split(":")[-1], "d_model": cfg["model_overrides"]["d_model"],
                     "params": m.get("parameters"), "accuracy": m["test"]["accuracy"],
                     "minutes": (m.get("train_time_s") or 0) / 60, "run": run.name})
    return sorted(rows, key=lambda r: (r["model"], r["d_model"]))


def markdown(rows: list[dict]) -> str:
    widths = sorted({r["d_model"] for r in rows})
    models = sorted({r["model"] for r in rows}, key=lambda m: [r["model"] for r in rows].index(m))
    cell = {(r["model"], r["d_model"]): r for r in rows}
    lines = ["| model | " + " | ".join(f"d_model = {w}" for w in widths) + " |", "|---|" + "---|" * len(widths)]
    for model in models:
        parts = []
        for w in widths:
            r = cell.get((model, w))
            parts.append(f"{r['accuracy']:.3f} ({r['params'] / 1e3:.0f}K, {r['minutes']:.1f} min)" if r else "-")
        lines.append(f"| {model} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def plot(rows: list[dict], out: Path, title: str) -> None:
    from matplotlib.figure import Figure

    from ssmbench.harness.results.plots import save_png

    fig = Figure(figsize=(6.0, 3.8), dpi=110)
    ax = fig.subplots()
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        ax.plot([r["d_model"] for r in mine], [r["accuracy"] for r in mine], marker="o", ms=4, lw=1.4, label=model)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.02)
    ax.set(xlabel="model width d_model", ylabel="test accuracy", title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower center", ncol=3)  # below the lines, which sit near 1 and from 1/4 up
    save_png(fig, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the folder of runs mqar_widths.sh wrote")
    ap.add_argument("--png", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--title", default="MQAR (L = 64, 4 pairs, 64 ids), quick section")
    args = ap.parse_args(argv)
    rows = load(args.out)
    text = markdown(rows)
    print(text)
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(text + "\n")
    if args.png:
        plot(rows, args.png, args.title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
