"""S4D: kernel and layer vs the float64 zero-order-hold recurrence with conjugate pairs, init, hints."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import erf

from ssmbench.reference_models.s4d import S4D


def gelu(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1 + erf(z / math.sqrt(2)))


def test_layer_equals_float64_recurrence_with_conjugates() -> None:
    """x_k = e^{dt A} x_{k-1} + (e^{dt A} - 1)/A u_k over N/2 modes and their conjugates; y = C x + conj."""
    torch.manual_seed(0)
    H, N, L = 3, 8, 80
    m = S4D(H, l_max=L, d_state=N, chunk_size=8).double()
    a = -np.exp(m.log_A_real.detach().numpy()) + 1j * m.A_imag.detach().numpy()  # (H, N/2)
    a = np.concatenate([a, a.conj()], 1)  # (H, N): explicit conjugate modes
    dt = np.exp(m.log_dt.detach().numpy())[:, None]
    c = m.C.detach().numpy()[0]
    c = c[..., 0] + 1j * c[..., 1]
    c = np.concatenate([c, c.conj()], 1)
    step, b = np.exp(dt * a), (np.exp(dt * a) - 1) / a
    u = torch.randn(2, L, H, dtype=torch.float64)
    x = np.zeros((2, H, N), complex)
    ys = []
    for k in range(L):
        x = step * x + b * u.numpy()[:, k, :, None]
        ys.append((c * x).sum(-1))
    y = np.stack(ys, 1)
    assert np.abs(y.imag).max() < 1e-10  # conjugate pairs give a real output
    expect = gelu(y.real + m.D.detach().numpy() * u.numpy())
    np.testing.assert_allclose(m(u).detach().numpy(), expect, atol=1e-11)
    np.testing.assert_allclose(m.float()(u.float()).detach().double().numpy(), expect,
                               atol=1e-4 * np.abs(expect).max())


def test_init_and_hints() -> None:
    m = S4D(4, l_max=16, d_state=8)
    assert m.log_A_real.shape == (4, 4) and m.C.shape == (1, 4, 4, 2)
    np.testing.assert_allclose(np.exp(m.log_A_real.detach().numpy()), 0.5, rtol=1e-6)
    np.testing.assert_allclose(m.A_imag.detach().numpy()[1], np.pi * np.arange(4), rtol=1e-6)
    dt = np.exp(m.log_dt.detach().numpy())
    assert dt.min() >= 1e-3 * 0.999 and dt.max() <= 1e-1 * 1.001
    for name in ("log_dt", "log_A_real", "A_imag"):
        assert getattr(m, name)._optim == {"lr_max": 1e-3, "weight_decay": 0.0}
    assert not hasattr(m.C, "_optim") and not hasattr(m.D, "_optim")


def test_gradients_finite_at_64k() -> None:
    torch.manual_seed(1)
    m = S4D(2, l_max=1 << 16, d_state=16, bidirectional=True)
    m(torch.randn(1, 1 << 16, 2)).square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters())
