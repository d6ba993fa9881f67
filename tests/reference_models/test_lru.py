"""LRU: chunked scan vs a plain loop (float64), bidirectional scan, ring and phase init, gamma, hints."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import erf

from ssmbench.reference_models.lru import LRU, chunked_scan


def gelu(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1 + erf(z / math.sqrt(2)))


@pytest.mark.parametrize("L,chunk", [(300, 16), (64, 64), (5, 64), (1000, 8)])
def test_scan_equals_loop(L: int, chunk: int) -> None:
    torch.manual_seed(0)
    N = 5
    log_re, log_im = -torch.rand(N, dtype=torch.float64) * 0.1, torch.rand(N, dtype=torch.float64) * 6
    v = torch.randn(N, 2, L, dtype=torch.complex128)
    lam = torch.exp(torch.complex(log_re, log_im)).numpy()[:, None]
    x = np.zeros((N, 2), complex)
    want = []
    for k in range(L):
        x = lam * x + v.numpy()[..., k]
        want.append(x)
    x_re, x_im = chunked_scan(v.real.contiguous(), v.imag.contiguous(), log_re, log_im, chunk)
    np.testing.assert_allclose((x_re + 1j * x_im).numpy(), np.stack(want, -1), atol=1e-11)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_layer_equals_float64_loop(bidirectional: bool) -> None:
    torch.manual_seed(1)
    H, N, L = 3, 6, 150
    m = LRU(H, l_max=L, d_state=N, bidirectional=bidirectional, scan_chunk=8).double()
    lam = np.exp(-np.exp(m.nu_log.detach().numpy()) + 1j * np.exp(m.theta_log.detach().numpy()))
    bmat = m.B.detach().numpy()
    bmat = (bmat[..., 0] + 1j * bmat[..., 1]) * np.exp(m.gamma_log.detach().numpy())[:, None]  # (N, H)
    c = m.C.detach().numpy()
    c = c[..., 0] + 1j * c[..., 1]  # (C_k, H, N)
    u = torch.randn(2, L, H, dtype=torch.float64).numpy()

    def run(seq: np.ndarray) -> np.ndarray:
        x, out = np.zeros((2, N), complex), []
        for k in range(L):
            x = lam * x + seq[:, k] @ bmat.T
            out.append(x)
        return np.stack(out, 1)  # (B, L, N)

    y = np.einsum("hn,bln->blh", c[0], run(u)).real
    if bidirectional:
        y += np.einsum("hn,bln->blh", c[1], run(u[:, ::-1])[:, ::-1]).real
    expect = gelu(y + m.D.detach().numpy() * u)
    np.testing.assert_allclose(m(torch.from_numpy(u)).detach().numpy(), expect, atol=1e-11)
    got32 = m.float()(torch.from_numpy(u).float()).detach().double().numpy()
    np.testing.assert_allclose(got32, expect, atol=1e-4 * np.abs(expect).max())


def test_ring_init_gamma_and_hints() -> None:
    torch.manual_seed(2)
    m = LRU(8, l_max=16, d_state=4000, r_min=0.5, r_max=0.9, max_phase=math.pi / 10)
    mod = np.exp(-np.exp(m.nu_log.detach().double().numpy()))
    phase = np.exp(m.theta_log.detach().double().numpy())
    assert mod.min() >= 0.5 - 1e-6 and mod.max() <= 0.9 + 1e-6
    assert phase.min() >= 0 and phase.max() <= math.pi / 10 + 1e-6
    # uniform on the ring: |lambda|^2 is uniform on [r_min^2, r_max^2]
    assert abs(np.mean(mod ** 2) - (0.25 + 0.81) / 2) < 0.01
    np.testing.assert_allclose(np.exp(m.gamma_log.detach().double().numpy()), np.sqrt(1 - mod ** 2), rtol=1e-5)
    for name in ("nu_log", "theta_log", "gamma_log", "B"):
        assert getattr(m, name)._optim == {"lr_scale": 0.5, "weight_decay": 0.0}
    assert not hasattr(m.C, "_optim")
    edge = LRU(4, l_max=8, d_state=64, r_min=0.0, r_max=1.0)  # u clamped: finite logs
    assert all(torch.isfinite(p).all() for p in edge.parameters())


def test_scan_phase_stays_accurate_at_64k() -> None:
    """The hierarchical scan forms lambda^k with float64 phases; compare the impulse response at 2^16."""
    L = 1 << 16
    log_re, log_im = torch.tensor([-1e-6, -1e-5]), torch.tensor([2.3, 0.7])
    v_re, v_im = torch.zeros(2, 1, L), torch.zeros(2, 1, L)
    v_re[:, 0, 0] = 1.0
    x_re, x_im = chunked_scan(v_re, v_im, log_re, log_im)
    k = np.arange(L)
    want = np.exp(k * (log_re.double().numpy() + 1j * log_im.double().numpy())[:, None])
    got = x_re[:, 0].double().numpy() + 1j * x_im[:, 0].double().numpy()
    assert np.abs(got - want).max() < 1e-5


def test_gradients_finite_at_64k() -> None:
    torch.manual_seed(3)
    m = LRU(2, l_max=1 << 16, d_state=8, r_min=0.999, r_max=0.9999, max_phase=math.pi / 10)
    m(torch.randn(1, 1 << 16, 2)).square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters())
