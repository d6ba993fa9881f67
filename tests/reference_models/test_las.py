"""LaS: blocked, V-pooled computation vs a naive materialised Eq. 3 (float64); alpha init; the centred leak."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ssmbench.harness.models.build import check_causality
from ssmbench.reference_models.las import LaS


def row_pool(p: np.ndarray, size: int, centered: bool) -> np.ndarray:
    """AP along the last axis: P'_ij = (1/P) sum_t P_{i, j+t}, t in 0..P-1 (causal) or |t| <= (P-1)/2; zero pad."""
    L = p.shape[-1]
    out = np.zeros_like(p)
    offsets = range(-(size // 2), size // 2 + 1) if centered else range(size)
    for t in offsets:
        lo, hi = max(0, -t), min(L, L - t)
        out[..., lo:hi] += p[..., lo + t:hi + t]
    return out / size


def naive_eq3(m: LaS, u: torch.Tensor, *, causal_mask: bool, centered: bool, pre_softmax: bool) -> np.ndarray:
    """u + GELU(O(AP(softmax(exp(-alpha D) * q k^T / sqrt(d))) v)) with every matrix L x L."""
    q, k, v = (t.detach().numpy() for t in m.proj.split(u))
    d = q.shape[-1]
    L = q.shape[2]
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    dist = (i - j).astype(float)
    alpha = m.alpha.double().numpy()[:, None, None]
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    s = s * np.exp(-alpha * (np.clip(dist, 0, None) if causal_mask else np.abs(dist)))
    allowed = (j <= i) if causal_mask else np.ones((L, L), bool)
    if pre_softmax:
        s = row_pool(np.where(allowed, s, 0.0), m.pool_size, centered)
    s = np.where(allowed, s, -np.inf)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    if not pre_softmax:
        a = row_pool(a, m.pool_size, centered)
    o = torch.from_numpy(a @ v)
    return m.proj.merge(o, u).detach().numpy()


@pytest.mark.parametrize("options,causal_mask,centered", [
    ({}, True, False),
    ({"ap_mode": "centered"}, True, True),
    ({"bidirectional": True, "pool_size": 3}, False, True),
    ({"smooth_order": "pre_softmax"}, True, False),
    ({"smooth_order": "pre_softmax", "bidirectional": True}, False, True),
])
@pytest.mark.parametrize("query_block", [64, 7])
def test_equals_naive_eq3(options: dict, causal_mask: bool, centered: bool, query_block: int) -> None:
    torch.manual_seed(0)
    L, H = 30, 16
    m = LaS(H, l_max=L, n_heads=4, alpha_b=0.3, query_block=query_block, **options).double()
    if query_block == 7:
        m.max_rescale = 0.0  # force the blocked path; otherwise causal post-softmax folds ELD into q and k
    u = torch.randn(2, L, H, dtype=torch.float64)
    want = naive_eq3(m, u, causal_mask=causal_mask, centered=centered,
                     pre_softmax=options.get("smooth_order") == "pre_softmax")
    np.testing.assert_allclose(m(u).detach().numpy(), want, atol=1e-12)


def test_blocked_gradients_equal_single_block() -> None:
    torch.manual_seed(1)
    u = torch.randn(1, 40, 16, dtype=torch.float64, requires_grad=True)
    m = LaS(16, l_max=40, n_heads=4, query_block=9).double()
    m.max_rescale = 0.0
    m(u).square().sum().backward()
    g_blocked = u.grad.clone()
    u.grad = None
    m.query_block = 64
    m(u).square().sum().backward()
    torch.testing.assert_close(g_blocked, u.grad, atol=1e-12, rtol=0)


def test_fused_path_at_long_length_matches_blocked() -> None:
    torch.manual_seed(3)
    m = LaS(16, l_max=2048, n_heads=4, query_block=512)
    u = torch.randn(1, 2048, 16)
    fused = m(u)
    m.max_rescale = 0.0
    torch.testing.assert_close(fused, m(u), atol=2e-5, rtol=1e-4)


def test_alpha_init() -> None:
    a = LaS(16, l_max=8, n_heads=8, alpha_b=1e-3).alpha.double().numpy()
    np.testing.assert_allclose(np.exp(-a), np.linspace(1, math.exp(-1e-3), 8), rtol=1e-6)
    assert a[0] == 0 and a[-1] == pytest.approx(1e-3, rel=1e-4)
    lit = LaS(16, l_max=8, n_heads=8, alpha_b=1e-3, alpha_init="literal").alpha.double().numpy()
    assert lit[0] == 0 and np.exp(-lit[1]) == pytest.approx(1e-3 / 7, rel=1e-5)
    assert "alpha" in dict(LaS(16, l_max=8).named_buffers())  # fixed, not trained


def test_centered_pooling_is_flagged_and_leaks_two_positions() -> None:
    torch.manual_seed(2)
    m = LaS(16, l_max=32, n_heads=4, ap_mode="centered", pool_size=5)
    assert m.causal is False
    report = check_causality(m, torch.randn(2, 32, 16))
    assert not report.passed and report.lookahead == 2
    assert check_causality(LaS(16, l_max=32, n_heads=4), torch.randn(2, 32, 16)).passed
