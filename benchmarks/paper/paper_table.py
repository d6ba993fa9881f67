"""The paper-protocol Table 1 page section, made from the committed runs under benchmarks/results/paper/.

Every cell of the grid (`benchmarks/paper/paper_grid.py`, in its priority order) and every Table-1 cell of the
one-layer DLR and ATTENTION columns at L = 4096 gets a row: the paper's value, ssmbench's test R² (the paper's
per-batch average, mean ± std over the seeds run, n), the exact R², steps done of the protocol, device, commit and
the preset reading (learning rate, task variant). Cells without a finished run say "not run".

    python benchmarks/paper/paper_table.py            # print the Markdown
    python benchmarks/paper/paper_table.py --write    # replace the marked section of docs/results.md
    python benchmarks/paper/paper_table.py --plot docs/img/paper_table1_curves.png   # the finished runs' validation curves
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from benchmarks.common import REPO  # noqa: E402
from benchmarks.paper import paper_grid  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "paper"
PAGE = REPO / "docs" / "results.md"
START, END = "<!-- paper-table:start -->", "<!-- paper-table:end -->"

# The DLR paper's Table 1 (average validation R² across batches), L = 2^12, one layer.
PAPER_TABLE1 = {
    "dlr": {"shift": 1, "cumsum": 1, "cummax": .52, "select_fixed": .97, "solve_fixed": 1, "reverse": .01,
            "solve": 0, "select": 0, "sort": 0, "context_shift": 0, "mips": 0},
    "attention": {"shift": .72, "cumsum": 1, "cummax": 1, "select_fixed": .72, "solve_fixed": 0, "reverse": .03,
                  "solve": 0, "select": .17, "sort": 0, "context_shift": 0, "mips": .90},
}


def _finished(results: Path) -> dict[str, dict]:
    """cell name -> {config, metrics, device, commit} for every committed finished run."""
    out = {}
    for folder in sorted(results.glob("*/")):
        if not (folder / "metrics.json").is_file():
            continue
        notes = dict(line[2:].split(": ", 1) for line in (folder / "command.txt").read_text().splitlines()
                     if line.startswith("# ") and ": " in line)
        out[folder.name] = {"config": json.loads((folder / "config.json").read_text()),
                            "metrics": json.loads((folder / "metrics.json").read_text()),
                            "device": notes.get("device", "?"), "commit": notes.get("commit", "?")[:7]}
    return out


def _reading(config: dict) -> str:
    variant = {k: v for k, v in config["task_config"].items() if k in ("values", "order")}
    parts = [f"LR {config['train']['lr']:g}"] + [f"{k}={v}" for k, v in variant.items()]
    return ", ".join(parts) if variant else parts[0] + " (default data)"


def _stat(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def table(results: Path = RESULTS) -> str:
    grid, runs = paper_grid, _finished(results)
    groups: dict[str, list] = {}  # a reading (cell without its seed) -> its cells, in grid order
    for cell in grid.CELLS:
        groups.setdefault(cell.name.rsplit("-s", 1)[0], []).append(cell)
    lines = ["| model | task | reading | paper | ssmbench test R² (per-batch avg) | exact R² | n | steps | device | "
             "commit |", "|---|---|---|---|---|---|---|---|---|---|"]
    for cells in groups.values():
        done = [runs[c.name] for c in cells if c.name in runs]
        first = cells[0]
        paper = PAPER_TABLE1.get(first.model, {}).get(first.task, "")
        if not done:
            reading = ", ".join(f"{k}={v}" for k, v in first.overrides.items()) or "the preset row's values"
            lines.append(f"| {first.model} | {first.task} | {reading} | {paper} | not run | | | | | |")
            continue
        batch = [r["metrics"]["test"]["r2_batchavg"] for r in done]
        exact = [r["metrics"]["test"]["r2"] for r in done]
        seeds = ",".join(str(r["metrics"]["seeds"]["train"]) for r in done)
        steps = {f"{r['metrics']['steps']:,}/{r['config']['train']['steps']:,}" for r in done}
        lines.append(f"| {first.model} | {first.task} | {_reading(done[0]['config'])} | {paper} | {_stat(batch)} | "
                     f"{_stat(exact)} | {len(done)} (seed {seeds}) | {', '.join(sorted(steps))} | "
                     f"{', '.join(sorted({r['device'] for r in done}))} | "
                     f"{', '.join(sorted({r['commit'] for r in done}))} |")
    return "\n".join(lines) + "\n"


def curves(results: Path = RESULTS) -> dict[tuple[str, str], dict[str, list[tuple[int, float]]]]:
    """(model, task) -> {label: [(step, exact validation R²), ...]} of every committed finished run, from its
    metrics.jsonl; the label is the run's reading and seed."""
    out: dict[tuple[str, str], dict[str, list[tuple[int, float]]]] = {}
    for name, run in _finished(results).items():
        config = run["config"]
        rows = [json.loads(line) for line in (results / name / "metrics.jsonl").read_text().splitlines() if line]
        label = f"{_reading(config)}, seed {run['metrics']['seeds']['train']}"
        out.setdefault((config["model"], config["task"]), {})[label] = [
            (r["step"], r["r2"]) for r in rows if r.get("split") == "val"]
    return out


STYLES = (("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."))  # markers and dashes: overlapping curves stay visible


def plot(out: Path, results: Path = RESULTS) -> Path:
    """One panel per (model, task) with a finished run: validation R² (exact) against the step, one line per run,
    Table 1's value dashed."""
    from matplotlib.figure import Figure

    from ssmbench.harness.results.plots import save_png

    panels = curves(results)
    if not panels:
        raise SystemExit(f"no finished run under {results}: nothing to plot")
    fig = Figure(figsize=(5.2 * len(panels), 3.6), dpi=110)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, ((model, task), lines) in zip(axes, sorted(panels.items()), strict=True):
        for (label, points), (marker, dash) in zip(sorted(lines.items()), itertools.cycle(STYLES)):
            ax.plot([s / 1000 for s, _ in points], [r2 for _, r2 in points], marker=marker, ls=dash, ms=4, lw=1.3,
                    label=label, alpha=0.85)
        ax.axhline(PAPER_TABLE1[model][task], ls="--", color="grey", lw=1, label="Table 1")
        ax.set(title=f"{model.upper()} {task.upper()}, paper protocol", xlabel="step (thousands)",
               ylabel="validation R² (exact)")
        ax.legend(fontsize=7)
    return save_png(fig, out)


def write(page: Path = PAGE, results: Path = RESULTS) -> None:
    text = page.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{page} has no {START} ... {END} section")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    page.write_text(head + START + "\n" + table(results) + END + tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help=f"replace the marked section of {PAGE.name}")
    what.add_argument("--plot", type=Path, metavar="PNG", help="draw the finished runs' validation curves")
    args = parser.parse_args()
    if args.plot:
        print(plot(args.plot))
    elif args.write:
        write()
    else:
        print(table(), end="")


if __name__ == "__main__":
    main()
