"""Length extrapolation: score one trained checkpoint at several sequence lengths, then one table and one plot.

`ssmbench eval --checkpoint RUN/checkpoints/best.pt --lengths 256,1024,4096` scores the checkpoint at each length
(each exactly as `--checkpoint ... --length N` would, in a run folder of its own under the sweep's folder) and writes
`lengths.json`, `lengths.md` (one row per length, the trained length marked) and `lengths.png` (the headline metrics
against length, log-scaled length axis, the trained length as a dotted line): the shape of the Mamba paper's
induction-heads table (train short, test much longer).

Example (a tiny CPU run, then the sweep):
    >>> import ssmbench, tempfile                                                          # doctest: +SKIP
    >>> run = ssmbench.evaluate("dlr", "shift", "quick", overrides={"L": 64, "train.steps": 20})  # doctest: +SKIP
    >>> sweep = sweep_lengths(run.run_dir / "checkpoints" / "best.pt", [32, 64, 128])    # doctest: +SKIP
    >>> [row["L"] for row in sweep.rows]                                                 # doctest: +SKIP
    [32, 64, 128]
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .metrics.headlines import headline_keys
from .results.run_folder import default_run_dir, load_checkpoint
from .runtime.lengths import parse_lengths  # noqa: F401  (the CLI reads it from here)


@dataclass(frozen=True)
class LengthSweep:
    """What a sweep wrote: its folder, the trained length, and one row per scored length."""

    folder: Path
    trained_length: int
    split: str
    rows: list[dict[str, Any]]
    """{"L": int, "run_dir": str, <headline metric>: float, ...} in the order the lengths were given."""
    train_range: tuple[int, int] | None = None
    """The training lengths of a train-short-test-long run (`runtime.lengths`): shaded in the plot."""


def sweep_lengths(checkpoint: str | Path, lengths: Sequence[int], split: str = "test", *,
                  out: str | Path | None = None, runs_root: str | Path = "runs", device: str | None = None,
                  overrides: Mapping[str, Any] | None = None, quiet: bool = False) -> LengthSweep:
    """Score `checkpoint` at each of `lengths` on `split`; write lengths.{json,md,png} into `out`
    (default runs/<task>-<model>-lengths-<time>) and return the rows."""
    from .scoring import score_checkpoint

    ckpt = load_checkpoint(checkpoint)
    if not isinstance(ckpt, dict) or "config" not in ckpt:
        raise ConfigError("--checkpoint", f"{checkpoint} is not an ssmbench training checkpoint")
    config = json.loads(ckpt["config"]) if isinstance(ckpt["config"], str) else ckpt["config"]
    trained = config.get("task_config", {}).get("L")
    if not isinstance(trained, int):
        raise ConfigError("--lengths", f"{config.get('task')} has no sequence length L to sweep",
                          "sweep a task whose config has L (the atomic tasks, MQAR, induction heads)")
    folder = Path(out) if out else default_run_dir(runs_root, config["task"], f"{config['model']}-lengths")
    rows: list[dict[str, Any]] = []
    for length in lengths:
        try:
            result = score_checkpoint(checkpoint, split, length=length, out=folder / f"L{length}", device=device,
                                      overrides=overrides, quiet=quiet, loaded=ckpt)
        except ConfigError as exc:
            if exc.field != "--length":  # anything but "this model cannot run at that length" stops the sweep
                raise
            rows.append({"L": length, "skipped": exc.message.removeprefix("--length: ")})
            if not quiet:
                print(f"L={length}: skipped ({rows[-1]['skipped']})", file=sys.stderr, flush=True)
            continue
        scores = result.metrics[split]
        rows.append({"L": length, "run_dir": str(result.run_dir),
                     **{k: scores[k] for k in headline_keys(scores) if isinstance(scores.get(k), int | float)}})
        if not quiet:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in rows[-1].items() if k not in ("L", "run_dir"))
            print(f"L={length}: {split} {shown}", file=sys.stderr, flush=True)
    if all("skipped" in row for row in rows):
        raise ConfigError("--lengths", f"no length could be scored: {rows[0]['skipped']}",
                          f"include the trained length, L = {trained}")
    sweep = LengthSweep(folder, trained, split, rows)
    _write(sweep, config, Path(checkpoint))
    return sweep


def markdown(sweep: LengthSweep) -> str:
    """One row per length; the trained length marked.

    >>> print(markdown(LengthSweep(Path("x"), 64, "test", [{"L": 64, "run_dir": "a", "accuracy": 1.0},
    ...                                                    {"L": 256, "run_dir": "b", "accuracy": 0.5}])))
    | L | accuracy |
    |---|---|
    | 64 (trained) | 1.0000 |
    | 256 | 0.5000 |
    """
    scored = [row for row in sweep.rows if "skipped" not in row]
    keys = [k for k in scored[0] if k not in ("L", "run_dir")]
    lines = ["| L | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for row in sweep.rows:
        label = f"{row['L']} (trained)" if row["L"] == sweep.trained_length else str(row["L"])
        cells = [f"skipped: {row['skipped']}"] + [""] * (len(keys) - 1) if "skipped" in row else \
            [f"{row[k]:.4f}" for k in keys]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(sweep: LengthSweep, out: Path, title: str = "") -> Path:
    """Headline metrics (exact and per-batch) against length, log2 length axis, the trained length dotted."""
    from matplotlib.figure import Figure

    from .results.plots import save_png

    fig = Figure(figsize=(5.5, 3.6), dpi=110)
    ax = fig.subplots()
    scored = [row for row in sweep.rows if "skipped" not in row]
    lengths = [row["L"] for row in scored]
    for key in [k for k in scored[0] if k not in ("L", "run_dir", "mse")]:
        ax.plot(lengths, [row[key] for row in scored], marker="o", ms=4, lw=1.2, label=key)
    if sweep.train_range is not None and sweep.train_range[0] != sweep.train_range[1]:
        low, high = sweep.train_range
        ax.axvspan(low, high, color="grey", alpha=0.15, label=f"training lengths {low}-{high}")
    else:
        ax.axvline(sweep.trained_length, color="grey", ls=":", lw=1, label=f"trained (L={sweep.trained_length})")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="sequence length L", ylabel=f"{sweep.split} metric", title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_png(fig, out)


def _write(sweep: LengthSweep, config: Mapping[str, Any], checkpoint: Path) -> None:
    import os

    from ..data.folder.atomic import atomic_write_json

    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun every rank scores; rank 0 writes
        return
    title = f"{config['model']} on {config['task']}: {sweep.split} score against length"
    atomic_write_json(sweep.folder / "lengths.json", {
        "checkpoint": str(checkpoint), "task": config["task"], "model": config["model"], "split": sweep.split,
        "trained_length": sweep.trained_length, "rows": sweep.rows})
    table = f"# {title}\n\nCheckpoint: `{checkpoint}`\n\n{markdown(sweep)}\n"
    tmp = sweep.folder / "lengths.md.tmp"
    tmp.write_text(table)
    tmp.replace(sweep.folder / "lengths.md")
    plot(sweep, sweep.folder / "lengths.png", title)


def score_lengths(cfg: Any, run: Any, *, quiet: bool = False) -> dict[str, Any]:
    """Score the run's best checkpoint (last.pt when no validation improved) at every test length: the sweep in
    RUN/lengths/, the plot in RUN/plots/lengths.png; returns the "lengths" entry of metrics.json."""
    from .runtime.lengths import eval_lengths, mean_over_lengths, train_lengths

    checkpoint = run.best if run.best.exists() else run.last
    lengths = eval_lengths(cfg)
    sweep = sweep_lengths(checkpoint, lengths, "test", out=run.path / "lengths", device=cfg.hardware.device,
                          quiet=quiet)
    span = train_lengths(cfg)
    train_range = (span.low, span.high) if span else (int(cfg.task_config["L"]),) * 2
    scored = [row for row in sweep.rows if "skipped" not in row]
    metric = next(k for k in scored[0] if k not in ("L", "run_dir"))
    rows = [{**row, "run_dir": str(Path(row["run_dir"]).relative_to(run.path))} if "run_dir" in row else row
            for row in sweep.rows]
    plot(dataclasses.replace(sweep, train_range=train_range), run.plots / "lengths.png",
         f"{cfg.model} on {cfg.task}: test score against length")
    return {"metric": metric, "split": "test", "train_lengths": list(train_range), "test_lengths": lengths,
            "mean": mean_over_lengths(rows, metric), "rows": rows,
            "skipped": [row["L"] for row in rows if "skipped" in row]}
