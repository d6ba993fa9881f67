"""The headline metrics of each kind of objective: what progress lines, result lines and `compare` show first.

Example:
    >>> headline_keys({"r2": 0.9, "r2_batchavg": 0.8, "mse": 0.1})
    ('r2', 'r2_batchavg', 'mse')
    >>> headline_keys({"accuracy": 0.5, "accuracy_batchavg": 0.5})
    ('accuracy', 'accuracy_batchavg')
    >>> headline_keys({"accuracy": 0.75, "scaled_accuracy": 0.5, "accuracy_batchavg": 0.75})
    ('accuracy', 'scaled_accuracy', 'accuracy_batchavg')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SEGMENTATION = ("macro_f1", "macro_accuracy", "macro_f1_batchavg", "macro_accuracy_batchavg")
"""Pathfinder-Segmentation (Table 3): exact and per-batch macro-F1 / macro accuracy."""
TOKENS = ("accuracy", "accuracy_batchavg")
"""Token or sequence classification (ListOps): exact and per-batch accuracy."""
TOKENS_SCALED = ("accuracy", "scaled_accuracy", "accuracy_batchavg")
"""Classification whose task declares `scaled_accuracy` (the state-tracking tasks): accuracy, the accuracy scaled
so that chance is 0 and perfect 1 (Grazzi et al. 2025), per-batch accuracy."""
REGRESSION = ("r2", "r2_batchavg", "mse")
"""The atomic tasks (Tables 1, 2, 4): exact R², the paper's per-batch R², MSE."""


def headline_keys(scores: Mapping[str, Any]) -> tuple[str, ...]:
    """The headline keys of a split's scores, recognised by the keys its metric state computes."""
    if "macro_f1_batchavg" in scores:
        return SEGMENTATION
    if "scaled_accuracy" in scores:
        return TOKENS_SCALED
    if "accuracy_batchavg" in scores:
        return TOKENS
    return REGRESSION
