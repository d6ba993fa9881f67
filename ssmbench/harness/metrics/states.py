"""Metric states of the training harness: exact dataset-level metrics and the paper's per-batch variants.

Every state accumulates float64 / int64 sufficient statistics (on the device of the inputs, or the CPU). Summing
the tensors of `state_tensors()` elementwise across ranks (`all_reduce_metrics`) gives the state of the union of the
ranks' samples, so exact metrics do not depend on how the split was sharded or batched.

The paper's per-batch-averaged variants ("..._batchavg") are computed on *virtual batches* of `metric_batch_size`
consecutive sample indices (0 .. m-1, m .. 2m-1, ...), not on the real evaluation batches: statistics are kept per
virtual batch, indexed by `sample_index // metric_batch_size`, and the per-batch formula is applied in `compute()`.
The incomplete last virtual batch is dropped, as the reference dropped its incomplete batch; a virtual batch is
used only when all of its samples were seen (after the reduction: exactly once, else `compute` raises). So these
values do not depend on the device count nor on the real evaluation batch size.

Example (two samples, one output position, one channel; hand-computed):
    >>> import torch
    >>> m = RegressionMetrics(d_output=1, metric_batch_size=1, num_samples=2)
    >>> m.update(torch.tensor([[[1.0]], [[2.0]]]), torch.tensor([[[0.0]], [[2.0]]]), torch.tensor([0, 1]))
    >>> r = m.compute()  # MSE = (1 + 0) / 2, VAR = (0 + 4) / 2 - 1 = 1 -> R2 = 0.5
    >>> r["mse"], r["r2"], r["n"]
    (0.5, 0.5, 2)
    >>> round(r["r2_batchavg"], 6), r["n_batches_batchavg"]  # batch 0: 1 - 1 / 1e-5; batch 1: 1 - 0 / 1e-5
    (-49999.0, 2)
    >>> c = ClassificationMetrics(3, metric_batch_size=2, num_samples=2, kind="segmentation")
    >>> c.update(torch.tensor([[0, 1, 1], [2, 2, 0]]), torch.tensor([[0, 1, 2], [2, -100, 0]]), torch.tensor([0, 1]))
    >>> r = c.compute()
    >>> r["confusion"], r["accuracy"], r["macro_accuracy"]  # recall: 2/2, 1/1, 1/2
    ([[2, 0, 0], [0, 1, 0], [0, 1, 1]], 0.8, 0.8333333333333334)
    >>> round(r["macro_f1"], 4)  # F1: 1, 2/3, 2/3
    0.7778
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from .losses import class_weighted_cross_entropy, masked_cross_entropy

__all__ = ["RegressionMetrics", "ClassificationMetrics", "all_reduce_metrics", "class_weighted_cross_entropy",
           "masked_cross_entropy"]

BATCH_VAR_FLOOR = 1e-5
"""Floor of the per-batch target variance in the paper's R²_b."""
BATCH_COUNT_FLOOR = 1e-4
"""Floor of the per-batch count of labelled positions in the paper's acc_b."""
DENSE_CONFUSION_MAX = 256
"""Up to this many classes the classification state keeps a confusion matrix per virtual batch (reported as
`confusion`); above it (vocabulary-sized outputs such as MQAR's 8,192 ids, where the matrices would take 0.5 GB
each) it keeps per-class true-positive, truth and prediction counts, which give every other metric."""
VAR_REL_TOL = 1e-10
"""VAR <= VAR_REL_TOL * mean(y²) counts as a constant target (up to float64 rounding of the sums): exact R² is then
scikit-learn's value (`r2_score`, force_finite): 1.0 for a perfect prediction, else 0.0."""


