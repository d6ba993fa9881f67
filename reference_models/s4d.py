"""S4D: a diagonal state space with per-channel A, zero-order hold and S4D-Lin initialisation.

N counts real state dimensions: N/2 complex modes are stored and their conjugates are implied, so
`K_h[k] = 2 Re sum_n C_hn (exp(dt_h A_hn) - 1) / A_hn * exp(k dt_h A_hn)` (docs/models.md, Reference models). The layer is
`GELU(K * u + D u)`; A, dt and C are per channel, unlike DLR's shared Lambda.

Example:
    >>> import torch
    >>> layer = S4D(8, l_max=64, d_state=16)
    >>> layer(torch.randn(2, 64, 8)).shape
    torch.Size([2, 64, 8])
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._ssm_kernels import conv_layer, ssm_hint, vandermonde, zoh_log_and_scale


class S4D(nn.Module):
    """Diagonal state space S4D (S4D-Lin init): GELU(K * u + D u), A and dt per channel, conjugate pairs."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, d_state: int = 1024, dt_min: float = 1e-3, dt_max: float = 1e-1,
                 max_kernel_length: int | None = None, lr_ssm: float | None = None, lr_max: float = 1e-3,
                 chunk_size: int | None = None) -> None:
        """Args:
            d_model: channels H. l_max: longest input length. bidirectional: two-sided kernel.
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            d_state: N real state dimensions (N/2 complex modes). dt_min, dt_max: log-uniform range of dt_h.
            max_kernel_length: L_k = min(L, max_kernel_length).
            lr_ssm: absolute learning rate of log_dt, log_A_real and A_imag; by default they use
                min(lr_max, the global or SSM learning rate).
            chunk_size: chunk T of the kernel product (default: balanced).
        """
        super().__init__()
        if d_state < 2 or d_state % 2:
            raise ValueError(f"d_state counts real dimensions and must be even and >= 2, got {d_state}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"need 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
        self.d_model, self.l_max, self.d_state = d_model, l_max, d_state
        self.bidirectional, self.causal = bidirectional, not bidirectional
        self.max_kernel_length, self.chunk_size = max_kernel_length, chunk_size
        hint = {"lr_max": lr_max, "weight_decay": 0.0} if lr_ssm is None else {"lr": lr_ssm, "weight_decay": 0.0}
        H, N2 = d_model, d_state // 2
        log_dt = torch.rand(H) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        self.log_dt = ssm_hint(nn.Parameter(log_dt), hint)
        self.log_A_real = ssm_hint(nn.Parameter(torch.full((H, N2), math.log(0.5))), hint)
        self.A_imag = ssm_hint(nn.Parameter(math.pi * torch.arange(N2, dtype=torch.float32).repeat(H, 1)), hint)
        self.C = nn.Parameter(torch.randn(2 if bidirectional else 1, H, N2, 2) * math.sqrt(0.5))
        self.D = nn.Parameter(torch.randn(H))

    def state_size(self, seq_len: int) -> int:
        """Real state entries per example in recurrent form: H x N per direction."""
        return self.d_model * self.d_state * (2 if self.bidirectional else 1)

    def kernel(self, length: int) -> torch.Tensor:
        """Real kernel(s) of shape (C_k, H, length); C_k = 2 when bidirectional."""
        a_re = -torch.exp(self.log_A_real)  # (H, N/2)
        z_re, z_im, s_re, s_im = zoh_log_and_scale(self.log_dt, a_re, self.A_imag, self.C.dtype)  # (H, N/2)
        c_re, c_im = self.C[..., 0], self.C[..., 1]  # (C_k, H, N/2)
        wt_re = 2 * (c_re * s_re - c_im * s_im).transpose(0, 1)  # (H, C_k, N/2)
        wt_im = 2 * (c_re * s_im + c_im * s_re).transpose(0, 1)  # (H, C_k, N/2)
        k_re, _ = vandermonde(wt_re, wt_im, z_re, z_im, length, chunk=self.chunk_size)  # (H, C_k, L_k)
        return k_re.transpose(0, 1)  # (C_k, H, L_k)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding, zeroes padded inputs when bidirectional."""
        return conv_layer(x, self.kernel, self.D, bidirectional=self.bidirectional,
                          max_kernel_length=self.max_kernel_length, mask=mask)
