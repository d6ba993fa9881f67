"""DSS_EXP: the diagonal state space of Gupta et al., discretised with zero-order hold, as a long convolution.

`Lambda_n = -exp(l_n) + i b_n` is shared by all channels, each channel has its own step `dt_h`, and
`K_h[k] = Re sum_n W_hn (exp(dt_h Lambda_n) - 1) / Lambda_n * exp(k dt_h Lambda_n)` (docs/models.md, Reference models).
The layer is `GELU(K * u + D u)`, with a two-sided kernel when bidirectional.

Example:
    >>> import torch
    >>> layer = DSSExp(8, l_max=64, d_state=16)
    >>> layer(torch.randn(2, 64, 8)).shape
    torch.Size([2, 64, 8])
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._ssm_kernels import KERNEL_CASTS, cast_kernel, conv_layer, ssm_hint, vandermonde, zoh_log_and_scale

LAMBDA_INITS = ("lin", "lin_2pi", "hippo_skew_pos_imag", "randn")


def hippo_skew_frequencies(n: int) -> torch.Tensor:
    """The n largest imaginary parts of the eigenvalues of the skew part of the 2n x 2n HiPPO-LegS matrix."""
    idx = torch.arange(2 * n, dtype=torch.float64)
    q = torch.sqrt(2 * idx + 1)
    a = torch.tril(q[:, None] * q[None, :], diagonal=-1)  # (2N, 2N), A_ij for i > j
    skew = (a - a.T) / 2
    omega = torch.linalg.eigvalsh(1j * skew.to(torch.complex128))  # i S is Hermitian: real eigenvalues
    return -omega[:n].flip(0)  # eigenvalues of S are i w with w = -(eigenvalue of i S); ascending


class DSSExp(nn.Module):
    """Diagonal state space DSS_EXP: GELU(K * u + D u), K from a zero-order-hold discretised diagonal SSM."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, d_state: int = 1024, dt_min: float = 1e-4, dt_max: float = 1e-2,
                 max_kernel_length: int | None = None, kernel_to_real: str = "real", lambda_init: str = "lin",
                 lr_ssm: float | None = None, lr_lambda: float | None = None,
                 chunk_size: int | None = None) -> None:
        """Args:
            d_model: channels H. l_max: longest input length. bidirectional: two-sided kernel.
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            d_state: N complex modes. dt_min, dt_max: log-uniform range of dt_h.
            max_kernel_length: L_k = min(L, max_kernel_length). kernel_to_real: as for DLR.
            lambda_init: `lin` (-0.5 + i pi n, the authors' final code), `lin_2pi` (-0.5 + 2 pi i n / N, the
                authors' code at ag1988/dlr@27e7287, before the paper), `hippo_skew_pos_imag` or `randn`.
            lr_ssm: learning rate of l, b, W and log_dt. lr_lambda: a separate rate for l and b (PF-512).
            chunk_size: chunk T of the kernel product (default: balanced).
        """
        super().__init__()
        if kernel_to_real not in KERNEL_CASTS:
            raise ValueError(f"kernel_to_real must be one of {KERNEL_CASTS}, got {kernel_to_real!r}")
        if lambda_init not in LAMBDA_INITS:
            raise ValueError(f"lambda_init must be one of {LAMBDA_INITS}, got {lambda_init!r}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"need 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
        self.d_model, self.l_max, self.d_state = d_model, l_max, d_state
        self.bidirectional, self.causal = bidirectional, not bidirectional
        self.max_kernel_length, self.kernel_to_real, self.chunk_size = max_kernel_length, kernel_to_real, chunk_size
        hint = {"weight_decay": 0.0} if lr_ssm is None else {"lr": lr_ssm, "weight_decay": 0.0}
        lam_hint = hint if lr_lambda is None else {"lr": lr_lambda, "weight_decay": 0.0}
        N = d_state
        if lambda_init == "lin":
            b = math.pi * torch.arange(N, dtype=torch.float32)
        elif lambda_init == "lin_2pi":
            b = 2 * math.pi * torch.arange(N, dtype=torch.float32) / N
        elif lambda_init == "hippo_skew_pos_imag":
            b = hippo_skew_frequencies(N).float()
        else:
            b = torch.randn(N)
        self.log_lambda_re = ssm_hint(nn.Parameter(torch.full((N,), math.log(0.5))), lam_hint)  # Re = -exp(l)
        self.lambda_im = ssm_hint(nn.Parameter(b), lam_hint)
        log_dt = torch.rand(d_model) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        self.log_dt = ssm_hint(nn.Parameter(log_dt), hint)
        self.W = ssm_hint(nn.Parameter(torch.randn(2 if bidirectional else 1, d_model, N, 2)), hint)
        self.D = nn.Parameter(torch.randn(d_model))

    def state_size(self, seq_len: int) -> int:
        """Complex state entries per example in recurrent form: H x N per direction."""
        return self.d_model * self.d_state * (2 if self.bidirectional else 1)

    def kernel(self, length: int) -> torch.Tensor:
        """Real kernel(s) of shape (C_k, H, length); C_k = 2 when bidirectional."""
        lam_re = -torch.exp(self.log_lambda_re)  # (N,)
        z_re, z_im, s_re, s_im = zoh_log_and_scale(self.log_dt, lam_re, self.lambda_im, self.W.dtype)  # (H, N)
        w_re, w_im = self.W[..., 0], self.W[..., 1]  # (C_k, H, N)
        wt_re = (w_re * s_re - w_im * s_im).transpose(0, 1)  # (H, C_k, N)
        wt_im = (w_re * s_im + w_im * s_re).transpose(0, 1)  # (H, C_k, N)
        need_imag = self.kernel_to_real != "real"
        k_re, k_im = vandermonde(wt_re, wt_im, z_re, z_im, length, imag=need_imag, chunk=self.chunk_size)
        k = cast_kernel(k_re.transpose(0, 1), None if k_im is None else k_im.transpose(0, 1),
                        self.kernel_to_real)
        return k  # (C_k, H, L_k)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding, zeroes padded inputs when bidirectional."""
        return conv_layer(x, self.kernel, self.D, bidirectional=self.bidirectional,
                          max_kernel_length=self.max_kernel_length, mask=mask)
