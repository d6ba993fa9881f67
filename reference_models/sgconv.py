"""SGConv (structured global convolution, Li et al. 2022) as the DLR paper's Table 2 runs it.

The kernel is a concatenation of scales: scale i is a learned vector w_i of length d, linearly interpolated by
`2^max(0, i-1)` and weighted by `alpha^i` (alpha per channel, learned), so the scales cover lags
`[0, d), [d, 2d), [2d, 4d), ...`, enough scales to reach l_max. The kernel is divided by its norm at init (kept as a
buffer), and the layer is `GELU(K * u + D u)` (docs/models.md, Reference models). Table 2: d = 4096, w_i ~
N(0, d^-2), the number of scales from l_max, alpha starting at `alpha_min = alpha_max`.

Example:
    >>> import torch
    >>> layer = SGConv(8, l_max=64, kernel_dim=16)
    >>> layer(torch.randn(2, 64, 8)).shape
    torch.Size([2, 64, 8])
    >>> layer.n_scales, layer.kernel(64).shape
    (3, torch.Size([1, 8, 64]))
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._ssm_kernels import conv_layer, ssm_hint


def n_scales_for(l_max: int, kernel_dim: int) -> int:
    """Fewest scales S with d (1 + 2^0 + ... + 2^(S-2)) = d 2^(S-1) >= l_max (at least one).

    Equal to the DLR code's `ceil(1 + log2(max(l_max / d, 2) - 1))` when l_max / d is a power of two >= 4 (every
    Table 2 length); that formula falls one scale short at other ratios (l_max = 2d, 5d, ...).
    """
    return 1 + max(0, math.ceil(math.log2(l_max / kernel_dim) - 1e-12))


class SGConv(nn.Module):
    """Structured global convolution SGConv: GELU(K * u + D u), K = concat_i alpha^i interp(w_i, 2^max(0,i-1))."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, kernel_dim: int = 64, n_scales: int | None = None, alpha_min: float = 0.5,
                 alpha_max: float = 1.0, w_scale: float | None = None, max_kernel_length: int | None = None,
                 lr_ssm: float | None = None) -> None:
        """Args:
            d_model: channels H. l_max: longest input length; it sets the number of scales.
            bidirectional: a second set of scales gives the backward kernel (from lag 1).
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            kernel_dim: d, the length of each scale's vector (Table 2: 4096).
            n_scales: number of scales (default: enough for l_max, see `n_scales_for`).
            alpha_min, alpha_max: alpha ~ U[alpha_min, alpha_max] per channel at init.
            w_scale: std of w_i (default 1/d). max_kernel_length: L_k = min(L, max_kernel_length).
            lr_ssm: learning rate of w_i and alpha (default: the harness's SSM or global rate).
        """
        super().__init__()
        if kernel_dim < 1:
            raise ValueError(f"kernel_dim must be >= 1, got {kernel_dim}")
        if not 0 < alpha_min <= alpha_max:
            raise ValueError(f"need 0 < alpha_min <= alpha_max, got {alpha_min}, {alpha_max}")
        self.d_model, self.l_max, self.kernel_dim = d_model, l_max, kernel_dim
        self.bidirectional, self.causal = bidirectional, not bidirectional
        self.max_kernel_length = max_kernel_length
        self.n_scales = n_scales or n_scales_for(l_max, kernel_dim)
        hint = {"weight_decay": 0.0} if lr_ssm is None else {"lr": lr_ssm, "weight_decay": 0.0}
        C_k = 2 if bidirectional else 1
        sigma = 1.0 / kernel_dim if w_scale is None else w_scale
        self.ws = nn.ParameterList([ssm_hint(nn.Parameter(torch.randn(C_k, d_model, kernel_dim) * sigma), hint)
                                    for _ in range(self.n_scales)])  # each (C_k, H, d)
        self.alpha = ssm_hint(nn.Parameter(alpha_min + (alpha_max - alpha_min) * torch.rand(C_k, d_model)), hint)
        self.D = nn.Parameter(torch.randn(d_model))
        with torch.no_grad():
            self.register_buffer("k_norm", self._raw_kernel().norm(dim=-1, keepdim=True))  # (C_k, H, 1)

    def state_size(self, seq_len: int) -> int:
        """A convolution has no finite recurrent state: the past inputs the kernel reaches, H x min(L, kernel)."""
        return self.d_model * min(seq_len, self.kernel_dim << (self.n_scales - 1)) * (2 if self.bidirectional else 1)

    def _raw_kernel(self) -> torch.Tensor:
        """Concatenated scales before normalisation: (C_k, H, d 2^(S-1))."""
        parts = [F.interpolate(w, scale_factor=2 ** max(0, i - 1), mode="linear") * self.alpha.unsqueeze(-1) ** i
                 for i, w in enumerate(self.ws)]  # each (C_k, H, d 2^max(0, i-1))
        return torch.cat(parts, -1)

    def kernel(self, length: int) -> torch.Tensor:
        """Real kernel(s) of shape (C_k, H, length); C_k = 2 when bidirectional."""
        k = self._raw_kernel()
        if length > k.shape[-1]:
            raise ValueError(f"SGConv's {self.n_scales} scales of {self.kernel_dim} cover {k.shape[-1]} lags, input "
                             f"needs {length}; build it with l_max >= the input length")
        return (k / self.k_norm)[..., :length]  # (C_k, H, length)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding, zeroes padded inputs when bidirectional."""
        return conv_layer(x, self.kernel, self.D, bidirectional=self.bidirectional,
                          max_kernel_length=self.max_kernel_length, mask=mask)
