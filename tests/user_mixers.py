"""Plug-ins a user might write, for the harness tests: a mixer class, a factory, and broken ones."""

from __future__ import annotations

import torch
from torch import nn


class CumMeanMixer(nn.Module):
    """A causal mixer: running mean over time, then a linear map."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int, scale: float = 1.0) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)
        self.scale = scale

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        steps = torch.arange(1, x.shape[1] + 1, device=x.device, dtype=x.dtype)[None, :, None]  # (1, L, 1)
        return self.proj(self.scale * x.cumsum(1) / steps)  # (B, L, D)


class GlobalMeanMixer(nn.Module):
    """A non-causal mixer without a `bidirectional` argument: every position sees the mean of the whole sequence."""

    causal = False

    def __init__(self, d_model: int, *, l_max: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.proj(x + x.mean(1, keepdim=True))  # (B, L, D)


class LeakyMixer(nn.Module):
    """Declares causal = True but reads the next position: the causality check must refuse it."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.proj(x + torch.roll(x, -1, dims=1))  # position i sees i + 1


class NanAfter(nn.Module):
    """Outputs NaN once it has run `after` training forwards (to test the non-finite loss stop)."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int, after: int = 6) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)
        self.after, self.calls = after, 0

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.training:
            self.calls += 1
        y = self.proj(x)
        return y * float("nan") if self.calls > self.after else y


class NanAbove(nn.Module):
    """Outputs NaN once a weight grows past `limit` in size (a pack member with a large learning rate; vmappable)."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int, limit: float = 2.0) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)
        self.limit = limit

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        y = self.proj(x)
        return y + 0 * torch.log(self.limit - self.proj.weight.abs().max())  # log < 0: NaN, else + 0


class _WholeModel(nn.Module):
    def __init__(self, spec, width: int) -> None:
        super().__init__()
        self.l_output = spec.l_output
        self.inp = nn.Linear(spec.d_input, width)
        self.out = nn.Linear(width, spec.d_output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(x)).cumsum(1)  # (B, T, width)
        return self.out(h[:, h.shape[1] - self.l_output:])  # (B, l_output, d_output)


def build_whole(spec, width: int = 16) -> nn.Module:
    """A factory: receives the task's Spec and returns the whole model."""
    return _WholeModel(spec, width)


def build_wrong_shape(spec) -> nn.Module:
    """A factory whose model returns one output row too few."""
    model = _WholeModel(spec, 8)
    model.l_output = spec.l_output - 1
    return model


class PositionTable(nn.Module):
    """A causal mixer with one learned vector per position: its parameters depend on l_max, so a checkpoint fits
    only a model built for its training length (as SGConv's number of scales does)."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.zeros(l_max, d_model))
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.proj(x + self.table[: x.shape[1]])  # (B, L, D)
