"""LOCALATTENTION: blocked computation vs full attention under the chunk-neighbour mask (not a sliding window)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ssmbench.reference_models.local_attention import LocalAttention


def chunk_neighbour_mask(L: int, c: int, causal: bool) -> torch.Tensor:
    """The chunk-neighbour rule of docs/models.md: floor(q/c) - floor(k/c) in {0, 1} and k <= q (causal), or |difference| <= 1."""
    q = torch.arange(L)[:, None]
    k = torch.arange(L)[None, :]
    diff = q // c - k // c
    return ((diff >= 0) & (diff <= 1) & (k <= q)) if causal else diff.abs() <= 1


def reference(m: LocalAttention, u: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """The same module's projections, but full L x L attention with an explicit boolean mask, float64."""
    from ssmbench.reference_models._attention import rotary

    q, k, v = m.proj.split(u)
    q, k = rotary(q), rotary(k)
    s = (q * m.temperature) @ k.transpose(-1, -2)
    a = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    return m.proj.merge(a @ v, u)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("L", [37, 40, 8, 5])
def test_blocked_equals_full_attention_with_chunk_mask(causal: bool, L: int) -> None:
    torch.manual_seed(0)
    c, H = 8, 16
    m = LocalAttention(H, l_max=64, chunk_size=c, bidirectional=not causal).double()
    u = torch.randn(2, L, H, dtype=torch.float64)
    want = reference(m, u, chunk_neighbour_mask(L, c, causal))
    torch.testing.assert_close(m(u), want, atol=1e-12, rtol=0)


def test_is_not_a_sliding_window() -> None:
    torch.manual_seed(1)
    L, c = 32, 8
    m = LocalAttention(16, l_max=L, chunk_size=c).double()
    u = torch.randn(1, L, 16, dtype=torch.float64)
    q = torch.arange(L)[:, None]
    band = (q - torch.arange(L)[None, :] >= 0) & (q - torch.arange(L)[None, :] < c)
    assert (m(u) - reference(m, u, band)).abs().max() > 1e-3
    # query 15 (offset 7 in chunk 1) sees keys 0..15; query 16 (chunk 2 start) sees only keys 8..16
    mask = chunk_neighbour_mask(L, c, True)
    assert mask[15].sum() == 16 and mask[16].sum() == 9


def test_padding_mask_when_bidirectional() -> None:
    torch.manual_seed(2)
    m = LocalAttention(8, l_max=40, chunk_size=8, bidirectional=True)
    u = torch.randn(1, 40, 8)
    mask = torch.zeros(1, 40, dtype=torch.bool)
    mask[:, 30:] = True
    u2 = u.clone()
    u2[:, 30:] = torch.randn(1, 10, 8)
    y1, y2 = m(u, mask=mask), m(u2, mask=mask)
    torch.testing.assert_close(y1[:, :30], y2[:, :30])
    assert torch.isfinite(y1).all()
    allowed = chunk_neighbour_mask(40, 8, False) & ~mask[0][None, :]
    allowed |= torch.eye(40, dtype=torch.bool)
    np.testing.assert_allclose(y1[:, :30].detach().numpy(),
                               reference(m, u.masked_fill(mask[..., None], 0), allowed)[:, :30].detach().numpy(),
                               atol=1e-5)
    F.mse_loss(y1, torch.zeros_like(y1)).backward()
