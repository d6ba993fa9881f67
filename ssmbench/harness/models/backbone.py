"""The harness-owned sequence model that wraps a mixer: encoder, residual blocks, norms, output projection, decoder.

    x (B, T, d_input) floats or (B, T) token ids
    -> encoder: Linear(d_input -> H) (after x = a v + b for pixels) or Embedding(vocab -> H)
    -> n_layers x block: post-norm x = Norm(x + Drop(Layer(x))) or pre-norm x = x + Drop(Layer(Norm(x)))
       with Layer(u) = OutProj(Drop(Mixer(u))), OutProj in {linear, glu, none}
    -> final Norm (pre-norm only) -> keep the rightmost l_output positions (or, pool="mean", the mean over all
       positions: one output row, the LRA / S4 / LRU sequence-classification head) -> Linear(H -> d_output)
       (pool="bottleneck", MAD compression: every output row decoded from the last position's features alone,
       `ssmbench.harness.models.bottleneck`)

See docs/models.md (The backbone). Every mixer output is checked (shape and dtype) and a mismatch raises an
`SsmbenchError` naming the model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...api import Spec
from ...errors import ConfigError, SsmbenchError
from .bottleneck import BottleneckDecoder

NORMS = ("scalar_layer", "layer", "batch", "none")
OUT_PROJS = ("linear", "glu", "none")
POOLS = ("auto", "mean", "last", "bottleneck")
"""`pool`: "last" keeps the rightmost l_output positions, "mean" averages every position (l_output == 1 only),
"bottleneck" decodes every output row from the last position's features (MAD's autoencoder readout), "auto" is
"mean" for a one-label bidirectional task (LRA Pathfinder) and "last" otherwise."""


def resolve_pool(pool: str, spec: Spec) -> str:
    """The pooling a backbone uses for `spec` ("mean", "last" or "bottleneck").

    >>> from ssmbench.registry import get_task
    >>> t = get_task("pathfinder_lra")
    >>> resolve_pool("auto", t.spec(t.presets["32"])), resolve_pool("last", t.spec(t.presets["32"]))
    ('mean', 'last')
    """
    if pool not in POOLS:
        raise ConfigError("model.pool", f"must be one of {', '.join(POOLS)}, got {pool!r}")
    if pool == "auto":
        return "mean" if spec.l_output == 1 and not spec.causal else "last"
    if pool == "mean" and (spec.l_output != 1 or spec.causal):
        raise ConfigError("model.pool", "mean pooling needs a task with one output row and no causal "
                          f"constraint (l_output = {spec.l_output}, causal = {spec.causal})", "use -o model.pool=last")
    return pool


class ScalarLayerNorm(nn.Module):
    """The reference's LayerNorm: y = (s / sigma) (x - mu + m) over channels, two scalars, biased std, no eps."""

    def __init__(self, eps: float = 0.0) -> None:
        super().__init__()
        self.m = nn.Parameter(torch.zeros(()))
        self.s = nn.Parameter(torch.ones(()))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mu = x.mean(-1, keepdim=True)  # (B, L, 1)
        sigma = torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + self.eps)  # (B, L, 1), biased
        return self.s / sigma * (x - mu + self.m)


