"""LSTM mixer against a per-step cell loop written from the LSTM equations (float64), gradients included."""

from __future__ import annotations

import pytest
import torch

from ssmbench.reference_models.lstm import LSTM


def cell_loop(layer: LSTM, x: torch.Tensor) -> torch.Tensor:
    """The LSTM equations one step at a time, with the layer's own weights: (B, L, H) -> (B, L, H)."""
    w_ih, w_hh = layer.lstm.weight_ih_l0, layer.lstm.weight_hh_l0  # (4 d, H), (4 d, d): rows i, f, g, o
    bias = layer.lstm.bias_ih_l0 + layer.lstm.bias_hh_l0
    d = layer.d_hidden
    h = x.new_zeros(x.shape[0], d)
    c = x.new_zeros(x.shape[0], d)
    out = []
    for t in range(x.shape[1]):
        z = x[:, t] @ w_ih.T + h @ w_hh.T + bias  # (B, 4 d)
        i, f, g, o = torch.sigmoid(z[:, :d]), torch.sigmoid(z[:, d:2 * d]), torch.tanh(z[:, 2 * d:3 * d]), \
            torch.sigmoid(z[:, 3 * d:])
        c = f * c + i * g
        h = o * torch.tanh(c)
        out.append(h)
    hs = torch.stack(out, 1)  # (B, L, d)
    return hs if layer.out is None else hs @ layer.out.weight.T


@pytest.mark.parametrize("d_hidden", [None, 5])
def test_lstm_equals_the_cell_equations_float64(d_hidden: int | None) -> None:
    torch.manual_seed(0)
    layer = LSTM(6, l_max=50, d_hidden=d_hidden).double()
    x = torch.randn(3, 37, 6, dtype=torch.float64, requires_grad=True)
    got, want = layer(x), cell_loop(layer, x)
    assert got.shape == x.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    w = torch.randn_like(want)
    params = [x, *layer.parameters()]
    for a, b in zip(torch.autograd.grad((got * w).sum(), params), torch.autograd.grad((want * w).sum(), params),
                    strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_lstm_refuses_bidirectional_and_does_not_pack() -> None:
    with pytest.raises(ValueError, match="causal only"):
        LSTM(4, l_max=8, bidirectional=True)
    assert LSTM.packable is False
    assert LSTM(4, l_max=8).causal is True
