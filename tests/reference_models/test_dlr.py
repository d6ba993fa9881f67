"""DLR: FFT convolution vs the explicit float64 recurrence, casts, bidirectional Toeplitz, phase accuracy, counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import erf

from ssmbench.api import Spec
from ssmbench.harness.models.backbone import SequenceModel
from ssmbench.reference_models.dlr import DLR


def gelu(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1 + erf(z / math.sqrt(2)))


def params(m: DLR, direction: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(Lambda (N,), W (H, N)) as complex128 numpy arrays."""
    g = direction if (m.a if m.a is not None else m.b).shape[0] > 1 else 0
    a = m.a.detach().double().numpy()[g] if m.a is not None else 0.0
    b = m.b.detach().double().numpy()[g] if m.b is not None else 0.0
    w = m.W.detach().double().numpy()[direction]
    w = w[..., 0] + 1j * w[..., 1] if w.ndim == 3 else w.astype(complex)
    return np.exp(-a ** 2 + 1j * b), w


def recurrence(lam: np.ndarray, w: np.ndarray, u: np.ndarray, L_k: int | None = None) -> tuple:
    """x_k = lam x_{k-1} + u_k, y_k = <W_h, x_k> (complex), with kernels truncated to L_k by subtraction."""
    B, L, H = u.shape
    x = np.zeros((B, H, lam.shape[0]), complex)
    ys = []
    for k in range(L):
        x = lam * x + u[:, k, :, None]
        if L_k is not None and k >= L_k:  # remove the contribution of u_{k - L_k}
            x = x - lam ** L_k * u[:, k - L_k, :, None]
        ys.append((w * x).sum(-1))
    return np.stack(ys, 1)  # (B, L, H) complex


def explicit_kernel(lam: np.ndarray, w: np.ndarray, L: int) -> np.ndarray:
    """K[h, k] = sum_n W_hn lam_n^k by repeated multiplication, complex128 (H, L)."""
    p = np.ones_like(lam)
    out = []
    for _ in range(L):
        out.append(w @ p)
        p = p * lam
    return np.stack(out, 1)


@pytest.mark.parametrize("variant", ["complex", "lambda_imag", "lambda_imag_w_real", "real"])
def test_fft_conv_equals_float64_recurrence(variant: str) -> None:
    torch.manual_seed(0)
    H, N, L = 3, 8, 100
    m = DLR(H, l_max=L, d_state=N, variant=variant, lambda_init="randn", chunk_size=16).double()
    with torch.no_grad():
        m.W.mul_(N)  # make the convolution term comparable to D * u
    u = torch.randn(2, L, H, dtype=torch.float64)
    lam, w = params(m)
    expect = gelu(recurrence(lam, w, u.numpy()).real + m.D.detach().numpy() * u.numpy())
    np.testing.assert_allclose(m(u).detach().numpy(), expect, atol=1e-10)
    got32 = m.float()(u.float()).detach().double().numpy()
    np.testing.assert_allclose(got32, expect, atol=5e-5 * np.abs(expect).max())


def test_max_kernel_length_truncates_the_recurrence() -> None:
    torch.manual_seed(1)
    H, N, L, L_k = 2, 6, 64, 20
    m = DLR(H, l_max=L, d_state=N, max_kernel_length=L_k, dt_min=1e-3, dt_max=1e-3).double()
    with torch.no_grad():
        m.W.mul_(N)
    u = torch.randn(1, L, H, dtype=torch.float64)
    lam, w = params(m)
    expect = gelu(recurrence(lam, w, u.numpy(), L_k).real + m.D.detach().numpy() * u.numpy())
    np.testing.assert_allclose(m(u).detach().numpy(), expect, atol=1e-10)


