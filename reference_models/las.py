"""LaS: local-and-smooth attention (Zimerman and Wolf), ELD-decayed logits and average-pooled attention rows.

Per head c: `AP(softmax(exp(-alpha_c D) * q k^T / sqrt(d)))` v with a causal mask (LaS paper Eq. 3; docs/models.md,
Reference models). Pooling rows of the attention matrix equals box-filtering V, so the default post-softmax pooling runs
as a filter on V followed by attention. In the causal case the decay factorises,
`exp(-alpha (i - j)) = exp(-alpha (i - c)) exp(alpha (j - c))`, and folds into q and k, so fused causal attention
runs it (while alpha L / 2 <= 60); otherwise attention is computed in query blocks that are recomputed in the
backward pass, so scores are never L x L at once. The mixer returns `u + GELU(O(.))`.

`ap_mode="centered"` (the paper's centred window) **leaks future tokens** on causal tasks: the output at i reads
inputs up to i + (P-1)/2. A layer built with it sets `causal = False` and the harness refuses it on causal tasks.

Example:
    >>> import torch
    >>> layer = LaS(16, l_max=32)
    >>> layer(torch.randn(2, 32, 16)).shape
    torch.Size([2, 32, 16])
    >>> LaS(16, l_max=32, ap_mode="centered").causal
    False
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ._attention import HeadProjections, box_filter, check_las_options, eld_attention, las_alpha, rotary


class LaS(nn.Module):
    """Local-and-smooth attention (8 heads, ELD decay, causal average pooling): u + GELU(O(LaS(u)))."""

    packable = False
    """Not stacked into packed runs: the query blocks are sized from tensor values (`.item()`), which
    `torch.func.vmap` cannot batch (members of a LaS sweep run one by one)."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, n_heads: int = 8, pool_size: int = 5, alpha_b: float = 1e-3,
                 alpha_init: str = "linspace", ap_mode: str = "causal", smooth_order: str = "post_softmax",
                 rope: bool = False, query_block: int = 256) -> None:
        """Args:
            d_model: width H. l_max: longest input length.
            bidirectional: symmetric ELD exp(-alpha |i-j|), no causal mask, centred pooling.
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            n_heads: heads. pool_size: P, the pooling window. alpha_b: the paper's B (largest alpha).
            alpha_init: `linspace` (exp(-alpha) evenly spaced from 1 to e^-B) or `literal`.
            ap_mode: `causal` (pool toward the past) or `centered` (leaks P // 2 future positions).
            smooth_order: `post_softmax` (Eq. 3) or `pre_softmax` (pool the ELD-scaled logits).
            rope: rotary embeddings on q and k. query_block: queries per block.
        """
        super().__init__()
        check_las_options(ap_mode, smooth_order, pool_size, bidirectional)
        centered = ap_mode == "centered" or bidirectional
        self.l_max, self.bidirectional = l_max, bidirectional
        self.causal = not bidirectional and ap_mode == "causal"
        self.pool_size, self.smooth_order, self.rope, self.query_block = pool_size, smooth_order, rope, query_block
        self.mask_future = not bidirectional
        self.pool_mode = "centered" if centered else "past"
        self.proj = HeadProjections(d_model, n_heads)
        self.register_buffer("alpha", las_alpha(n_heads, alpha_b, alpha_init))
        self.scale = 1.0 / math.sqrt(d_model // n_heads)

    max_rescale = 60.0
    """Largest alpha (L - 1) / 2 for which the ELD factor is folded into q and k (e^60 stays far from overflow)."""

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding: padded keys are ignored when bidirectional."""
        B, L, _ = x.shape
        key_valid = None
        if mask is not None and self.bidirectional:
            x = x.masked_fill(mask.unsqueeze(-1), 0.0)  # (B, L, H)
            key_valid = ~mask[:, None, None, :]  # (B, 1, 1, L)
        q, k, v = self.proj.split(x)  # (B, nh, L, D) each
        if self.rope:
            q, k = rotary(q), rotary(k)
        q = q * self.scale
        pre_pool = None
        if self.smooth_order == "post_softmax":  # AP(P) V == P box(V): pooling moves onto V
            v = box_filter(v.transpose(-1, -2), self.pool_size, self.pool_mode)  # (B, nh, D, L)
            v = v.transpose(-1, -2).contiguous()  # (B, nh, L, D); fused attention wants a unit last stride
        else:  # pooling logits along keys: the row-pooling window looks at keys j .. j+P-1 (causal)
            pre_pool = (self.pool_size, "future" if self.pool_mode == "past" else "centered")
        if self.mask_future and pre_pool is None and float(self.alpha.max()) * (L - 1) / 2 <= self.max_rescale:
            # exp(-alpha (i - j)) q_i.k_j = (q_i e^{-alpha (i - c)}).(k_j e^{alpha (j - c)}) with c the middle
            # position: the ELD factor folds into q and k, so fused causal attention applies, nothing is L x L.
            rel = torch.arange(L, dtype=torch.float64, device=x.device) - (L - 1) / 2  # (L,)
            scale = torch.exp(-self.alpha.double()[:, None] * rel).to(q.dtype)[:, :, None]  # (nh, L, 1)
            o = F.scaled_dot_product_attention(q * scale, k / scale, v, is_causal=True, scale=1.0)  # (B, nh, L, D)
            return self.proj.merge(o, x)  # (B, L, H)
        pos = torch.arange(L, device=x.device)
        step = L if L <= self.query_block else self.query_block
        use_ckpt = torch.is_grad_enabled() and step < L and q.requires_grad
        blocks = []
        for start in range(0, L, step):
            stop = min(L, start + step)
            k_stop = stop if self.mask_future else L  # causal: keys after the block are all masked
            kv_valid = None if key_valid is None else key_valid[..., :k_stop]
            args = (q[:, :, start:stop], k[:, :, :k_stop], v[:, :, :k_stop], self.alpha, pos[start:stop],
                    pos[:k_stop])
            kwargs = dict(causal=self.mask_future, key_valid=kv_valid, pre_pool=pre_pool)
            if use_ckpt:  # keep O(block x L) scores alive, not O(L^2): recompute in backward
                blocks.append(checkpoint(eld_attention, *args, use_reentrant=False, **kwargs))
            else:
                blocks.append(eld_attention(*args, **kwargs))
        o = torch.cat(blocks, dim=2)  # (B, nh, L, D)
        return self.proj.merge(o, x)  # (B, L, H)
