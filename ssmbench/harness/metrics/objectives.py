"""What a task is trained and selected on: loss, metric state, selection monitor (the learning-rate schedule is a
setting of the run: `config.schedule`).

Regression (the atomic tasks): MSE loss over every target entry of the batch; exact R² / MSE from float64 sums and
the paper's per-batch R²; the checkpoint with the lowest validation MSE is kept. Token classification
(ListOps-Subtrees, LRA ListOps): cross-entropy over the labelled positions, exact token accuracy from the confusion
matrix and the paper's per-batch accuracy; the highest validation accuracy is kept. Segmentation (Pathfinder): the
per-batch class-weighted cross-entropy (`losses.class_weighted_cross_entropy`), exact and per-batch macro-F1 /
macro accuracy; the highest validation macro-F1 is kept.

"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ...errors import ConfigError


@dataclass(frozen=True)
class Objective:
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    new_metrics: Callable[[int], Any]
    """num_samples of the split -> a fresh metric state."""
    monitor: str
    """Key of `compute()` that selects the checkpoint on val."""
    mode: str
    """`min` or `max`."""
    headline: tuple[str, ...]
    """Keys shown in progress lines and `compare` tables."""

    def better(self, value: float, best: float | None) -> bool:
        if value != value:  # NaN never wins
            return False
        return best is None or (value < best if self.mode == "min" else value > best)


def mse_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over every (l_output x d_output) target entry of the batch, in float32."""
    return F.mse_loss(pred.float(), target.float())


def objective_for(spec: Any, metric_batch_size: int, monitor: str = "auto", variant: str = "exact",
                  breakdowns: dict[str, int] | None = None) -> Objective:
    """The objective of a task's Spec: regression, token classification or segmentation.

    `breakdowns` ({extra field: bucket count}) adds per-bucket counts to the classification metrics (Figure 2).
    """
    from . import headlines, losses
    from . import states as metrics

    if variant not in ("exact", "batchavg"):
        raise ConfigError("eval.monitor_variant", f"must be exact or batchavg, got {variant!r}")
    suffix = "" if variant == "exact" else "_batchavg"
    if spec.target_kind == "regress":
        key, mode = ("mse", "min") if variant == "exact" else ("r2_batchavg", "max")
        if monitor not in ("auto", key):
            key, mode = monitor, ("min" if monitor == "mse" else "max")
        return Objective(mse_loss, lambda n: metrics.RegressionMetrics(spec.d_output, metric_batch_size, n),
                         key, mode, headlines.REGRESSION)
    if spec.target_kind == "classify":
        segmentation = "macro_f1" in spec.metrics
        kind = "segmentation" if segmentation else "token"
        ignore = spec.ignore_index if spec.ignore_index is not None else -100
        loss = losses.class_weighted_cross_entropy if segmentation else losses.masked_cross_entropy
        key = ("macro_f1" if segmentation else "accuracy") + suffix
        chance = 1.0 / spec.d_output if "scaled_accuracy" in spec.metrics else None  # uniform guessing
        headline = headlines.SEGMENTATION if segmentation else \
            headlines.TOKENS if chance is None else headlines.TOKENS_SCALED
        return Objective(lambda logits, y: loss(logits, y, ignore),
                         lambda n: metrics.ClassificationMetrics(spec.d_output, metric_batch_size, n, kind, ignore,
                                                                 breakdowns, chance),
                         key if monitor == "auto" else monitor, "max", headline)
    raise ConfigError("task", f"training on {spec.target_kind!r} targets is not supported by this harness",
                      "regression and classification tasks are supported")
