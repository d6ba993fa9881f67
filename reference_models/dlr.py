"""DLR: the diagonal linear RNN layer of Gupta, Mehta and Berant, computed as a long FFT convolution.

Each channel h convolves its input with `K_h[k] = cast(sum_n W_hn Lambda_n^k)`, where one Lambda vector,
`Lambda_n = exp(-a_n^2 + i b_n)`, is shared by all channels (and by both directions when bidirectional), then
adds `D * u` and applies GELU (docs/models.md, Reference models). Complex numbers stay inside; parameters are real.

Example:
    >>> import torch
    >>> layer = DLR(8, l_max=64, d_state=16, kernel_to_real="prod")
    >>> layer(torch.randn(2, 64, 8)).shape
    torch.Size([2, 64, 8])
    >>> layer.causal, DLR(8, l_max=64, d_state=16, bidirectional=True).causal
    (True, False)
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._ssm_kernels import KERNEL_CASTS, cast_kernel, conv_layer, ssm_hint, vandermonde

VARIANTS = ("complex", "lambda_imag", "lambda_imag_w_real", "real")


class DLR(nn.Module):
    """Diagonal linear RNN (DLR, DLR-prod, DLR-R): GELU(K * u + D u) with K_h[k] = cast(sum_n W_hn Lambda_n^k)."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, d_state: int = 1024, dt_min: float = 1e-4, dt_max: float = 1e-1,
                 max_kernel_length: int | None = None, kernel_to_real: str = "real", variant: str = "complex",
                 lambda_init: str = "omega", w_scale: float | None = None,
                 separate_bidirectional_lambda: bool = False, lr_ssm: float | None = None,
                 chunk_size: int | None = None) -> None:
        """Args:
            d_model: channels H. l_max: longest input length (the kernel is sized per call).
            bidirectional: two-sided kernel (forward kernel from lag 0, backward kernel from lag 1).
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            d_state: N complex modes. dt_min, dt_max: range of dt, with Re log Lambda = -dt / 2 at init.
            max_kernel_length: L_k = min(L, max_kernel_length).
            kernel_to_real: `real` (DLR), `prod` (DLR-prod), `imag`, `sum`, `real_prod`.
            variant: `complex`, `lambda_imag` (|Lambda| = 1), `lambda_imag_w_real`, `real` (DLR-R).
            lambda_init: `omega` (b_n = 2 pi n / N) or `randn`. w_scale: std of Re W, Im W (default 1/N).
            separate_bidirectional_lambda: one Lambda per direction (the paper's Eq. 5).
            lr_ssm: learning rate of a, b and W (default: the harness's SSM or global rate).
            chunk_size: chunk T of the kernel product (default: balanced).
        """
        super().__init__()
        if kernel_to_real not in KERNEL_CASTS:
            raise ValueError(f"kernel_to_real must be one of {KERNEL_CASTS}, got {kernel_to_real!r}")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if variant == "real" and kernel_to_real != "real":
            raise ValueError(f"variant 'real' has Im K = 0; kernel_to_real must be 'real', got {kernel_to_real!r}")
        if lambda_init not in ("omega", "randn"):
            raise ValueError(f"lambda_init must be 'omega' or 'randn', got {lambda_init!r}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"need 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
        self.d_model, self.l_max, self.d_state = d_model, l_max, d_state
        self.bidirectional, self.causal = bidirectional, not bidirectional
        self.max_kernel_length, self.kernel_to_real, self.variant = max_kernel_length, kernel_to_real, variant
        self.chunk_size = chunk_size
        hint = {"weight_decay": 0.0} if lr_ssm is None else {"lr": lr_ssm, "weight_decay": 0.0}
        n_dir = 2 if bidirectional else 1
        n_lam = n_dir if separate_bidirectional_lambda and bidirectional else 1
        N = d_state

        if variant in ("complex", "real"):
            log_dt = torch.rand(n_lam, N) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)  # (G, N)
            self.a = ssm_hint(nn.Parameter(torch.sqrt(torch.exp(log_dt) / 2)), hint)  # Re log Lambda = -a^2
        else:
            self.register_parameter("a", None)
        if variant != "real":
            if lambda_init == "omega":
                b = (2 * math.pi / N * torch.arange(N, dtype=torch.float64)).float().expand(n_lam, N).clone()
            else:
                b = torch.randn(n_lam, N)  # (G, N)
            self.b = ssm_hint(nn.Parameter(b), hint)
        else:
            self.register_parameter("b", None)
        sigma = 1.0 / N if w_scale is None else w_scale
        w_shape = (n_dir, d_model, N, 2) if variant in ("complex", "lambda_imag") else (n_dir, d_model, N)
        self.W = ssm_hint(nn.Parameter(torch.randn(w_shape) * sigma), hint)
        self.D = nn.Parameter(torch.randn(d_model))

    def state_size(self, seq_len: int) -> int:
        """Complex state entries per example in recurrent form: H x N per direction."""
        return self.d_model * self.d_state * (2 if self.bidirectional else 1)

    def kernel(self, length: int) -> torch.Tensor:
        """Real kernel(s) of shape (C_k, H, length); C_k = 2 when bidirectional."""
        n_dir, H, N = self.W.shape[0], self.W.shape[1], self.d_state
        w_re = self.W[..., 0] if self.W.dim() == 4 else self.W  # (C_k, H, N)
        w_im = self.W[..., 1] if self.W.dim() == 4 else torch.zeros_like(w_re)  # (C_k, H, N)
        log_re = -self.a * self.a if self.a is not None else None  # (G, N)
        n_lam = (self.a if self.a is not None else self.b).shape[0]
        if n_lam == 1:  # shared Lambda: one product for all directions and channels
            w_re, w_im = w_re.reshape(1, n_dir * H, N), w_im.reshape(1, n_dir * H, N)  # (1, C_k H, N)
        need_imag = self.kernel_to_real != "real"
        k_re, k_im = vandermonde(w_re, w_im, log_re, self.b, length, imag=need_imag, chunk=self.chunk_size)
        k = cast_kernel(k_re.reshape(n_dir, H, length),
                        None if k_im is None else k_im.reshape(n_dir, H, length), self.kernel_to_real)
        return k  # (C_k, H, L_k)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding, zeroes padded inputs when bidirectional."""
        return conv_layer(x, self.kernel, self.D, bidirectional=self.bidirectional,
                          max_kernel_length=self.max_kernel_length, mask=mask)
