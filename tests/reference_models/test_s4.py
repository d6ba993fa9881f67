"""S4 against the official state-spaces/s4 code, the float64 recurrence, and its own init.

The fixture `fixtures/s4_official.npz` was made by `fixtures/make_s4.py`, which runs state-spaces/s4
`models/s4/s4.py` (`nplr`, `SSMKernelDPLR`, `FFTConv`) at commit e757cef57d89e448c413de7325ed5601aceaac13 in
float64 with random parameters; the commit is also stored in the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from ssmbench.reference_models.s4 import S4, bilinear_power_correction, hippo_legs_nplr

FIX = np.load(Path(__file__).parent / "fixtures" / "s4_official.npz")
H, N, L_MAX, L_IN = (int(FIX[k]) for k in ("H", "N", "l_max", "l_in"))


def load_official(m: S4, prefix: str) -> None:
    """Copy the official kernel's parameters (same transforms: exp dt, -exp Re A, -Im A) into `m`."""
    with torch.no_grad():
        m.log_dt.copy_(torch.from_numpy(FIX[f"{prefix}_inv_dt"][:, 0]))
        m.log_A_real.copy_(torch.from_numpy(FIX[f"{prefix}_A_real"]))
        m.A_imag.copy_(torch.from_numpy(FIX[f"{prefix}_A_imag"]))
        m.B.copy_(torch.from_numpy(FIX[f"{prefix}_B"][0]))
        m.P.copy_(torch.from_numpy(FIX[f"{prefix}_P"]))
        m.C.copy_(torch.from_numpy(FIX[f"{prefix}_C"]))
        if f"{prefix}_D" in FIX:
            m.D.copy_(torch.from_numpy(FIX[f"{prefix}_D"][0]))


@pytest.mark.parametrize("tag", ["causal", "bidir"])
def test_kernel_and_layer_equal_official_float64(tag: str) -> None:
    m = S4(H, l_max=L_MAX, d_state=N, bidirectional=tag == "bidir").double()
    load_official(m, tag)
    with torch.no_grad():
        k = m.kernel(L_MAX).numpy()
        y = m(torch.from_numpy(FIX[f"{tag}_x"])).numpy()
    want_k, want_y = FIX[f"{tag}_kernel"], FIX[f"{tag}_y"]
    assert np.abs(k - want_k).max() <= 1e-12 * np.abs(want_k).max()
    assert np.abs(y - want_y).max() <= 1e-12 * np.abs(want_y).max()


def test_init_equals_official_nplr_legs() -> None:
    lam, p, b = hippo_legs_nplr(N)
    np.testing.assert_allclose(lam.numpy(), FIX["init_lambda"], atol=1e-12)
    np.testing.assert_allclose(p.numpy(), FIX["init_p"][0], atol=1e-12)
    np.testing.assert_allclose(b.numpy(), FIX["init_b"], atol=1e-12)
    m = S4(5, l_max=L_MAX, d_state=N)
    np.testing.assert_allclose(np.exp(m.log_A_real.detach().numpy()), 0.5, rtol=1e-6)
    np.testing.assert_allclose(m.A_imag.detach().numpy()[2], -FIX["init_lambda"].imag, rtol=1e-6)


