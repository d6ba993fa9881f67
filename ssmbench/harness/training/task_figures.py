"""The paper's task figures, drawn into RUN/plots/ at the end of a run (rank 0, best weights, validation split).

* Figure 2 (ListOps-Subtrees): token accuracy per node height and per operator. The table goes into metrics.json
  as `figure2` ({"by_height": {h: {correct, total, accuracy}}, "by_operator": {MIN|MAX|MED|SM: ...}}), the bars
  into plots/figure2_breakdown.png.
* Figure 3 (image segmentation, i.e. Pathfinder; recognised from the task's Spec): validation images with their gold masks above the model's predicted masks,
  plots/figure3_samples.png.

Example:
    >>> figure2_table({"node_height": {"1": {"correct": 3, "total": 4, "accuracy": 0.75}},
    ...                "node_op": {"3": {"correct": 1, "total": 2, "accuracy": 0.5}}})["by_operator"]
    {'SM': {'correct': 1, 'total': 2, 'accuracy': 0.5}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ...data.make.preview import MASK_COLOURS, MASK_LEGEND
from ..results.plots import save_png

OPERATORS = ("MIN", "MAX", "MED", "SM")
"""Operator codes 0..3 of `node_op` (the frozen ListOps vocabulary)."""
FIGURE3_SAMPLES = 6


def task_figures(s: Any, run: Any, val_metrics: dict[str, Any], val: Any) -> dict[str, Any]:
    """Draw the task's figures; returns what metrics.json gains (`figure2` for ListOps-Subtrees)."""
    title = f"{s.cfg.task} / {s.cfg.model} (val, step of the best checkpoint)"
    if "breakdowns" in val_metrics:
        table = figure2_table(val_metrics["breakdowns"])
        plot_figure2(table, run.plots / "figure2_breakdown.png", title)
        return {"figure2": table}
    spec = s.spec
    if spec.input_kind == "pixels" and spec.target_kind == "classify" and spec.l_output == spec.seq_len:
        # an image segmentation task (Pathfinder): Figure 3, images above gold and predicted masks
        head = val.head(FIGURE3_SAMPLES)
        pred = predict(s, head["inputs"])
        plot_figure3(head["inputs"], head["targets"], pred, run.plots / "figure3_samples.png", title)
    return {}


def figure2_table(breakdowns: dict[str, dict[str, Any]]) -> dict[str, Any]:
    by_op = {OPERATORS[int(k)]: v for k, v in breakdowns.get("node_op", {}).items()}
    return {"split": "val", "by_height": dict(breakdowns.get("node_height", {})), "by_operator": by_op}


def predict(s: Any, inputs: torch.Tensor, chunk: int = 2) -> torch.Tensor:
    """(k, T) argmax classes of the unwrapped model on `inputs`, `chunk` samples at a time."""
    from ..runtime.precision import autocast_context

    model = s.bare
    was_training = model.training
    model.eval()
    out = []
    with torch.no_grad(), autocast_context(s.cfg.hardware.precision, s.env.device):
        for a in range(0, len(inputs), chunk):
            out.append(model(inputs[a:a + chunk].to(s.env.device)).argmax(-1).cpu())  # (c, T)
    model.train(was_training)
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.long)


def plot_figure2(table: dict[str, Any], out: Path, title: str = "") -> Path:
    """Bars of token accuracy per node height (left) and per operator (right), counts above the bars."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.6), dpi=110)
    axes = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1]})
    heights = sorted(table["by_height"], key=int)
    ops = [op for op in OPERATORS if op in table["by_operator"]]
    for ax, labels, rows, xlabel in ((axes[0], heights, table["by_height"], "node height"),
                                     (axes[1], ops, table["by_operator"], "operator")):
        acc = [rows[k]["accuracy"] for k in labels]
        bars = ax.bar(range(len(labels)), acc, color="tab:blue")
        for bar, k in zip(bars, labels, strict=True):
            ax.annotate(str(rows[k]["total"]), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(labels)), labels)
        ax.set(xlabel=xlabel, ylabel="token accuracy", ylim=(0, 1.08))
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_title("accuracy per node height (labelled positions above the bars)", fontsize=9)
    axes[1].set_title("accuracy per operator", fontsize=9)
    if title:
        fig.suptitle(title)
    return save_png(fig, out)


def plot_figure3(inputs: torch.Tensor, targets: torch.Tensor, pred: torch.Tensor, out: Path,
                 title: str = "") -> Path:
    """Columns of samples; rows: the image, the gold mask, the predicted mask. inputs (k, T, 1), masks (k, T)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    k = len(inputs)
    side = int(round(inputs.shape[1] ** 0.5))
    cmap = ListedColormap(MASK_COLOURS)
    fig = Figure(figsize=(2.0 * max(k, 1), 6.4), dpi=110)
    axes = fig.subplots(3, max(k, 1), squeeze=False)
    rows = (("image", inputs.reshape(k, side, side).float(), "gray", None),
            ("gold mask", targets.reshape(k, side, side).long(), cmap, (0, 2)),
            ("prediction", pred.reshape(k, side, side).long(), cmap, (0, 2)))
    for r, (name, images, colours, limits) in enumerate(rows):
        for c in range(max(k, 1)):
            ax = axes[r][c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c < k:
                vmin, vmax = limits or (None, None)
                ax.imshow(images[c].numpy(), cmap=colours, vmin=vmin, vmax=vmax, interpolation="nearest")
            if c == 0:
                ax.set_ylabel(name)
    fig.suptitle(f"{title}\n{MASK_LEGEND}" if title else MASK_LEGEND)
    return save_png(fig, out)