class _ChannelBatchNorm(nn.Module):
    """BatchNorm over (batch, positions) per channel for (B, L, H) inputs; not causal in training mode."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x.transpose(1, 2)).transpose(1, 2)  # (B, L, H)


def make_norm(kind: str, d_model: int, eps: float = 0.0) -> nn.Module:
    """`scalar_layer`, `layer` (per-channel affine, eps 1e-5), `batch` or `none`."""
    if kind == "scalar_layer":
        return ScalarLayerNorm(eps)
    if kind == "layer":
        return nn.LayerNorm(d_model)
    if kind == "batch":
        return _ChannelBatchNorm(d_model)
    if kind == "none":
        return nn.Identity()
    raise ConfigError("model.norm", f"must be one of {NORMS}, got {kind!r}")


class Block(nn.Module):
    """One residual block around Layer(u) = OutProj(Dropout(Mixer(u)))."""

    def __init__(self, mixer: nn.Module, d_model: int, *, norm: str, prenorm: bool, out_proj: str,
                 dropout: float, name: str, norm_eps: float = 0.0) -> None:
        super().__init__()
        self.mixer, self.name, self.prenorm, self.out_proj_kind = mixer, name, prenorm, out_proj
        self.norm = make_norm(norm, d_model, norm_eps)
        self.drop = nn.Dropout(dropout)
        if out_proj == "linear":
            self.out_proj: nn.Module = nn.Linear(d_model, d_model)
        elif out_proj == "glu":
            self.out_proj = nn.Linear(d_model, 2 * d_model)
        elif out_proj == "none":
            self.out_proj = nn.Identity()
        else:
            raise ConfigError("model.out_proj", f"must be one of {OUT_PROJS}, got {out_proj!r}")

    def layer(self, u: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        y = self.mixer(u, mask=mask)
        check_mixer_output(y, u, self.name)
        y = self.out_proj(self.drop(y))
        return F.glu(y, dim=-1) if self.out_proj_kind == "glu" else y  # GLU([a, b]) = a * sigmoid(b)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.prenorm:
            return x + self.drop(self.layer(self.norm(x), mask))
        return self.norm(x + self.drop(self.layer(x, mask)))


def check_mixer_output(y: Any, u: torch.Tensor, name: str) -> None:
    """Raise an SsmbenchError naming the model unless y is a real tensor shaped like u (and of its dtype)."""
    if not isinstance(y, torch.Tensor):
        raise SsmbenchError(f"model {name!r}: mixer returned {type(y).__name__}, expected a tensor of shape "
                            f"{tuple(u.shape)}")
    if tuple(y.shape) != tuple(u.shape):
        raise SsmbenchError(f"model {name!r}: mixer returned shape {tuple(y.shape)} for input {tuple(u.shape)}; "
                            "a mixer maps (B, L, d_model) -> (B, L, d_model)")
    autocast = torch.is_autocast_enabled(u.device.type)
    if not y.dtype.is_floating_point or (y.dtype != u.dtype and not autocast):
        raise SsmbenchError(f"model {name!r}: mixer returned dtype {y.dtype} for input dtype {u.dtype}; "
                            "return real tensors of the input's dtype (complex arithmetic stays inside)")


def _accepted(mixer: Callable[..., nn.Module], names: list[str]) -> set[str]:
    """Which of the standard mixer arguments `mixer` takes (all of them if it accepts **kwargs)."""
    try:
        params = inspect.signature(mixer).parameters
    except (TypeError, ValueError):
        return set(names)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return set(names)
    return {n for n in names if n in params}


class SequenceModel(nn.Module):
    """Encoder, n residual blocks of a sequence mixer, optional final norm, decoder of the rightmost l_output."""

    def __init__(self, spec: Spec, mixer: Callable[..., nn.Module], *, d_model: int = 128, n_layers: int = 1,
                 norm: str = "scalar_layer", prenorm: bool = False, out_proj: str = "linear",
                 dropout: float = 0.0, bidirectional: bool = False, mixer_kwargs: Mapping[str, Any] | None = None,
                 l_max: int | None = None, norm_eps: float = 0.0, pool: str = "auto", name: str | None = None
                 ) -> None:
        """Args:
            spec: the task's shape specification. mixer: a mixer class (called once per layer as
                `mixer(d_model, l_max=..., bidirectional=..., dropout=..., layer_idx=..., **mixer_kwargs)`; the
                standard arguments its signature does not name are left out).
            d_model, n_layers, norm, prenorm, out_proj, dropout: the backbone settings (docs/models.md, The backbone).
            bidirectional: passed to the mixers. l_max: longest length (default spec.seq_len).
            norm_eps: epsilon of the scalar LayerNorm (0 in paper presets). name: model name for error messages.
            pool: "last" (keep the rightmost l_output positions), "mean" (average over positions), "bottleneck"
                (every output row decoded from the last position, `harness.bottleneck`) or "auto" (`resolve_pool`:
                mean for one-label bidirectional tasks).
        """
        super().__init__()
        if n_layers < 1:
            raise ConfigError("model.n_layers", f"must be >= 1, got {n_layers}")
        if d_model < 1:
            raise ConfigError("model.d_model", f"must be >= 1, got {d_model}")
        self.spec, self.d_model, self.prenorm = spec, d_model, prenorm
        self.name = name or getattr(mixer, "__name__", type(mixer).__name__)
        self.l_output = spec.l_output
        self.pool = resolve_pool(pool, spec)
        if spec.input_kind == "tokens":
            self.encoder: nn.Module = nn.Embedding(spec.d_input, d_model)
        else:
            self.encoder = nn.Linear(spec.d_input, d_model)
        self.input_scale = spec.input_scale if spec.input_kind != "tokens" else None
        standard = dict(l_max=l_max or spec.seq_len, bidirectional=bidirectional, dropout=dropout)
        takes = _accepted(mixer, [*standard, "layer_idx"])
        if bidirectional and "bidirectional" not in takes:
            raise ConfigError("model.bidirectional", f"model {self.name!r} takes no `bidirectional` argument")
        self.blocks = nn.ModuleList(
            Block(mixer(d_model, **{k: v for k, v in {**standard, "layer_idx": i}.items() if k in takes},
                        **(mixer_kwargs or {})),
                  d_model, norm=norm, prenorm=prenorm, out_proj=out_proj, dropout=dropout, name=self.name,
                  norm_eps=norm_eps)
            for i in range(n_layers))
        self.final_norm = make_norm(norm, d_model, norm_eps) if prenorm else nn.Identity()
        if self.pool == "bottleneck":
            self.decoder: nn.Module = BottleneckDecoder(d_model, spec.d_output)
        else:
            self.decoder = nn.Linear(d_model, spec.d_output)

    @property
    def mixers(self) -> list[nn.Module]:
        return [block.mixer for block in self.blocks]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids or (B, T[, d_input]) values -> (B, T, H)."""
        if self.spec.input_kind == "tokens":
            return self.encoder(x.long())  # (B, T, H)
        x = x.float() if not x.is_floating_point() else x
        if x.dim() == 2:
            x = x.unsqueeze(-1)  # (B, T, 1)
        if self.input_scale is not None:
            a, b = self.input_scale
            x = a * x + b
        return self.encoder(x)  # (B, T, H)

    def features(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Per-position features after the blocks and final norm: (B, T, H)."""
        h = self.encode(x)
        for block in self.blocks:
            h = block(h, mask)
        return self.final_norm(h)

    def forward_full(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Decoder applied to every position (before the crop): (B, T, d_output). Used by the causality check."""
        h = self.features(x, mask)
        return self.decoder.decode_each(h) if self.pool == "bottleneck" else self.decoder(h)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, ...) -> (B, l_output, d_output); row j belongs to input position T - l_output + j."""
        h = self.features(x, mask)
        if self.pool == "mean":
            return self.decoder(h.mean(dim=1, keepdim=True))  # (B, 1, H) -> (B, 1, d_output)
        if self.pool == "bottleneck":
            return self.decoder(h[:, -1], seq_len=h.shape[1], l_output=self.l_output)  # (B, l_output, d_output)
        return self.decoder(h[:, h.shape[1] - self.l_output:])  # crop first, then project
