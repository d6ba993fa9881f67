"""LOCALATTENTION: attention inside chunks of 1024 positions that also see their neighbour chunk(s).

Same module as ATTENTION (4 heads, RoPE with global positions, learnable temperature, `u + GELU(O(.))`), but the
queries of chunk w = floor(i / c) attend only to the keys of chunks w-1 and w (causal, j <= i) or w-1, w and w+1
(bidirectional); see docs/models.md. This is not a sliding window: the visible context depends on the offset
inside the chunk. Computed blockwise: each chunk's queries against its neighbours' keys, with boolean masks that
all chunks share, so fused attention applies and no score matrix is stored.

Example:
    >>> import torch
    >>> layer = LocalAttention(16, l_max=40, chunk_size=8)
    >>> layer(torch.randn(2, 40, 16)).shape
    torch.Size([2, 40, 16])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._attention import HeadProjections, rotary


class LocalAttention(nn.Module):
    """Chunked local attention (chunks of 1024, neighbour chunks visible): u + GELU(O(MHA_local(u)))."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, n_heads: int = 4, chunk_size: int = 1024, rope: bool = True) -> None:
        """Args:
            d_model: width H. l_max: longest input length. bidirectional: neighbours on both sides, no causal mask.
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            n_heads: heads. chunk_size: c. rope: rotary embeddings with global positions.
        """
        super().__init__()
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.l_max, self.bidirectional, self.causal = l_max, bidirectional, not bidirectional
        self.chunk_size, self.rope = chunk_size, rope
        self.proj = HeadProjections(d_model, n_heads)
        self.temperature = nn.Parameter(torch.tensor((d_model // n_heads) ** -0.5))

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding: padded keys are ignored when bidirectional."""
        B, L, _ = x.shape
        c = self.chunk_size
        key_mask = mask if (mask is not None and self.bidirectional) else None
        if key_mask is not None:
            x = x.masked_fill(key_mask.unsqueeze(-1), 0.0)  # (B, L, H)
        q, k, v = self.proj.split(x)  # (B, nh, L, D) each
        if self.rope:
            q, k = rotary(q), rotary(k)
        q = q * self.temperature
        if L <= c and key_mask is None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, scale=1.0)  # (B, nh, L, D)
            return self.proj.merge(o, x)
        n_chunks = -(-L // c)
        pad = n_chunks * c - L
        q, k, v = (F.pad(t, (0, 0, 0, pad)).unflatten(2, (n_chunks, c)) for t in (q, k, v))  # (B, nh, W, c, D)
        if key_mask is None:
            o = _shared_mask_attention(q, k, v, L, self.causal)  # (B, nh, W, c, D)
        else:
            o = _masked_attention(q, k, v, L, self.causal, key_mask)  # (B, nh, W, c, D)
        o = o.flatten(2, 3)[:, :, :L]  # (B, nh, L, D)
        return self.proj.merge(o, x)  # (B, L, H)


def _shared_mask_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, L: int,
                           causal: bool) -> torch.Tensor:
    """Chunked attention with masks that do not depend on the chunk, so fused attention runs (4-D inputs).

    Causal: chunk 0 attends causally to itself; chunks w >= 1 see [chunk w-1, chunk w] under one shared (c, 2c)
    mask (padded keys are after every valid query). Bidirectional: every chunk sees [w-1, w, w+1] and only a small
    key mask (missing neighbours, padded keys) is needed. q, k, v: (B, nh, W, c, D) -> (B, nh, W, c, D).
    """
    B, nh, W, c, D = q.shape
    if causal:
        first = F.scaled_dot_product_attention(q[:, :, 0], k[:, :, 0], v[:, :, 0], is_causal=True,
                                               scale=1.0)  # (B, nh, c, D)
        if W == 1:
            return first.unsqueeze(2)
        keys = torch.cat([k[:, :, :-1], k[:, :, 1:]], dim=3).flatten(1, 2)  # (B, nh (W-1), 2c, D)
        vals = torch.cat([v[:, :, :-1], v[:, :, 1:]], dim=3).flatten(1, 2)  # (B, nh (W-1), 2c, D)
        t = torch.arange(c, device=q.device)
        allowed = torch.cat([torch.ones(c, c, dtype=torch.bool, device=q.device), t[None, :] <= t[:, None]],
                            dim=1)  # (c, 2c): all of chunk w-1, causal in chunk w
        rest = F.scaled_dot_product_attention(q[:, :, 1:].flatten(1, 2), keys, vals, attn_mask=allowed,
                                              scale=1.0)  # (B, nh (W-1), c, D)
        return torch.cat([first.unsqueeze(2), rest.unflatten(1, (nh, W - 1))], dim=2)  # (B, nh, W, c, D)
    offsets = (-1, 0, 1)
    keys = torch.cat([_neighbour(k, s) for s in offsets], dim=3).flatten(1, 2)  # (B, nh W, 3c, D)
    vals = torch.cat([_neighbour(v, s) for s in offsets], dim=3).flatten(1, 2)  # (B, nh W, 3c, D)
    pos = torch.arange(W * c, device=q.device).reshape(W, 1, c)  # (W, 1, c)
    k_pos = torch.cat([pos + s * c for s in offsets], dim=2)  # (W, 1, 3c)
    valid = ((k_pos >= 0) & (k_pos < L)).unsqueeze(0).expand(nh, W, 1, 3 * c).reshape(1, nh * W, 1, 3 * c)
    o = F.scaled_dot_product_attention(q.flatten(1, 2), keys, vals, attn_mask=valid, scale=1.0)  # (B, nh W, c, D)
    return o.unflatten(1, (nh, W))  # (B, nh, W, c, D)


def _masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, L: int, causal: bool,
                      key_mask: torch.Tensor) -> torch.Tensor:
    """Chunked attention with a padding mask (B, L) (True = padded): a per-example boolean mask, unfused."""
    B, nh, W, c, D = q.shape
    pad = W * c - L
    offsets = (-1, 0) if causal else (-1, 0, 1)
    k = torch.cat([_neighbour(k, s) for s in offsets], dim=3)  # (B, nh, W, S c, D)
    v = torch.cat([_neighbour(v, s) for s in offsets], dim=3)  # (B, nh, W, S c, D)
    q_pos = torch.arange(W * c, device=q.device).reshape(W, c, 1)  # (W, c, 1)
    k_pos = torch.cat([q_pos.reshape(W, 1, c) + s * c for s in offsets], dim=2)  # (W, 1, S c)
    allowed = (k_pos >= 0) & (k_pos < L)  # (W, 1, S c): missing neighbours and padded keys
    if causal:
        allowed = allowed & (k_pos <= q_pos)  # (W, c, S c)
    valid = F.pad(~key_mask, (c, (len(offsets) - 1) * c + pad))  # (B, (W + S) c) with a chunk on the left
    kv = torch.stack([valid[:, (w + s + 1) * c:(w + s + 2) * c] for w in range(W) for s in offsets],
                     dim=1)  # (B, W S, c)
    allowed = allowed & kv.reshape(B, 1, W, 1, len(offsets) * c)  # (B, 1, W, c, S c)
    allowed = allowed | (k_pos == q_pos)  # a padded query keeps itself: no empty rows
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=1.0)  # (B, nh, W, c, D)


def _neighbour(t: torch.Tensor, shift: int) -> torch.Tensor:
    """Chunk w + shift for every chunk w, zeros where it does not exist. t: (B, nh, W, c, D)."""
    if shift == 0:
        return t
    zeros = torch.zeros_like(t[:, :, :1])  # (B, nh, 1, c, D)
    if shift < 0:
        return torch.cat([zeros, t[:, :, :-1]], dim=2)  # (B, nh, W, c, D)
    return torch.cat([t[:, :, 1:], zeros], dim=2)  # (B, nh, W, c, D)
