"""LaS-chunk: local-and-smooth attention computed independently inside non-overlapping chunks of 128 positions.

ELD distances, causal masks and the average pooling (a box filter on V, zero-padded at chunk edges) never cross a
chunk boundary, so chunks do not communicate inside one layer and the cost is linear in L (docs/models.md, Reference models).
Options and defaults are those of LaS; `ap_mode="centered"` leaks future tokens and sets `causal = False`.

Example:
    >>> import torch
    >>> layer = LaSChunk(16, l_max=40, chunk_size=8)
    >>> layer(torch.randn(2, 40, 16)).shape
    torch.Size([2, 40, 16])
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._attention import HeadProjections, box_filter, check_las_options, eld_attention, las_alpha, rotary


class LaSChunk(nn.Module):
    """Chunked LaS attention (chunks of 128, 8 heads, ELD decay, causal pooling): u + GELU(O(LaS_chunk(u)))."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, n_heads: int = 8, chunk_size: int = 128, pool_size: int = 5,
                 alpha_b: float = 1e-3, alpha_init: str = "linspace", ap_mode: str = "causal",
                 smooth_order: str = "post_softmax", rope: bool = False) -> None:
        """Args:
            d_model: width H. l_max: longest input length. chunk_size: c.
            bidirectional: symmetric ELD exp(-alpha |i-j|) within a chunk, no causal mask, centred pooling.
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            n_heads, pool_size, alpha_b, alpha_init, ap_mode, smooth_order, rope: as for LaS.
        """
        super().__init__()
        check_las_options(ap_mode, smooth_order, pool_size, bidirectional)
        centered = ap_mode == "centered" or bidirectional
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.l_max, self.bidirectional = l_max, bidirectional
        self.causal = not bidirectional and ap_mode == "causal"
        self.chunk_size, self.pool_size, self.smooth_order, self.rope = chunk_size, pool_size, smooth_order, rope
        self.pool_mode = "centered" if centered else "past"
        self.proj = HeadProjections(d_model, n_heads)
        self.register_buffer("alpha", las_alpha(n_heads, alpha_b, alpha_init))
        self.scale = 1.0 / math.sqrt(d_model // n_heads)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding: padded keys are ignored when bidirectional."""
        B, L, _ = x.shape
        c = self.chunk_size
        n_chunks = -(-L // c)
        pad = n_chunks * c - L
        valid = torch.ones(B, L, dtype=torch.bool, device=x.device)  # (B, L)
        if mask is not None and self.bidirectional:
            x = x.masked_fill(mask.unsqueeze(-1), 0.0)  # (B, L, H)
            valid = ~mask
        q, k, v = self.proj.split(x)  # (B, nh, L, D) each
        if self.rope:
            q, k = rotary(q), rotary(k)
        q = q * self.scale
        q, k, v = (F.pad(t, (0, 0, 0, pad)).unflatten(2, (n_chunks, c)) for t in (q, k, v))  # (B, nh, W, c, D)
        pre_pool = None
        if self.smooth_order == "post_softmax":  # box filter per chunk: zero padding at chunk edges
            v = box_filter(v.transpose(-1, -2), self.pool_size, self.pool_mode)  # (B, nh, W, D, c)
            v = v.transpose(-1, -2)  # (B, nh, W, c, D)
        else:
            pre_pool = (self.pool_size, "future" if self.pool_mode == "past" else "centered")
        key_valid = None
        if pad or not bool(valid.all()):
            key_valid = F.pad(valid, (0, pad)).reshape(B, 1, n_chunks, 1, c)  # (B, 1, W, 1, c)
        pos = torch.arange(c, device=x.device)
        o = eld_attention(q, k, v, self.alpha, pos, pos, causal=not self.bidirectional, key_valid=key_valid,
                          pre_pool=pre_pool)  # (B, nh, W, c, D)
        o = o.flatten(2, 3)[:, :, :L]  # (B, nh, L, D)
        return self.proj.merge(o, x)  # (B, L, H)
