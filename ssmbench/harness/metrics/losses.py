"""Training losses of the classification tasks (the atomic tasks train on plain MSE, see `objectives.mse_loss`).

* `masked_cross_entropy` (ListOps-Subtrees, LRA ListOps): cross-entropy averaged over the labelled positions of
  the batch (target != ignore_index).
* `class_weighted_cross_entropy` (Pathfinder-Segmentation): each class present among the batch's labelled targets
  gets weight 1 / (its pixel count), absent classes 0, so the loss is the mean over the present classes of each
  class's mean negative log-likelihood. The weights come from the batch given (in a multi-device run: the device's
  local batch, as the reference computed them).

Both compute in float32 (logits of any float dtype are upcast), never synchronise with the device, and return 0
(with a gradient path) for a batch without any labelled position.

Example (hand-computed: two positions of class 0 with NLL log 2, one of class 1 with NLL log 4, one ignored):
    >>> import math, torch
    >>> logits = torch.log(torch.tensor([[[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.75, 0.25, 0.0], [1.0, 0.0, 0.0]]]))
    >>> target = torch.tensor([[0, 1, 1, -100]])
    >>> round(masked_cross_entropy(logits, target).item(), 6) == round((math.log(2) * 2 + math.log(4)) / 3, 6)
    True
    >>> target = torch.tensor([[0, 0, 1, -100]])
    >>> logits = torch.log(torch.tensor([[[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.75, 0.25, 0.0], [1.0, 0.0, 0.0]]]))
    >>> round(class_weighted_cross_entropy(logits, target).item(), 6) == round((math.log(2) + math.log(4)) / 2, 6)
    True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _flat(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., C) logits and (...) int targets -> (N, C) float32 and (N,) int64. Per-sample labels (B,) of a
    one-position output (B, 1, C) count as (B, 1)."""
    if target.ndim == 1 and logits.ndim == 3 and logits.shape[:2] == (target.shape[0], 1):
        target = target.reshape(-1, 1)
    if logits.shape[:-1] != target.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match targets {tuple(target.shape)} "
                         "(expected logits (B, P, C) and targets (B, P))")
    return logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1).long()


def masked_cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Cross-entropy averaged over positions with target != ignore_index; logits (B, P, C), target (B, P)."""
    x, t = _flat(logits, target)  # (N, C), (N,)
    labelled = t != ignore_index
    total = F.cross_entropy(x, t, ignore_index=ignore_index, reduction="sum")
    return total / labelled.sum().clamp_min(1)


def class_weighted_cross_entropy(logits: torch.Tensor, target: torch.Tensor,
                                 ignore_index: int = -100) -> torch.Tensor:
    """Mean over the classes present in the batch of each class's mean NLL; logits (B, P, C), target (B, P).

    Equal to `F.cross_entropy(logits, target, weight=w)` with w_c = 1 / n_c for the classes present (n_c their
    labelled pixel count in this batch) and 0 for absent ones.
    """
    x, t = _flat(logits, target)  # (N, C), (N,)
    labelled = t != ignore_index
    safe_t = torch.where(labelled, t, torch.zeros_like(t))  # (N,) ignored positions point at class 0 with weight 0
    nll = F.cross_entropy(x, safe_t, reduction="none")  # (N,)
    w_pixel = labelled.to(nll.dtype)
    counts = torch.zeros(x.shape[1], dtype=nll.dtype, device=x.device).scatter_add_(0, safe_t, w_pixel)  # (C,)
    w_class = torch.where(counts > 0, 1.0 / counts.clamp_min(1.0), torch.zeros_like(counts))  # (C,)
    w = w_class[safe_t] * w_pixel  # (N,)
    return (w * nll).sum() / (counts > 0).sum().clamp_min(1)  # sum_i w_i = number of classes present
