"""Copy what a results page cites from finished run folders into benchmarks/results/: configs and metrics.

    python benchmarks/paper/collect_runs.py runs/quick_recall benchmarks/results/quick_recall_cpu

For every run folder under SRC (a folder with config.json and metrics.json, at any depth) the copy under DEST keeps
the same relative path and holds config.json, metrics.json (without confusion matrices and per-class lists longer
than --max-classes entries, which are most of the bytes for a 256-class task), metrics.jsonl trimmed to its
validation and test lines, and a length sweep's lengths.md, lengths.json and lengths.png. Checkpoints stay behind.
Each suite folder (suite.json) also gets compare.txt, the `ssmbench compare` table of its runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def trim_metrics(metrics: dict, max_classes: int) -> dict:
    """metrics.json without per-class arrays longer than max_classes (per split)."""
    out = dict(metrics)
    for split in ("val", "test", "train"):
        scores = out.get(split)
        if isinstance(scores, dict):
            out[split] = {k: v for k, v in scores.items() if not (isinstance(v, list) and len(v) > max_classes)}
    return out


def collect(src: Path, dest: Path, max_classes: int = 32) -> list[Path]:
    """Copy every finished run under src into dest; returns the run folders copied."""
    from ssmbench.harness.results.compare import build_table, load_runs, render_text

    copied = []
    for config in sorted(src.rglob("config.json")):
        run = config.parent
        if not (run / "metrics.json").exists():
            continue
        target = dest / run.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(config, target / "config.json")
        metrics = json.loads((run / "metrics.json").read_text())
        (target / "metrics.json").write_text(json.dumps(trim_metrics(metrics, max_classes), indent=1) + "\n")
        if (run / "metrics.jsonl").exists():
            lines = [ln for ln in (run / "metrics.jsonl").read_text().splitlines()
                     if '"split": "train"' not in ln]
            (target / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        copied.append(run)
    for sweep in sorted(src.rglob("lengths.json")):
        target = dest / sweep.parent.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for name in ("lengths.md", "lengths.json", "lengths.png"):
            if (sweep.parent / name).exists():
                shutil.copyfile(sweep.parent / name, target / name)
    for suite in sorted(src.rglob("suite.json")):
        target = dest / suite.parent.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(suite, target / "suite.json")
        runs = load_runs([suite.parent])
        if runs:
            (target / "compare.txt").write_text(render_text(build_table(runs)) + "\n")
    return copied


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--max-classes", type=int, default=32)
    args = ap.parse_args(argv)
    copied = collect(args.src, args.dest, args.max_classes)
    print(f"{len(copied)} run(s) copied to {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