class _VirtualBatchState:
    """Per-virtual-batch bookkeeping shared by the states: sample counts, index checks, the complete batches."""

    def __init__(self, metric_batch_size: int, num_samples: int) -> None:
        if metric_batch_size < 1 or num_samples < 0:
            raise ValueError(f"need metric_batch_size >= 1 and num_samples >= 0, got {metric_batch_size}, "
                             f"{num_samples}")
        self.metric_batch_size, self.num_samples = int(metric_batch_size), int(num_samples)
        self.n_full = self.num_samples // self.metric_batch_size
        self.n_slots = -(-self.num_samples // self.metric_batch_size)  # the incomplete last batch has a slot too
        self._samples = torch.zeros(self.n_slots, dtype=torch.int64)  # (K,) samples seen per virtual batch

    _names: tuple[str, ...] = ("_samples",)

    def _slots(self, sample_index: Tensor, batch: int) -> Tensor:
        """(B,) global sample indices -> (B,) virtual batch ids, after moving the state to their device."""
        if sample_index.shape != (batch,):
            raise ValueError(f"sample_index must have shape ({batch},), got {tuple(sample_index.shape)}")
        if batch and bool(((sample_index < 0) | (sample_index >= self.num_samples)).any()):
            raise ValueError(f"sample_index outside [0, {self.num_samples}) of this split")
        if self._samples.device != sample_index.device:
            for name in self._names:
                setattr(self, name, getattr(self, name).to(sample_index.device))
        slots = sample_index.long() // self.metric_batch_size
        self._samples.index_add_(0, slots, torch.ones_like(slots))
        return slots

    def _complete(self) -> Tensor:
        """(n_full,) bool: full virtual batches whose samples were all seen; raises on samples seen twice."""
        seen = self._samples.cpu()
        capacity = torch.full((self.n_slots,), self.metric_batch_size, dtype=torch.int64)
        if self.n_slots > self.n_full:
            capacity[-1] = self.num_samples - self.n_full * self.metric_batch_size
        if bool((seen > capacity).any()):
            raise ValueError("some samples were counted more than once (an evaluation that pads or repeats "
                             "samples); evaluate every sample of the split exactly once")
        return seen[: self.n_full] == self.metric_batch_size

    def state_tensors(self) -> list[Tensor]:
        """The summable state (float64 / int64): all_reduce SUM across ranks, then `load_state_tensors`."""
        return [getattr(self, name) for name in self._names]

    def load_state_tensors(self, tensors: list[Tensor]) -> None:
        """Replace the state by `tensors` (same shapes and dtypes as `state_tensors()`, e.g. after a reduction)."""
        if len(tensors) != len(self._names):
            raise ValueError(f"expected {len(self._names)} state tensors, got {len(tensors)}")
        for name, t in zip(self._names, tensors, strict=True):
            mine = getattr(self, name)
            if t.shape != mine.shape or t.dtype != mine.dtype:
                raise ValueError(f"state tensor {name}: expected {tuple(mine.shape)} {mine.dtype}, "
                                 f"got {tuple(t.shape)} {t.dtype}")
            setattr(self, name, t.detach().to(mine.device).clone())

    def _summary(self) -> dict[str, int]:
        return {"n_samples": int(self._samples.sum())}


class RegressionMetrics(_VirtualBatchState):
    """Exact R² / MSE (all target entries of the split flattened), per-channel R², and the paper's per-batch R².

    compute() keys: `r2` (a constant target: 1.0 if exact, else 0.0, as scikit-learn), `mse`, `r2_per_channel` (list, exact R² of each output channel), `n`
    (target entries), `n_samples`, `r2_batchavg` (mean over complete virtual batches of
    1 - mse_b / max(var_b, 1e-5); NaN if there is none) and `n_batches_batchavg`.
    """

    _names = ("_samples", "_rows", "_channel", "_batch")

    def __init__(self, d_output: int, metric_batch_size: int, num_samples: int) -> None:
        super().__init__(metric_batch_size, num_samples)
        self.d_output = int(d_output)
        self._rows = torch.zeros(1, dtype=torch.int64)  # (1,) (sample, position) pairs seen
        self._channel = torch.zeros(self.d_output, 3, dtype=torch.float64)  # (D, 3): Σ(p-y)², Σy, Σy²
        self._batch = torch.zeros(self.n_slots, 4, dtype=torch.float64)  # (K, 4): n, Σ(p-y)², Σy, Σy²

    def update(self, pred: Tensor, target: Tensor, sample_index: Tensor) -> None:
        """pred, target: (B, l_output, d_output), any float dtype; sample_index: (B,) indices in the split."""
        if pred.shape != target.shape or pred.ndim != 3 or pred.shape[-1] != self.d_output:
            raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} must both be "
                             f"(B, l_output, {self.d_output})")
        slots = self._slots(sample_index, pred.shape[0])
        p, y = pred.detach().to(torch.float64), target.detach().to(torch.float64)  # (B, L, D)
        e2, y2 = (p - y).square(), y.square()
        self._rows += y.shape[0] * y.shape[1]
        self._channel += torch.stack([e2.sum((0, 1)), y.sum((0, 1)), y2.sum((0, 1))], dim=1)  # (D, 3)
        n = torch.full((y.shape[0],), float(y[0].numel()), dtype=torch.float64, device=y.device)
        per_sample = torch.stack([n, e2.sum((1, 2)), y.sum((1, 2)), y2.sum((1, 2))], dim=1)  # (B, 4)
        self._batch.index_add_(0, slots, per_sample)

    def compute(self) -> dict[str, float | int | list[float]]:
        rows = int(self._rows.item())
        sse, sy, syy = self._channel.cpu().sum(0).tolist()
        n = rows * self.d_output
        per_channel = [_r2(rows, *c) for c in self._channel.cpu().tolist()]
        b = self._batch.cpu()[: self.n_full][self._complete()]  # (K', 4)
        nb = b[:, 0]
        var_b = (b[:, 3] / nb - (b[:, 2] / nb).square()).clamp_min(BATCH_VAR_FLOOR)
        r2_b = 1.0 - (b[:, 1] / nb) / var_b
        return {"r2": _r2(n, sse, sy, syy), "mse": sse / n if n else math.nan, "r2_per_channel": per_channel,
                "n": n, **self._summary(),
                "r2_batchavg": float(r2_b.mean()) if len(b) else math.nan, "n_batches_batchavg": len(b)}


