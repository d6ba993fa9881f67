"""Learning curves of a run (training loss and validation metrics against steps), written atomically as PNG.

Example:
    >>> import tempfile, pathlib
    >>> log = [{"step": s, "split": "train", "loss": 1 / s} for s in (1, 2, 3)] + \\
    ...       [{"step": 3, "split": "val", "r2": 0.5, "mse": 0.4}]
    >>> out = learning_curves(log, pathlib.Path(tempfile.mkdtemp()) / "curves.png")
    >>> out.read_bytes()[:4] == b"\\x89PNG"
    True
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

VAL_KEYS = ("r2", "r2_batchavg", "accuracy", "macro_f1", "macro_accuracy")


def learning_curves(log: list[dict[str, Any]], out: Path, title: str = "") -> Path:
    """Left: training loss (log scale). Right: the validation metrics found in the log."""
    from matplotlib.figure import Figure

    train = [r for r in log if r.get("split") == "train" and "loss" in r]
    val = [r for r in log if r.get("split") == "val"]
    fig = Figure(figsize=(10, 3.6), dpi=110)
    ax_loss, ax_val = fig.subplots(1, 2)
    if train:
        ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], lw=1.2, color="tab:blue")
        if all(r["loss"] > 0 for r in train):
            ax_loss.set_yscale("log")
    ax_loss.set(xlabel="step", ylabel="training loss", title="train")
    for key in VAL_KEYS:
        points = [(r["step"], r[key]) for r in val if isinstance(r.get(key), int | float)]
        if points:
            ax_val.plot(*zip(*points, strict=True), marker="o", ms=3, lw=1.2, label=key)
    best = [r["step"] for r in val if r.get("best")]
    if best:
        ax_val.axvline(best[-1], color="grey", ls=":", lw=1, label=f"best (step {best[-1]})")
    ax_val.set(xlabel="step", ylabel="validation metric", title="validation")
    if ax_val.lines:
        ax_val.legend(fontsize=8, loc="lower right")
    for ax in (ax_loss, ax_val):
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    return save_png(fig, out)


def save_png(fig: Any, out: Path) -> Path:
    """Write a matplotlib Figure atomically (temporary file, then rename)."""
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp.{uuid.uuid4().hex}.png")
    fig.savefig(tmp)
    os.replace(tmp, out)
    return out