@pytest.mark.parametrize("tag", ["causal", "bidir"])
def test_c_tilde_setup_equals_official(tag: str) -> None:
    """C~ = C (I - Ab^L): the official `_setup_C` on random parameters, against `bilinear_power_correction`."""
    c = lambda a: a[..., 0] + 1j * a[..., 1]  # noqa: E731
    lam = -np.exp(FIX[f"setup_{tag}_A_real"]) - 1j * FIX[f"setup_{tag}_A_imag"]
    corr = bilinear_power_correction(torch.from_numpy(lam), torch.from_numpy(c(FIX[f"setup_{tag}_P"])),
                                     torch.from_numpy(FIX[f"setup_{tag}_inv_dt"][:, 0]), L_MAX).numpy()
    raw = c(FIX[f"setup_{tag}_C"])
    got = np.einsum("chn,hnm->chm", np.concatenate([raw, raw.conj()], -1), corr)[..., : N // 2]
    np.testing.assert_allclose(got, c(FIX[f"setup_{tag}_C_tilde"]), atol=1e-12)


def test_kernel_equals_bilinear_recurrence_float64() -> None:
    """K[k] = 2 Re C Ab^k Bb with C = C~ (I - Ab^L)^-1 on the full (conjugate-expanded) state, stepped in float64."""
    torch.manual_seed(3)
    L = 40
    m = S4(2, l_max=L, d_state=8).double()
    with torch.no_grad():
        m.P.add_(0.3 * torch.randn_like(m.P))
        m.log_dt.fill_(np.log(0.05))
    lam = torch.complex(-torch.exp(m.log_A_real), -m.A_imag).detach()
    p = torch.view_as_complex(m.P.detach())
    corr = bilinear_power_correction(lam, p, m.log_dt.detach(), L).numpy()  # (H, N, N)
    ct = torch.view_as_complex(m.C.detach())[0].numpy()
    c = np.einsum("hn,hnm->hm", np.concatenate([ct, ct.conj()], -1), np.linalg.inv(corr))
    lam2 = np.concatenate([lam.numpy(), lam.numpy().conj()], -1)
    p2 = np.concatenate([p.numpy(), p.numpy().conj()], -1)[0]
    b = torch.view_as_complex(m.B.detach()).numpy()
    b2 = np.concatenate([b, b.conj()], -1)
    dt = np.exp(m.log_dt.detach().numpy())
    want = np.zeros((2, L))
    for h in range(2):
        a = np.diag(lam2[h]) - np.outer(p2[h], p2[h].conj())
        inv = np.linalg.inv(np.eye(8) - dt[h] / 2 * a)
        ab, bb = inv @ (np.eye(8) + dt[h] / 2 * a), dt[h] * inv @ b2[h]
        x = bb
        for k in range(L):
            want[h, k] = (c[h] @ x).real  # the conjugate half is included in the expanded sum
            x = ab @ x
    got = m.kernel(L)[0].detach().numpy()
    np.testing.assert_allclose(got, want, atol=1e-10 * np.abs(want).max())


def test_gradients_finite_at_64k_and_float32_close() -> None:
    torch.manual_seed(1)
    m = S4(2, l_max=1 << 16, d_state=16, bidirectional=True)
    m(torch.randn(1, 1 << 16, 2)).square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters())
    k32 = m.kernel(1 << 16).detach().double()
    k64 = m.double().kernel(1 << 16).detach()
    assert (k32 - k64).abs().max() <= 1e-4 * k64.abs().max()


def test_cauchy_gradients_equal_autograd_of_the_plain_sum() -> None:
    """The hand-written Cauchy backward pass against autograd through sum_n v / (z - w) + conjugates (float64)."""
    from ssmbench.reference_models import s4 as s4_module

    torch.manual_seed(4)
    v = torch.randn(3, 4, 5, dtype=torch.complex128, requires_grad=True)
    w = torch.complex(-torch.rand(3, 5, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64))
    w.requires_grad_(True)
    z = torch.randn(7, dtype=torch.complex128)
    g = torch.randn(3, 4, 7, dtype=torch.complex128)
    plain = (torch.cat([v, v.conj()], -1).unsqueeze(-1)
             / (z - torch.cat([w, w.conj()], -1).unsqueeze(-1)).unsqueeze(1)).sum(-2)  # (3, 4, 7)
    want = torch.autograd.grad((plain * g).real.sum(), [v, w])
    block, s4_module.CAUCHY_BLOCK = s4_module.CAUCHY_BLOCK, 3 * 10 * 2  # blocks of two nodes
    try:
        got_r = s4_module.cauchy(v, w, z)
        got = torch.autograd.grad((got_r * g).real.sum(), [v, w])
    finally:
        s4_module.CAUCHY_BLOCK = block
    torch.testing.assert_close(got_r, plain, rtol=1e-12, atol=1e-12)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