def _r2(n: int, sse: float, sy: float, syy: float) -> float:
    """1 - MSE / VAR from sums; NaN when there is no entry; for a constant target (VAR 0 up to rounding)
    scikit-learn's convention: 1.0 when the prediction is exact, else 0.0."""
    if n == 0:
        return math.nan
    var = syy / n - (sy / n) ** 2
    if var <= VAR_REL_TOL * (syy / n):
        return 1.0 if sse == 0 else 0.0
    return 1.0 - (sse / n) / var


class ClassificationMetrics(_VirtualBatchState):
    """Confusion-matrix metrics over labelled positions (target != ignore_index), exact and per virtual batch.

    `kind="token"` (ListOps-Subtrees, LRA ListOps) adds the paper's per-batch token accuracy
    acc_b = 1 - #(pred != y, y labelled) / max(#labelled, 1e-4); `kind="segmentation"` (Pathfinder) adds the
    per-batch macro-F1 (classes in the batch's truth ∪ predictions; a class with TP = 0 scores 0) and balanced
    accuracy (mean recall over the classes in the batch's truth); a virtual batch without labelled positions is
    left out of these two means. `breakdowns` names extra int fields (B, P) and their bucket counts, e.g.
    {"node_height": 15, "node_op": 4}: (correct, total) of the labelled positions per bucket (negative = none).

    compute() keys: `accuracy` (trace / sum), `macro_f1` (mean F1 over classes in truth ∪ predictions),
    `macro_accuracy` (mean recall over classes in truth), `f1_per_class` / `recall_per_class` (NaN where undefined),
    `confusion` (rows true, columns predicted; only up to `DENSE_CONFUSION_MAX` classes), `n` (labelled positions), `n_samples`, `n_batches_batchavg`, then
    `accuracy_batchavg` (token) or `macro_f1_batchavg` and `macro_accuracy_batchavg` (segmentation), and
    `breakdowns` ({field: {bucket: {"correct", "total", "accuracy"}}}, non-empty buckets only) when asked for.
    `chance` (the accuracy of guessing, e.g. 1/2 for parity) adds `scaled_accuracy` = (accuracy - chance) /
    (1 - chance): 0 at chance, 1 when perfect, negative below chance (Grazzi et al., ICLR 2025, Section 5).
    All ratios are NaN when nothing was counted.
    """

    def __init__(self, num_classes: int, metric_batch_size: int, num_samples: int,
                 kind: Literal["token", "segmentation"] = "token", ignore_index: int = -100,
                 breakdowns: dict[str, int] | None = None, chance: float | None = None) -> None:
        super().__init__(metric_batch_size, num_samples)
        if kind not in ("token", "segmentation"):
            raise ValueError(f"kind must be 'token' or 'segmentation', got {kind!r}")
        if chance is not None and not 0.0 <= chance < 1.0:
            raise ValueError(f"chance must be in [0, 1), got {chance!r}")
        self.chance = chance
        self.num_classes, self.kind, self.ignore_index = int(num_classes), kind, int(ignore_index)
        self.breakdowns = dict(breakdowns or {})
        c = self.num_classes
        self.dense = c <= DENSE_CONFUSION_MAX
        if self.dense:
            self._confusion = torch.zeros(self.n_slots, c, c, dtype=torch.int64)  # (K, C, C) per virtual batch
        else:
            self._counts = torch.zeros(self.n_slots, 3, c, dtype=torch.int64)  # (K, 3, C): TP, truth, predicted
        for name, size in self.breakdowns.items():
            setattr(self, f"_bd_{name}", torch.zeros(size, 2, dtype=torch.int64))  # (size, 2): correct, total
        self._names = ("_samples", "_confusion" if self.dense else "_counts",
                       *(f"_bd_{name}" for name in self.breakdowns))

    def update(self, logits_or_pred: Tensor, target: Tensor, sample_index: Tensor,
               extra: dict[str, Tensor] | None = None) -> None:
        """logits (B, P, C) float or predictions (B, P) int; target (B, P) int, or (B,) per-sample labels of a
        one-position output (P = 1); extra: (B, P) int per breakdown."""
        c = self.num_classes
        target = per_position(target, logits_or_pred.shape[:2])
        if logits_or_pred.is_floating_point():
            if logits_or_pred.shape != (*target.shape, c):
                raise ValueError(f"logits {tuple(logits_or_pred.shape)} must be (*target.shape, {c}) "
                                 f"with target {tuple(target.shape)}")
            pred = logits_or_pred.detach().argmax(-1)  # (B, P)
        else:
            pred = logits_or_pred.detach()
        if pred.shape != target.shape or target.ndim != 2:
            raise ValueError(f"predictions {tuple(pred.shape)} and target {tuple(target.shape)} must both be (B, P)")
        slots = self._slots(sample_index, target.shape[0])
        t, pred = target.detach().long(), pred.long()
        labelled = t != self.ignore_index  # (B, P)
        out_of_range = labelled & ((t < 0) | (t >= c) | (pred < 0) | (pred >= c))
        if bool(out_of_range.any()):
            raise ValueError(f"targets / predictions outside [0, {c}) (ignore_index is {self.ignore_index})")
        t, pred = torch.where(labelled, t, 0), torch.where(labelled, pred, 0)
        correct = (labelled & (t == pred)).long()  # (B, P)
        if self.dense:
            flat = (slots[:, None] * c + t) * c + pred  # (B, P) index into the (K, C, C) confusion
            self._confusion.view(-1).scatter_add_(0, flat.reshape(-1), labelled.reshape(-1).long())
        else:
            base = slots[:, None] * (3 * c)  # (B, 1) offset of each sample's virtual batch in the (K, 3, C) counts
            for row, (cls, weight) in enumerate(((t, correct), (t, labelled.long()), (pred, labelled.long()))):
                self._counts.view(-1).scatter_add_(0, (base + row * c + cls).reshape(-1), weight.reshape(-1))
        for name, size in self.breakdowns.items():
            if extra is None or name not in extra:
                raise ValueError(f"breakdown field {name!r} missing from `extra`")
            v = extra[name].to(t.device).long()  # (B, P)
            if v.shape != t.shape or bool((labelled & (v >= size)).any()):
                raise ValueError(f"breakdown field {name!r} must be (B, P) with values < {size}")
            use = labelled & (v >= 0)
            v = torch.where(use, v, 0).reshape(-1)
            table = getattr(self, f"_bd_{name}")
            table[:, 0].index_add_(0, v, (correct * use).reshape(-1))
            table[:, 1].index_add_(0, v, use.long().reshape(-1))

    def compute(self) -> dict:
        if self.dense:
            conf = self._confusion.cpu()  # (K, C, C)
            counts = torch.stack([conf.diagonal(dim1=1, dim2=2), conf.sum(2), conf.sum(1)], dim=1)  # (K, 3, C)
        else:
            counts = self._counts.cpu()
        tp, truth, predicted = counts.sum(0)  # (C,) each
        f1 = 2 * tp / (truth + predicted).to(torch.float64)  # NaN where the class is in neither
        recall = tp / truth.to(torch.float64)  # NaN where the class is absent from truth
        n = int(truth.sum())
        out: dict = {"accuracy": int(tp.sum()) / n if n else math.nan,
                     "macro_f1": _nanmean(f1), "macro_accuracy": _nanmean(recall),
                     "f1_per_class": f1.tolist(), "recall_per_class": recall.tolist(),
                     **({"confusion": conf.sum(0).tolist()} if self.dense else {}), "n": n, **self._summary()}
        if self.chance is not None:
            out["scaled_accuracy"] = (out["accuracy"] - self.chance) / (1.0 - self.chance)
        b = counts[: self.n_full][self._complete()].to(torch.float64)  # (K', 3, C) complete virtual batches
        tp_b, truth_b, pred_b = b.unbind(1)  # (K', C) each
        if self.kind == "token":
            n_b = truth_b.sum(1)
            acc_b = 1.0 - (n_b - tp_b.sum(1)) / n_b.clamp_min(BATCH_COUNT_FLOOR)
            out.update(accuracy_batchavg=float(acc_b.mean()) if len(b) else math.nan, n_batches_batchavg=len(b))
        else:
            has = truth_b.sum(1) > 0  # batches with labelled positions
            f1_b = _nanmean(2 * tp_b[has] / (truth_b[has] + pred_b[has]), dim=1)
            rec_b = _nanmean(tp_b[has] / truth_b[has], dim=1)
            out.update(macro_f1_batchavg=_nanmean(f1_b), macro_accuracy_batchavg=_nanmean(rec_b),
                       n_batches_batchavg=int(has.sum()))
        if self.breakdowns:
            out["breakdowns"] = {name: _table(getattr(self, f"_bd_{name}").cpu()) for name in self.breakdowns}
        return out


