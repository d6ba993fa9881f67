"""LaS-chunk: batched in-chunk computation vs the naive Eq. 3 applied to each chunk on its own."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ssmbench.reference_models.las_chunk import LaSChunk


def naive_chunk(q: np.ndarray, k: np.ndarray, v: np.ndarray, alpha: np.ndarray, size: int, causal: bool,
                centered: bool) -> np.ndarray:
    """Eq. 3 on one chunk (B, nh, c, d): ELD logits, mask, softmax, then row pooling with zero padding."""
    c = q.shape[2]
    i, j = np.arange(c)[:, None], np.arange(c)[None, :]
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    s = s * np.exp(-alpha[:, None, None] * np.abs(i - j))
    if causal:
        s = np.where(j <= i, s, -np.inf)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    pooled = np.zeros_like(a)
    for t in (range(-(size // 2), size // 2 + 1) if centered else range(size)):
        lo, hi = max(0, -t), min(c, c - t)
        pooled[..., lo:hi] += a[..., lo + t:hi + t]
    return pooled / size @ v


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("L", [32, 29])
def test_equals_naive_per_chunk(bidirectional: bool, L: int) -> None:
    torch.manual_seed(0)
    c, H = 8, 16
    m = LaSChunk(H, l_max=L, n_heads=4, chunk_size=c, pool_size=3, alpha_b=0.5,
                 bidirectional=bidirectional).double()
    u = torch.randn(2, L, H, dtype=torch.float64)
    q, k, v = (t.detach().numpy() for t in m.proj.split(u))
    outs = [naive_chunk(q[:, :, s:s + c], k[:, :, s:s + c], v[:, :, s:s + c], m.alpha.double().numpy(),
                        3, not bidirectional, bidirectional) for s in range(0, L, c)]
    want = m.proj.merge(torch.from_numpy(np.concatenate(outs, axis=2)), u)
    torch.testing.assert_close(m(u), want, atol=1e-12, rtol=0)


def test_chunks_do_not_communicate() -> None:
    torch.manual_seed(1)
    m = LaSChunk(16, l_max=32, n_heads=4, chunk_size=8, bidirectional=True)
    u = torch.randn(1, 32, 16)
    u2 = u.clone()
    u2[:, 8:16] = torch.randn(1, 8, 16)
    d = (m(u) - m(u2)).abs().amax(dim=(0, 2))
    assert d[:8].max() == 0 and d[16:].max() == 0 and d[8:16].min() > 0
