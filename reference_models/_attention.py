"""Shared attention pieces: head projections with the `u + GELU(O(.))` wrapper, rotary embeddings, LaS helpers.

Private to `ssmbench.reference_models`; it imports only torch, so a model file plus this one can be copied into
another project. Shapes: B batch, H heads, L / T length, D head width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def rotary(x: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Rotary position embedding on interleaved channel pairs (2m, 2m+1), global positions offset + 0 ... L-1.

    Angles p * 10000^(-2m/D) are formed in float64 (float32 loses ~1e-2 rad at 262K positions, pitfall 13).

    Args:
        x: (..., L, D) with D even.
    """
    L, D = x.shape[-2], x.shape[-1]
    pos = torch.arange(offset, offset + L, dtype=torch.float64, device=x.device)
    freq = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64, device=x.device) / D)  # (D/2,)
    angle = pos[:, None] * freq  # (L, D/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    pairs = x.reshape(*x.shape[:-1], D // 2, 2)  # (..., L, D/2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]  # (..., L, D/2)
    out = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # (..., L, D/2, 2)
    return out.reshape(x.shape)  # (..., L, D)


class FeedForward(nn.Module):
    """Residual feed-forward sublayer x + Linear(GELU(Linear(LayerNorm(x)))) of width factor * d_model."""

    def __init__(self, d_model: int, factor: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.up = nn.Linear(d_model, factor * d_model)
        self.down = nn.Linear(factor * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class HeadProjections(nn.Module):
    """Q, K, V and O projections (Linear(H -> H) with bias) and the mixer output u + GELU(FF(O(o)))."""

    def __init__(self, d_model: int, n_heads: int, attn_ff: int = 0) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.ff = nn.Sequential(*(FeedForward(d_model, attn_ff) for _ in range(2 if attn_ff > 0 else 0)))

    def split(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """u: (B, L, H*D) -> q, k, v, each (B, H, L, D)."""
        B, L, _ = u.shape
        return tuple(p(u).reshape(B, L, self.n_heads, -1).transpose(1, 2)  # (B, H, L, D)
                     for p in (self.q, self.k, self.v))  # type: ignore[return-value]

    def merge(self, o: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """o: (B, H, L, D), u: (B, L, H*D) -> u + GELU(FF(O(o))) of shape (B, L, H*D)."""
        B, _, L, _ = o.shape
        o = o.transpose(1, 2).reshape(B, L, -1)  # (B, L, H*D)
        return u + F.gelu(self.ff(self.o(o)))


def box_filter(x: torch.Tensor, size: int, mode: str) -> torch.Tensor:
    """Mean over a window of `size` along the last dim, zero padding, always dividing by `size`.

    mode: `past` (x[j-size+1 .. j]), `future` (x[j .. j+size-1]) or `centered` (x[j-h .. j+h], size = 2h+1).
    """
    if size == 1:
        return x
    if mode == "past":
        pad = (size - 1, 0)
    elif mode == "future":
        pad = (0, size - 1)
    else:
        pad = (size // 2, size // 2)
    flat = F.pad(x.reshape(-1, 1, x.shape[-1]), pad)  # (R, 1, L + size - 1)
    return F.avg_pool1d(flat, size, stride=1).reshape(x.shape)  # (..., L)


def check_las_options(ap_mode: str, smooth_order: str, pool_size: int, bidirectional: bool) -> None:
    """Validate the LaS options shared by `las` and `las_chunk` (ValueError naming the option)."""
    if ap_mode not in ("causal", "centered"):
        raise ValueError(f"ap_mode must be 'causal' or 'centered', got {ap_mode!r}")
    if smooth_order not in ("post_softmax", "pre_softmax"):
        raise ValueError(f"smooth_order must be 'post_softmax' or 'pre_softmax', got {smooth_order!r}")
    centered = ap_mode == "centered" or bidirectional
    if pool_size < 1 or (centered and pool_size % 2 == 0):
        raise ValueError(f"pool_size must be >= 1 (odd for centred pooling), got {pool_size}")


def las_alpha(n_heads: int, bound: float, init: str) -> torch.Tensor:
    """ELD decay rates alpha_c (n_heads,): `linspace` (exp(-alpha) evenly from 1 to e^-bound) or `literal`."""
    c = torch.arange(n_heads, dtype=torch.float64)
    if n_heads == 1:
        return torch.zeros(1)
    if init == "linspace":
        return (-torch.log1p(-c * (1 - math.exp(-bound)) / (n_heads - 1))).float()
    if init == "literal":  # exp(-alpha_c) = c B / (n - 1), alpha_0 = 0
        return torch.cat([torch.zeros(1, dtype=torch.float64), -torch.log(c[1:] * bound / (n_heads - 1))]).float()
    raise ValueError(f"alpha_init must be 'linspace' or 'literal', got {init!r}")


def eld_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, alpha: torch.Tensor, q_pos: torch.Tensor,
                  k_pos: torch.Tensor, *, causal: bool, key_valid: torch.Tensor | None = None,
                  pre_pool: tuple[int, str] | None = None) -> torch.Tensor:
    """softmax(exp(-alpha |i - j|) * q k^T) v with a causal mask (LaS paper Eq. 3, pooling done by the caller).

    Args:
        q: (B, H, ..., Tq, D), already scaled. k, v: (B, H, ..., Tk, D). alpha: (H,) ELD rates.
        q_pos, k_pos: (Tq,), (Tk,) positions in one frame (distance = q_pos - k_pos).
        causal: mask keys after the query. key_valid: bool, broadcastable to (B, H, ..., Tq, Tk).
        pre_pool: (P, mode) to pool the ELD-scaled logits along the keys before the softmax (masked entries
            are 0 while pooling and masked again after).

    Returns:
        (B, H, ..., Tq, D).
    """
    scores = q @ k.transpose(-1, -2)  # (B, H, ..., Tq, Tk)
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32))  # softmax in float32 at least
    dist = (q_pos[:, None] - k_pos[None, :]).to(scores.dtype)  # (Tq, Tk)
    a = alpha.to(scores.dtype).reshape(-1, *([1] * (q.dim() - 2)))  # (H, 1.., 1, 1)
    scores = scores * torch.exp(-a * (dist.clamp(min=0) if causal else dist.abs()))  # (B, H, ..., Tq, Tk)
    allowed = dist >= 0 if causal else torch.ones_like(dist, dtype=torch.bool)  # (Tq, Tk)
    if key_valid is not None:
        allowed = (allowed & key_valid) | (dist == 0)  # a padded query keeps itself: no empty rows
    if pre_pool is not None:
        scores = box_filter(scores.masked_fill(~allowed, 0.0), *pre_pool)
    probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return probs.to(v.dtype) @ v  # (B, H, ..., Tq, D)
