"""ATTENTION: the DLR paper's attention baseline, 4 heads with rotary embeddings and a learnable temperature.

The DLR layer's convolution is replaced by multi-head attention; the mixer returns `u + GELU(O(MHA(u)))`
(docs/models.md, Reference models). Queries are multiplied by one learnable scalar initialised to d_head^(-1/2) after RoPE, and
the fused `scaled_dot_product_attention` runs with scale 1 and `is_causal`.

Example:
    >>> import torch
    >>> layer = Attention(16, l_max=32)
    >>> layer(torch.randn(2, 32, 16)).shape
    torch.Size([2, 32, 16])
    >>> sum(p.numel() for p in Attention(128, l_max=8).parameters())  # Q, K, V, O and the temperature
    66049
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._attention import HeadProjections, rotary


class Attention(nn.Module):
    """Multi-head attention (4 heads, RoPE, learnable temperature): u + GELU(O(softmax(s q k^T) v))."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, n_heads: int = 4, rope: bool = True, attn_ff: int = 0) -> None:
        """Args:
            d_model: width H. l_max: longest input length. bidirectional: no causal mask.
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            n_heads: heads (d_model / n_heads channels each). rope: rotary embeddings on q and k.
            attn_ff: f > 0 adds two residual feed-forward sublayers of width f * d_model after O (Table 4).
        """
        super().__init__()
        self.l_max, self.bidirectional, self.causal = l_max, bidirectional, not bidirectional
        self.rope = rope
        self.proj = HeadProjections(d_model, n_heads, attn_ff)
        self.temperature = nn.Parameter(torch.tensor((d_model // n_heads) ** -0.5))

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding: padded keys are ignored when bidirectional."""
        attn_mask = None
        if mask is not None and self.bidirectional:
            x = x.masked_fill(mask.unsqueeze(-1), 0.0)  # (B, L, H)
            attn_mask = ~mask[:, None, None, :]  # (B, 1, 1, L), True = may attend
        q, k, v = self.proj.split(x)  # (B, nh, L, D) each
        if self.rope:
            q, k = rotary(q), rotary(k)
        o = F.scaled_dot_product_attention(q * self.temperature, k, v, attn_mask=attn_mask,
                                           is_causal=self.causal, scale=1.0)  # (B, nh, L, D)
        return self.proj.merge(o, x)  # (B, L, H)
