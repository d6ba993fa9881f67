"""ATTENTION: fused path vs a naive float64 implementation (explicit RoPE rotation, mask, softmax), counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import erf

from ssmbench.api import Spec
from ssmbench.harness.models.backbone import SequenceModel
from ssmbench.reference_models.attention import Attention


def naive(m: Attention, u: np.ndarray, allowed: np.ndarray, temperature: float) -> np.ndarray:
    """u + GELU(O(softmax(t q k^T + mask) v)) with RoPE as explicit 2 x 2 rotations, in float64."""
    p = {n: t.detach().double().numpy() for n, t in m.named_parameters()}
    B, L, H = u.shape
    nh = m.proj.n_heads
    d = H // nh

    def heads(x: np.ndarray) -> np.ndarray:
        return x.reshape(B, L, nh, d).transpose(0, 2, 1, 3)

    q, k, v = (heads(u @ p[f"proj.{n}.weight"].T + p[f"proj.{n}.bias"]) for n in "qkv")
    if m.rope:
        for x in (q, k):
            for pos in range(L):
                for j in range(d // 2):
                    phi = pos * 10000.0 ** (-2 * j / d)
                    rot = np.array([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]])
                    x[:, :, pos, 2 * j:2 * j + 2] = x[:, :, pos, 2 * j:2 * j + 2] @ rot.T
    s = temperature * q @ k.transpose(0, 1, 3, 2)
    s = np.where(allowed, s, -np.inf)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    o = (a @ v).transpose(0, 2, 1, 3).reshape(B, L, H) @ p["proj.o.weight"].T + p["proj.o.bias"]
    return u + 0.5 * o * (1 + erf(o / math.sqrt(2)))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_fused_equals_naive_float64(bidirectional: bool) -> None:
    torch.manual_seed(0)
    L, H = 23, 16
    m = Attention(H, l_max=L, bidirectional=bidirectional).double()
    with torch.no_grad():
        m.temperature.fill_(0.7)  # a learned value, not the init
    u = torch.randn(2, L, H, dtype=torch.float64)
    allowed = np.ones((L, L), bool) if bidirectional else np.tril(np.ones((L, L), bool))
    np.testing.assert_allclose(m(u).detach().numpy(), naive(m, u.numpy(), allowed, 0.7), atol=1e-12)
    np.testing.assert_allclose(m.float()(u.float()).detach().numpy(), naive(m, u.numpy(), allowed, 0.7),
                               atol=1e-5)


def test_padding_mask_hides_padded_keys_when_bidirectional() -> None:
    torch.manual_seed(1)
    m = Attention(8, l_max=12, bidirectional=True)
    u = torch.randn(1, 12, 8)
    mask = torch.zeros(1, 12, dtype=torch.bool)
    mask[:, 9:] = True
    u2 = u.clone()
    u2[:, 9:] = torch.randn(1, 3, 8)
    torch.testing.assert_close(m(u, mask=mask)[:, :9], m(u2, mask=mask)[:, :9])


def test_temperature_init_and_ff_option() -> None:
    m = Attention(128, l_max=8)
    assert float(m.temperature.detach()) == pytest.approx(32 ** -0.5)
    assert sum(p.numel() for p in Attention(128, l_max=8, attn_ff=16).parameters()) == 66_049 + 2 * 526_720


def _spec() -> Spec:
    return Spec(fields={}, input_kind="real", d_input=3, seq_len=4096, target_kind="regress", d_output=1,
                l_output=4096, ignore_index=None, causal=True, input_scale=None, metrics=("r2",))


def test_parameter_counts_of_paper_tables_1_and_4() -> None:
    def count(**kw: object) -> int:
        return sum(p.numel() for p in SequenceModel(_spec(), Attention, d_model=128, **kw).parameters())

    assert count() == 66_048 + 1 + 16_512 + 2 + 641  # 83.2K, "83K"
    assert round(count(n_layers=2) / 1e3) == 166
    assert round(count(mixer_kwargs={"attn_ff": 16}) / 1e4) == 114  # "1.1M"