@pytest.mark.parametrize("cast", ["prod", "imag", "sum", "real_prod"])
def test_kernel_casts_match_explicit_kernel(cast: str) -> None:
    torch.manual_seed(2)
    H, N, L = 4, 8, 77
    m = DLR(H, l_max=L, d_state=N, kernel_to_real=cast, chunk_size=8).double()
    lam, w = params(m)
    k = explicit_kernel(lam, w, L)
    want = {"prod": k.real * k.imag, "imag": k.imag, "sum": k.real + k.imag,
            "real_prod": np.concatenate([k.real[:H // 2], (k.real * k.imag)[H // 2:]])}[cast]
    np.testing.assert_allclose(m.kernel(L)[0].detach().numpy(), want, atol=1e-14)


@pytest.mark.parametrize("separate", [False, True])
@pytest.mark.parametrize("L_k", [None, 13])
def test_bidirectional_equals_explicit_toeplitz_product(separate: bool, L_k: int | None) -> None:
    torch.manual_seed(3)
    H, N, L = 2, 6, 40
    m = DLR(H, l_max=L, d_state=N, bidirectional=True, max_kernel_length=L_k,
            separate_bidirectional_lambda=separate).double()
    assert not m.causal
    length = L_k or L
    kf = explicit_kernel(*params(m, 0), length).real
    kb = explicit_kernel(*params(m, 1), length).real
    toeplitz = np.zeros((H, L, L))
    for i in range(L):
        for j in range(L):
            if 0 <= i - j < length:
                toeplitz[:, i, j] = kf[:, i - j]
            elif 1 <= j - i <= length:
                toeplitz[:, i, j] = kb[:, j - i - 1]
    u = torch.randn(2, L, H, dtype=torch.float64)
    conv = np.einsum("hij,bjh->bih", toeplitz, u.numpy())
    expect = gelu(conv + m.D.detach().numpy() * u.numpy())
    np.testing.assert_allclose(m(u).detach().numpy(), expect, atol=1e-12)


def test_float32_kernel_keeps_float64_phase_accuracy_at_64k() -> None:
    """Pitfall 1: a float32 phase loses ~1e-3; the chunked product with float64 phases stays near 1e-6."""
    torch.manual_seed(4)
    H, N, L = 2, 16, 1 << 16
    m = DLR(H, l_max=L, d_state=N, dt_min=1e-5, dt_max=1e-5)
    lam, w = params(m)
    a, b = m.a.detach().double().numpy()[0], m.b.detach().double().numpy()[0]
    k = np.arange(L)
    ref = (w @ (np.exp(-np.outer(a ** 2, k)) * np.exp(1j * np.remainder(np.outer(b, k), 2 * np.pi)))).real
    got = m.kernel(L)[0].detach().double().numpy()
    err = np.abs(got - ref).max() / np.abs(ref).max()
    naive = (m.W[0, ..., 0] + 1j * m.W[0, ..., 1]) @ torch.exp(
        torch.complex(-m.a[0] ** 2, m.b[0])[:, None] * torch.arange(L))  # Figure 4: float32 phase
    naive_err = np.abs(naive.real.detach().double().numpy() - ref).max() / np.abs(ref).max()
    assert err < 1e-5 < naive_err


def test_init_and_hints() -> None:
    N = 64
    m = DLR(8, l_max=32, d_state=N, dt_min=1e-4, dt_max=1e-1)
    np.testing.assert_allclose(m.b.detach().numpy()[0], 2 * np.pi * np.arange(N) / N, rtol=1e-6)
    dt = 2 * m.a.detach() ** 2
    assert float(dt.min()) >= 1e-4 * 0.999 and float(dt.max()) <= 1e-1 * 1.001
    assert abs(float(m.W.detach().std()) * N - 1) < 0.1
    for name in ("a", "b", "W"):
        assert getattr(m, name)._optim == {"weight_decay": 0.0}
    assert not hasattr(m.D, "_optim")
    assert DLR(8, l_max=32, d_state=4, lr_ssm=3e-4).W._optim == {"lr": 3e-4, "weight_decay": 0.0}


def test_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="kernel_to_real"):
        DLR(4, l_max=8, kernel_to_real="abs")
    with pytest.raises(ValueError, match="Im K = 0"):
        DLR(4, l_max=8, variant="real", kernel_to_real="prod")


def _spec(d_input: int = 3) -> Spec:
    return Spec(fields={}, input_kind="real", d_input=d_input, seq_len=4096, target_kind="regress", d_output=1,
                l_output=4096, ignore_index=None, causal=True, input_scale=None, metrics=("r2",))


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_of_paper_tables_1_and_2() -> None:
    one = _count(SequenceModel(_spec(), DLR, d_model=128, mixer_kwargs={"d_state": 4096}))
    assert one == 1_048_576 + 8_192 + 128 + 16_512 + 2 + 512 + 129  # ~1.07M, "1.1M"
    six = _count(SequenceModel(_spec(), DLR, d_model=128, n_layers=6, mixer_kwargs={"d_state": 4096}))
    assert round(six / 1e4) == 644  # "6.4M"
    assert round(_count(SequenceModel(_spec(), DLR, d_model=32, mixer_kwargs={"d_state": 4096})) / 1e3) == 272
    assert round(_count(SequenceModel(_spec(), DLR, d_model=32, mixer_kwargs={"d_state": 512})) / 1e3) == 35
    real = _count(SequenceModel(_spec(), DLR, d_model=32, mixer_kwargs={"d_state": 4096, "variant": "real"}))
    assert abs(real - 137_000) < 1_000  # DLR-R, "137K"


def test_gradients_finite_at_64k() -> None:
    torch.manual_seed(5)
    m = DLR(2, l_max=1 << 16, d_state=16, kernel_to_real="prod", dt_min=1e-5, dt_max=1e-5)
    x = torch.randn(1, 1 << 16, 2)
    m(x).square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters())


def test_kernel_gradients_equal_naive_autograd() -> None:
    """The chunked product's hand-written table backward matches autograd through the explicit formula."""
    torch.manual_seed(6)
    H, N, L = 3, 5, 50
    m = DLR(H, l_max=L, d_state=N, kernel_to_real="prod", chunk_size=8, lambda_init="randn").double()
    weights = torch.randn(1, H, L, dtype=torch.float64)
    (m.kernel(L) * weights).sum().backward()
    fast = [p.grad.clone() for p in (m.a, m.b, m.W)]
    a, b, W = (p.detach().clone().requires_grad_(True) for p in (m.a, m.b, m.W))
    k = torch.complex(W[0, ..., 0], W[0, ..., 1]) @ torch.exp(torch.complex(-a[0] ** 2, b[0])[:, None]
                                                              * torch.arange(L, dtype=torch.float64))
    ((k.real * k.imag) * weights[0]).sum().backward()
    for got, want in zip(fast, (a.grad, b.grad, W.grad), strict=True):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-9)
