"""LSTM: torch's `nn.LSTM` as a causal sequence mixer, the classic nonlinear-RNN baseline of state-tracking papers.

Per step, with `[i, f, g, o] = W_ih u_t + b_ih + W_hh h_{t-1} + b_hh` (four blocks of d_hidden rows):
`c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)`, `h_t = sigmoid(o) * tanh(c_t)`, h_{-1} = c_{-1} = 0. The mixer
returns h (B, L, H), through a linear map to H when d_hidden != H (docs/models.md, Reference models). The state is
a nonlinear function of the input, so the layer can track state (parity, modular counting) at any length, which the
linear recurrences here cannot do with eigenvalues in [0, 1]. Causal only: a reversed LSTM would make it two-sided,
which no task here needs.

Example:
    >>> import torch
    >>> layer = LSTM(8, l_max=64)
    >>> layer(torch.randn(2, 64, 8)).shape
    torch.Size([2, 64, 8])
    >>> LSTM(8, l_max=64, d_hidden=16).state_size(64)  # h and c
    32
"""

from __future__ import annotations

from torch import Tensor, nn


class LSTM(nn.Module):
    """LSTM mixer (torch's nn.LSTM, causal only): h_t = sigmoid(o) tanh(c_t), c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g)."""

    packable = False
    """Not stacked into packed runs: `torch.func.vmap` has no batching rule for `aten::lstm` (torch 2.13: "Batching
    rule not implemented for aten::lstm.input. We could not generate a fallback"), so members run one by one."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, d_hidden: int | None = None) -> None:
        """Args:
            d_model: channels H. l_max: longest input length (unused: the recurrence takes any length).
            bidirectional: refused (causal only).
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            d_hidden: LSTM state width (default H); a bias-free linear map takes it back to H when it differs.
        """
        super().__init__()
        if bidirectional:
            raise ValueError("LSTM is causal only; bidirectional=True is refused")
        self.causal, self.l_max = True, l_max
        self.d_hidden = d_hidden or d_model
        if self.d_hidden < 1:
            raise ValueError(f"d_hidden must be >= 1, got {d_hidden}")
        self.lstm = nn.LSTM(d_model, self.d_hidden, batch_first=True)
        self.out = nn.Linear(self.d_hidden, d_model, bias=False) if self.d_hidden != d_model else None

    def state_size(self, seq_len: int) -> int:
        """Recurrent state per example: h and c, d_hidden each."""
        return 2 * self.d_hidden

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` is ignored: the layer is causal, so right padding cannot reach valid
        positions."""
        h, _ = self.lstm(x)  # (B, L, d_hidden)
        return h if self.out is None else self.out(h)  # (B, L, H)