def _nanmean(x: Tensor, dim: int | None = None):
    """Mean of the non-NaN entries (a float, or a tensor along `dim`); NaN when there are none."""
    if dim is not None:
        return x.nansum(dim) / (~x.isnan()).sum(dim)
    keep = x[~x.isnan()]
    return float(keep.mean()) if keep.numel() else math.nan


def _table(counts: Tensor) -> dict[str, dict[str, float | int]]:
    """(size, 2) correct/total counts -> {bucket: {correct, total, accuracy}} for the non-empty buckets."""
    return {str(k): {"correct": int(c), "total": int(t), "accuracy": int(c) / int(t)}
            for k, (c, t) in enumerate(counts.tolist()) if t > 0}


def all_reduce_metrics(metrics: _VirtualBatchState) -> None:
    """Sum a metric state across the ranks of the initialised process group (no-op otherwise), in place.

    The state tensors are packed into one flat buffer per dtype (two collectives); on nccl the buffers travel
    through the current CUDA device and come back to the state's device.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    from ..runtime.distributed import sum_across_ranks

    tensors = metrics.state_tensors()
    reduced: list[Tensor | None] = [None] * len(tensors)
    for dtype in sorted({t.dtype for t in tensors}, key=str):
        members = [i for i, t in enumerate(tensors) if t.dtype == dtype]
        flat = sum_across_ranks(torch.cat([tensors[i].reshape(-1) for i in members]))
        for i, part in zip(members, flat.split([tensors[i].numel() for i in members]), strict=True):
            reduced[i] = part.view(tensors[i].shape)
    metrics.load_state_tensors(reduced)  # type: ignore[arg-type]


def per_position(target: Tensor, leading: tuple[int, ...] | torch.Size) -> Tensor:
    """(B,) per-sample class labels as (B, 1) when the output has one position (a sequence-classification task);
    any other target unchanged."""
    if target.ndim == 1 and tuple(leading) == (target.shape[0], 1):
        return target.reshape(-1, 1)
    return target
