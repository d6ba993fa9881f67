"""The bottleneck readout of MAD's compression task: the whole sequence decoded from the state at its last position.

MAD (Poli et al. 2024) trains compression with an autoencoder (athms/mad-lab `mad/model/auto_encoder.py`): the
encoder's output at the last position is the only thing the decoder sees; a fixed sine/cosine position embedding is
added to it for every output position and a small MLP (norm, Linear, GELU, norm, Linear, GELU, then norm and the
vocabulary projection) emits that position's token. The mixers cannot copy their input to the output here, so token
accuracy measures how much of the sequence one state holds. `SequenceModel(pool="bottleneck")` uses this decoder in
place of its per-position linear one; a task asks for it with `TrainingPolicy(pool="bottleneck")`.

Example:
    >>> import torch
    >>> dec = BottleneckDecoder(16, 10)
    >>> dec(torch.randn(4, 16), seq_len=32, l_output=32).shape
    torch.Size([4, 32, 10])
    >>> dec.decode_each(torch.randn(4, 32, 16)).shape   # each position's state decoded at its own position
    torch.Size([4, 32, 10])
"""

from __future__ import annotations

import torch
from torch import nn


def sincos_positions(n: int, dim: int, *, device: torch.device | None = None) -> torch.Tensor:
    """(n, dim) fixed position embedding: sin(p w_i) in the first dim/2 channels, cos(p w_i) in the rest,
    w_i = 10000^(-i / (dim/2 - 1)) (MAD's decoder embedding; an odd last channel stays 0)."""
    half = dim // 2
    freq = 10000.0 ** (-torch.arange(half, dtype=torch.float64, device=device) / max(half - 1, 1))  # (half,)
    angle = torch.arange(n, dtype=torch.float64, device=device)[:, None] * freq[None]  # (n, half)
    out = torch.zeros(n, dim, dtype=torch.float64, device=device)
    out[:, :half], out[:, half:2 * half] = angle.sin(), angle.cos()
    return out.float()


class BottleneckDecoder(nn.Module):
    """state (B, H) + position embedding (L, H) -> MLP -> (B, L, d_output), MAD's non-expanding MLP decoder."""

    def __init__(self, d_model: int, d_output: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.LayerNorm(d_model), nn.Linear(d_model, d_model), nn.GELU(),
            nn.LayerNorm(d_model), nn.Linear(d_model, d_model), nn.GELU(),
            nn.LayerNorm(d_model), nn.Linear(d_model, d_output))

    def forward(self, state: torch.Tensor, *, seq_len: int, l_output: int) -> torch.Tensor:
        """The rows of the last `l_output` of `seq_len` positions, all decoded from `state` (B, H)."""
        pos = sincos_positions(seq_len, state.shape[-1], device=state.device)[seq_len - l_output:]  # (l_output, H)
        return self.mlp(state[:, None, :] + pos.to(state.dtype))  # (B, l_output, d_output)

    def decode_each(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, H) -> (B, T, d_output): row t decodes the state at t at position t (what the causality check
        compares: it depends on inputs up to t only when the mixers are causal)."""
        pos = sincos_positions(h.shape[1], h.shape[-1], device=h.device)  # (T, H)
        return self.mlp(h + pos.to(h.dtype))
