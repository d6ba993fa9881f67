"""DSS_EXP: FFT convolution vs the float64 zero-order-hold recurrence, bidirectional Toeplitz, inits, hints."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import erf

from ssmbench.reference_models.dss_exp import DSSExp


def gelu(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1 + erf(z / math.sqrt(2)))


def discretised(m: DSSExp, direction: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(exp(dt Lambda) (H, N), W (e^{dt Lambda} - 1) / Lambda (H, N)) in complex128, from the parameters."""
    lam = -np.exp(m.log_lambda_re.detach().double().numpy()) + 1j * m.lambda_im.detach().double().numpy()
    dt = np.exp(m.log_dt.detach().double().numpy())[:, None]
    w = m.W.detach().double().numpy()[direction]
    w = w[..., 0] + 1j * w[..., 1]
    return np.exp(dt * lam), w * np.expm1(dt * lam) / lam


def recurrence(step: np.ndarray, w: np.ndarray, u: np.ndarray) -> np.ndarray:
    B, L, H = u.shape
    x = np.zeros((B, H, step.shape[1]), complex)
    ys = []
    for k in range(L):
        x = step * x + u[:, k, :, None]
        ys.append((w * x).sum(-1))
    return np.stack(ys, 1)  # (B, L, H) complex


@pytest.mark.parametrize("init", ["lin", "randn", "hippo_skew_pos_imag"])
def test_fft_conv_equals_float64_recurrence(init: str) -> None:
    torch.manual_seed(0)
    H, N, L = 3, 8, 90
    m = DSSExp(H, l_max=L, d_state=N, lambda_init=init, dt_min=1e-3, dt_max=1e-1, chunk_size=16).double()
    u = torch.randn(2, L, H, dtype=torch.float64)
    expect = gelu(recurrence(*discretised(m), u.numpy()).real + m.D.detach().numpy() * u.numpy())
    np.testing.assert_allclose(m(u).detach().numpy(), expect, atol=1e-11)
    got32 = m.float()(u.float()).detach().double().numpy()
    np.testing.assert_allclose(got32, expect, atol=1e-4 * np.abs(expect).max())


def test_prod_cast_and_bidirectional_toeplitz() -> None:
    torch.manual_seed(1)
    H, N, L = 2, 6, 30
    m = DSSExp(H, l_max=L, d_state=N, bidirectional=True, kernel_to_real="prod", dt_min=1e-2, dt_max=1e-1).double()
    kernels = []
    for direction in (0, 1):
        step, w = discretised(m, direction)
        k = np.stack([(w * step ** j).sum(-1) for j in range(L)], 1)  # (H, L)
        kernels.append(k.real * k.imag)
    kf, kb = kernels
    toeplitz = np.zeros((H, L, L))
    for i in range(L):
        for j in range(L):
            toeplitz[:, i, j] = kf[:, i - j] if i >= j else kb[:, j - i - 1]
    u = torch.randn(2, L, H, dtype=torch.float64)
    expect = gelu(np.einsum("hij,bjh->bih", toeplitz, u.numpy()) + m.D.detach().numpy() * u.numpy())
    np.testing.assert_allclose(m(u).detach().numpy(), expect, atol=1e-12)


def test_small_dt_scale_keeps_its_digits() -> None:
    """(exp(dt Lambda) - 1) / Lambda ~ dt at dt = 1e-6 is computed without cancellation."""
    m = DSSExp(2, l_max=8, d_state=4, dt_min=1e-6, dt_max=1e-6)
    with torch.no_grad():
        m.W.zero_()
        m.W[..., 0] = 1.0
    k = m.kernel(1)[0, :, 0].detach().double()  # K[0] = Re sum_n (e^{dt Lambda} - 1) / Lambda
    lam = -0.5 + 1j * np.pi * np.arange(4)
    want = np.real(np.expm1(1e-6 * lam) / lam).sum()
    np.testing.assert_allclose(k.numpy(), want, rtol=1e-5)


def test_init_and_hints() -> None:
    N = 16
    m = DSSExp(8, l_max=32, d_state=N)
    np.testing.assert_allclose(-np.exp(m.log_lambda_re.detach().numpy()), -0.5, rtol=1e-6)
    np.testing.assert_allclose(m.lambda_im.detach().numpy(), np.pi * np.arange(N), rtol=1e-6)
    dt = np.exp(m.log_dt.detach().numpy())
    assert dt.min() >= 1e-4 * 0.999 and dt.max() <= 1e-2 * 1.001
    for name in ("log_lambda_re", "lambda_im", "log_dt", "W"):
        assert getattr(m, name)._optim == {"weight_decay": 0.0}
    m = DSSExp(8, l_max=32, d_state=4, lr_ssm=5e-4, lr_lambda=1e-4)
    assert m.lambda_im._optim["lr"] == 1e-4 and m.W._optim["lr"] == 5e-4 and m.log_dt._optim["lr"] == 5e-4


def test_hippo_frequencies_match_numpy_eigenvalues() -> None:
    n = 6
    i = np.arange(2 * n)
    a = np.tril(np.sqrt(np.outer(2 * i + 1, 2 * i + 1)), -1)
    eig = np.linalg.eigvals((a - a.T) / 2)
    want = np.sort(eig.imag)[-n:]
    got = DSSExp(2, l_max=8, d_state=n, lambda_init="hippo_skew_pos_imag").lambda_im.detach().numpy()
    np.testing.assert_allclose(np.sort(got), want, rtol=1e-5)
    assert (got > 0).all()


def test_gradients_finite_at_64k() -> None:
    torch.manual_seed(2)
    m = DSSExp(2, l_max=1 << 16, d_state=16, dt_min=1e-4, dt_max=1e-2)
    m(torch.randn(1, 1 << 16, 2)).square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters())


def test_kernel_gradients_equal_naive_autograd() -> None:
    torch.manual_seed(3)
    H, N, L = 3, 5, 40
    m = DSSExp(H, l_max=L, d_state=N, dt_min=1e-2, dt_max=1e-1, chunk_size=8).double()
    weights = torch.randn(1, H, L, dtype=torch.float64)
    (m.kernel(L) * weights).sum().backward()
    params = (m.log_lambda_re, m.lambda_im, m.log_dt, m.W)
    fast = [p.grad.clone() for p in params]
    ll, li, ld, W = (p.detach().clone().requires_grad_(True) for p in params)
    lam = torch.complex(-torch.exp(ll), li)  # (N,)
    dtl = torch.exp(ld)[:, None] * lam  # (H, N)
    wt = torch.complex(W[0, ..., 0], W[0, ..., 1]) * torch.expm1(dtl) / lam
    k = torch.einsum("hn,hnl->hl", wt, torch.exp(dtl[..., None] * torch.arange(L, dtype=torch.float64))).real
    (k * weights[0]).sum().backward()
    for got, want in zip(fast, (ll.grad, li.grad, ld.grad, W.grad), strict=True):
        torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-8)
