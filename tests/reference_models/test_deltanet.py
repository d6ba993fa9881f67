"""DeltaNet: the chunked (WY) form against the step loop, both against the delta rule written as matrices, the
beta ranges, and flash-linear-attention's own pure-PyTorch reference (`fla/ops/delta_rule/naive.py`) where fla is
installed (it is not a dependency; the test skips without it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ssmbench.reference_models import deltanet
from ssmbench.reference_models.deltanet import DeltaNet, delta_rule_chunked, delta_rule_recurrent


def inputs(B: int = 2, h: int = 3, L: int = 23, dk: int = 5, dv: int = 4, beta_max: float = 2.0, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, h, L, dk, generator=g, dtype=torch.float64), dim=-1)
    k = F.normalize(torch.randn(B, h, L, dk, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(B, h, L, dv, generator=g, dtype=torch.float64)
    beta = beta_max * torch.rand(B, h, L, generator=g, dtype=torch.float64)
    return q, k, v, beta


def householder_products(q, k, v, beta):
    """S_t = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T with explicit d_k x d_k matrices, o_t = S_t q_t / sqrt(d_k)."""
    B, h, L, dk = k.shape
    S = v.new_zeros(B, h, v.shape[-1], dk)
    eye = torch.eye(dk, dtype=k.dtype)
    out = []
    for t in range(L):
        kt, b = k[:, :, t, :, None], beta[:, :, t, None, None]  # (B, h, d_k, 1), (B, h, 1, 1)
        S = S @ (eye - b * kt @ kt.mT) + b * v[:, :, t, :, None] @ kt.mT
        out.append((S @ q[:, :, t, :, None])[..., 0] / dk ** 0.5)
    return torch.stack(out, 2)


def test_recurrent_form_is_the_delta_rule_as_written() -> None:
    args = inputs()
    torch.testing.assert_close(delta_rule_recurrent(*args), householder_products(*args), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("L", [1, 7, 16, 23, 64, 65])
@pytest.mark.parametrize("chunk", [1, 4, 8, 16, 64])
@pytest.mark.parametrize("beta_max", [1.0, 2.0])
def test_chunked_equals_recurrent_float64(L: int, chunk: int, beta_max: float) -> None:
    """Across chunk sizes, lengths not divisible by the chunk, shorter than one chunk, and both beta ranges."""
    args = inputs(L=L, beta_max=beta_max, seed=L * 100 + chunk)
    want = delta_rule_recurrent(*args)
    got = delta_rule_chunked(*args, chunk=chunk)
    assert got.shape == want.shape
    assert (got - want).abs().max() <= 1e-10 * want.abs().max()


def test_chunked_gradients_equal_recurrent_float64() -> None:
    args = [t.clone().requires_grad_(True) for t in inputs(L=19, seed=3)]
    w = torch.randn(2, 3, 19, 4, dtype=torch.float64)
    g_chunk = torch.autograd.grad((delta_rule_chunked(*args, chunk=8) * w).sum(), args)
    g_loop = torch.autograd.grad((delta_rule_recurrent(*args) * w).sum(), args)
    for a, b in zip(g_chunk, g_loop, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_beta_range_scales_the_write_strength_and_reaches_negative_eigenvalues(monkeypatch) -> None:
    """The beta handed to the delta rule is sigmoid(W_beta u) for 0_1 and twice that for 0_2: the transition's
    eigenvalue 1 - beta goes below 0 only with 0_2."""
    seen = []
    real = deltanet.delta_rule_chunked
    monkeypatch.setattr(deltanet, "delta_rule_chunked", lambda q, k, v, beta, chunk: seen.append(beta) or
                        real(q, k, v, beta, chunk))
    torch.manual_seed(0)
    layers = {r: DeltaNet(8, l_max=16, n_heads=2, beta_range=r).double() for r in ("0_1", "0_2")}
    layers["0_2"].load_state_dict(layers["0_1"].state_dict())
    x = 3 * torch.randn(2, 16, 8, dtype=torch.float64)
    for layer in layers.values():
        layer(x)
    want = torch.sigmoid(layers["0_1"].beta_proj(x)).transpose(1, 2)  # (B, h, L)
    torch.testing.assert_close(seen[0], want)
    torch.testing.assert_close(seen[1], 2 * want)
    assert (1 - seen[1]).min() < 0 < (1 - seen[0]).min()
    with pytest.raises(ValueError, match="beta_range"):
        DeltaNet(8, l_max=16, beta_range="-1_1")


@pytest.mark.parametrize("conv_size", [0, 4])
def test_layer_modes_agree_and_the_layer_is_causal(conv_size: int) -> None:
    torch.manual_seed(1)
    chunked = DeltaNet(12, l_max=40, n_heads=3, conv_size=conv_size, chunk_size=8, beta_range="0_2").double()
    loop = DeltaNet(12, l_max=40, n_heads=3, conv_size=conv_size, mode="recurrent", beta_range="0_2").double()
    loop.load_state_dict(chunked.state_dict())
    x = torch.randn(2, 37, 12, dtype=torch.float64)
    y = chunked(x)
    torch.testing.assert_close(y, loop(x), rtol=1e-10, atol=1e-10)
    x2 = x.clone()
    x2[:, 20:] = torch.randn(2, 17, 12, dtype=torch.float64)
    torch.testing.assert_close(chunked(x2)[:, :20], y[:, :20], rtol=0, atol=0)


def _fla_naive():
    """fla's `delta_rule_recurrence` / `delta_rule_chunkwise`, loaded from its file: importing the `fla` package
    itself needs triton, which has no CPU wheel here."""
    spec = importlib.util.find_spec("fla")
    if spec is None or spec.origin is None:
        pytest.skip("flash-linear-attention is not installed")
    path = Path(spec.origin).parent / "ops" / "delta_rule" / "naive.py"
    if not path.exists():
        pytest.skip(f"no {path} in this flash-linear-attention")
    module_spec = importlib.util.spec_from_file_location("fla_delta_rule_naive", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except ImportError as exc:  # einops missing
        pytest.skip(f"fla's naive delta rule does not import: {exc}")
    return module


@pytest.mark.parametrize("beta_max", [1.0, 2.0])
def test_against_flash_linear_attention_naive_reference(beta_max: float) -> None:
    """fla's step loop (it runs in float32 whatever the input) and its chunkwise form (float64, L a multiple of
    its chunk) on (B, h, L, d) inputs; fla stores S as d_k x d_v, so the same rule up to a transpose."""
    naive = _fla_naive()
    q, k, v, beta = inputs(L=64, dk=8, dv=6, beta_max=beta_max, seed=7)
    ours = delta_rule_recurrent(q, k, v, beta)
    theirs, _ = naive.delta_rule_recurrence(q, k, v, beta)
    assert (theirs.double() - ours).abs().max() <= 1e-5 * ours.abs().max()
    theirs64, _ = naive.delta_rule_chunkwise(q, k, v, beta, chunk_size=16)
    assert (theirs64 - delta_rule_chunked(q, k, v, beta, chunk=16)).abs().max() <= 1e-10 * ours.abs().max()
