"""`conv_layer` (the GELU(K * u + D u) mixer of DLR, DSS_EXP, S4D, S4 and SGConv) against the obvious float64
computation: a Toeplitz matrix of the kernel per channel, the skip, and GELU from its erf formula; outputs and every
gradient. Its output is laid out like its input (D u and GELU do not run on a transposed view)."""

from __future__ import annotations

import math

import pytest
import torch

from ssmbench.reference_models._ssm_kernels import conv_layer


def _slow(x: torch.Tensor, k_fwd: torch.Tensor, k_bwd: torch.Tensor | None, D: torch.Tensor,
          mask: torch.Tensor | None) -> torch.Tensor:
    """y[b, i, h] = sum_j T[h, i, j] x[b, j, h] with T[h, i, j] = k_fwd[h, i - j] (0 <= i - j < L_k) plus
    k_bwd[h, j - i - 1] (1 <= j - i <= L_k); out = GELU(y + D x), GELU(z) = z (1 + erf(z / sqrt 2)) / 2."""
    if mask is not None and k_bwd is not None:
        x = x.masked_fill(mask.unsqueeze(-1), 0.0)
    L, L_k = x.shape[1], k_fwd.shape[-1]
    lag = torch.arange(L)[:, None] - torch.arange(L)[None, :]  # (L, L): i - j
    T = torch.where((lag >= 0) & (lag < L_k), k_fwd[:, lag.clamp(0, L_k - 1)], 0.0)  # (H, L, L)
    if k_bwd is not None:
        T = T + torch.where((-lag >= 1) & (-lag <= L_k), k_bwd[:, (-lag - 1).clamp(0, L_k - 1)], 0.0)
    z = torch.einsum("hij,bjh->bih", T, x) + D * x
    return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))


@pytest.mark.parametrize(("bidirectional", "max_kernel_length", "masked"),
                         [(False, None, False), (False, 7, False), (True, None, True), (True, 5, False)])
def test_conv_layer_equals_the_obvious_float64_computation(bidirectional, max_kernel_length, masked):
    gen = torch.Generator().manual_seed(3)
    B, L, H = 2, 19, 3
    x = torch.randn(B, L, H, generator=gen, dtype=torch.float64, requires_grad=True)
    K = torch.randn(2 if bidirectional else 1, H, L, generator=gen, dtype=torch.float64, requires_grad=True)
    D = torch.randn(H, generator=gen, dtype=torch.float64, requires_grad=True)
    mask = (torch.rand(B, L, generator=gen) < 0.3) if masked else None
    L_k = max_kernel_length or L

    def kernel_fn(n: int) -> torch.Tensor:
        assert n == L_k
        return K[..., :n]

    out = conv_layer(x, kernel_fn, D, bidirectional=bidirectional, max_kernel_length=max_kernel_length, mask=mask)
    want = _slow(x, K[0, :, :L_k], K[1, :, :L_k] if bidirectional else None, D, mask)
    assert out.dtype == torch.float64 and out.shape == (B, L, H)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-12)
    g = torch.randn(B, L, H, generator=gen, dtype=torch.float64)
    got = torch.autograd.grad(out, (x, K, D), g)
    expected = torch.autograd.grad(want, (x, K, D), g)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11)


def test_conv_layer_output_is_laid_out_like_its_input():
    x = torch.randn(2, 32, 4, requires_grad=True)
    K, D = torch.randn(1, 4, 32), torch.randn(4)
    out = conv_layer(x, lambda n: K[..., :n], D, bidirectional=False, max_kernel_length=None, mask=None)
    assert out.is_contiguous() and out.stride() == x.stride()
    out.square().sum().backward()  # the grad flows through the one copy
    assert x.grad is not None and x.grad.is_contiguous()
