"""A plug-in mixer from outside ssmbench's registry: Based-style Taylor linear attention with a short convolution.

This is the mixer used for the "one plug-in" rows of the zoology and MAD results (docs/results.md): it is not a
registered model, and it reaches the harness only through `--model benchmarks.plugins.taylor_attention:TaylorAttention`,
exactly as a user's own file would. The design follows the idea of Based (Arora et al. 2024, "Simple linear attention
language models balance the recall-throughput tradeoff"): a short causal depthwise convolution, then linear attention
whose feature map is the second-order Taylor expansion of exp, so that

    phi(q) . phi(k) = 1 + s + s^2 / 2,   s = q . k / sqrt(d_feature)

which is positive for every s, so the normalised output `y_t = sum_{j<=t} w_tj v_j / sum_{j<=t} w_tj` needs no
softmax. `forward` computes that parallel (L x L) form within blocks of `chunk` positions and carries the
feature-map state `sum_j phi(k_j) v_j^T` (size (1 + F + F^2) x d_head per head) from block to block, so memory grows
linearly with L; `recurrent_forward` computes the same output as a linear RNN, one position at a time (the form that
makes it "attention-free"), and a test checks the two agree.

Example:
    >>> import torch
    >>> layer = TaylorAttention(32, l_max=16, n_heads=2, d_feature=8)
    >>> x = torch.randn(3, 16, 32)
    >>> layer(x).shape
    torch.Size([3, 16, 32])
    >>> bool(torch.allclose(layer(x), layer.recurrent_forward(x), atol=1e-5))
    True

    ssmbench eval --task mqar -q --model benchmarks.plugins.taylor_attention:TaylorAttention
"""

from __future__ import annotations

import math

import torch
from torch import nn


class TaylorAttention(nn.Module):
    """Short causal convolution, then Taylor-feature linear attention over `n_heads` heads, then a linear output map."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, n_heads: int = 1, d_feature: int = 16, conv_width: int = 3,
                 chunk: int = 256) -> None:
        super().__init__()
        if bidirectional:
            raise ValueError("TaylorAttention is causal only")
        if d_model % n_heads:
            raise ValueError(f"d_model = {d_model} is not divisible by n_heads = {n_heads}")
        self.n_heads, self.d_feature, self.conv_width, self.chunk = n_heads, d_feature, conv_width, chunk
        self.conv = nn.Conv1d(d_model, d_model, conv_width, groups=d_model, padding=conv_width - 1)
        self.q = nn.Linear(d_model, n_heads * d_feature)
        self.k = nn.Linear(d_model, n_heads * d_feature)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, L, H = x.shape
        u = self.conv(x.transpose(1, 2))[..., :L].transpose(1, 2)  # (B, L, H): causal, trailing pad dropped
        q = self.q(u).view(B, L, self.n_heads, self.d_feature).transpose(1, 2)  # (B, h, L, F)
        k = self.k(u).view(B, L, self.n_heads, self.d_feature).transpose(1, 2)  # (B, h, L, F)
        v = self.v(u).view(B, L, self.n_heads, H // self.n_heads).transpose(1, 2)  # (B, h, L, Dv)
        return q / self.d_feature ** 0.25, k / self.d_feature ** 0.25, v  # so that q . k carries 1 / sqrt(F)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, H = x.shape
        q, k, v = self._heads(x)
        C = self.chunk
        if L <= C:  # one block: the parallel form
            s = q @ k.transpose(-1, -2)  # (B, h, L, L)
            w = (1 + s + 0.5 * s * s).tril()  # phi(q_t) . phi(k_j) for j <= t, 0 above the diagonal
            y = (w @ v) / w.sum(-1, keepdim=True)  # (B, h, L, Dv)
        else:  # blocks of C: the parallel form inside a block, the feature-map state carried between blocks
            state = q.new_zeros(B, self.n_heads, 1 + self.d_feature + self.d_feature ** 2, v.shape[-1])  # (B,h,P,Dv)
            norm = q.new_zeros(B, self.n_heads, state.shape[2])  # (B, h, P)
            ys = []
            for a in range(0, L, C):
                qc, kc, vc = q[:, :, a:a + C], k[:, :, a:a + C], v[:, :, a:a + C]  # (B, h, c, .)
                s = qc @ kc.transpose(-1, -2)  # (B, h, c, c)
                w = (1 + s + 0.5 * s * s).tril()
                fq, fk = taylor_features(qc), taylor_features(kc)  # (B, h, c, P)
                num = w @ vc + fq @ state  # (B, h, c, Dv)
                den = w.sum(-1, keepdim=True) + (fq * norm[:, :, None]).sum(-1, keepdim=True)  # (B, h, c, 1)
                ys.append(num / den)
                state = state + fk.transpose(-1, -2) @ vc
                norm = norm + fk.sum(2)
            y = torch.cat(ys, 2)  # (B, h, L, Dv)
        return self.drop(self.out(y.transpose(1, 2).reshape(B, L, H)))  # (B, L, H)

    def recurrent_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The same output as a linear RNN over the explicit feature map: slow, for checking `forward`."""
        B, L, H = x.shape
        q, k, v = self._heads(x)
        fq, fk = taylor_features(q), taylor_features(k)  # (B, h, L, P), P = 1 + F + F^2
        state = torch.zeros(B, self.n_heads, fq.shape[-1], v.shape[-1], dtype=x.dtype, device=x.device)  # (B, h, P, Dv)
        norm = torch.zeros(B, self.n_heads, fq.shape[-1], dtype=x.dtype, device=x.device)  # (B, h, P)
        ys = []
        for t in range(L):
            state = state + fk[:, :, t, :, None] * v[:, :, t, None, :]
            norm = norm + fk[:, :, t]
            num = (fq[:, :, t, :, None] * state).sum(-2)  # (B, h, Dv)
            ys.append(num / (fq[:, :, t] * norm).sum(-1, keepdim=True))
        y = torch.stack(ys, 2)  # (B, h, L, Dv)
        return self.drop(self.out(y.transpose(1, 2).reshape(B, L, H)))


def taylor_features(z: torch.Tensor) -> torch.Tensor:
    """phi(z) = [1, z, vec(z z^T) / sqrt(2)], so that phi(a) . phi(b) = 1 + a.b + (a.b)^2 / 2.  (..., F) -> (..., P)."""
    outer = (z[..., :, None] * z[..., None, :]).flatten(-2) / math.sqrt(2)  # (..., F^2)
    return torch.cat([torch.ones_like(z[..., :1]), z, outer], -1)


__all__ = ["TaylorAttention", "taylor_features"]
