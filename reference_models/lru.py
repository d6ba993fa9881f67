"""LRU: the Linear Recurrent Unit of Orvieto et al., run with a chunked, hierarchical parallel scan.

`x_k = Lambda x_{k-1} + exp(gamma_log) * (B u_k)`, `y_k = Re(C x_k) + D u_k`, with
`Lambda = exp(-exp(nu_log) + i exp(theta_log))` initialised uniformly on a ring r_min <= |Lambda| <= r_max with
phase in [0, max_phase], and `gamma = sqrt(1 - |Lambda|^2)` (models.md section 9). The mixer returns GELU(y).
Bidirectional: a second scan over the reversed sequence shares Lambda, gamma and B and has its own C.

Example:
    >>> import torch
    >>> layer = LRU(8, l_max=64, d_state=16)
    >>> layer(torch.randn(2, 64, 8)).shape
    torch.Size([2, 64, 8])
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def chunked_scan(v: torch.Tensor, log_lam: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    """All states of x_k = lam * x_{k-1} + v_k (x_{-1} = 0), for lam = exp(log_lam).

    Inside a chunk of T steps the states are one matrix product with the Toeplitz matrix lam^(t-s), t >= s; the
    final states of the chunks form a recurrence with lam^T, solved by the same function (so the depth is
    log_T L), and each chunk then adds lam^(t+1) times the state carried in.

    Args:
        v: (B, L, N) complex inputs. log_lam: (N,) complex log of the diagonal. chunk: T.

    Returns:
        (B, L, N) complex states.
    """
    Bsz, L, N = v.shape
    T = min(chunk, L)
    n_chunks = -(-L // T)
    if n_chunks * T != L:
        v = torch.cat([v, v.new_zeros(Bsz, n_chunks * T - L, N)], dim=1)  # (B, C T, N)
    log_lam = log_lam.to(torch.complex128)  # powers with float64 phases: k * theta reaches 1e5 rad
    steps = torch.arange(T, device=v.device, dtype=torch.float64)
    lag = steps[:, None] - steps[None, :]  # (T, T)
    toeplitz = torch.exp(lag.clamp(min=0)[..., None] * log_lam) * (lag >= 0)[..., None]  # (T, T, N)
    toeplitz = toeplitz.to(v.dtype)  # zero above the diagonal
    vc = v.reshape(Bsz, n_chunks, T, N)  # (B, C, T, N)
    local = torch.einsum("tsn,bcsn->bctn", toeplitz, vc)  # (B, C, T, N)
    if n_chunks > 1:
        ends = chunked_scan(local[:, :, -1], T * log_lam, chunk)  # (B, C, N) state at the end of chunk c
        carry = torch.cat([ends.new_zeros(Bsz, 1, N), ends[:, :-1]], dim=1)  # (B, C, N) state entering c
        decay = torch.exp((steps + 1)[:, None] * log_lam).to(v.dtype)  # (T, N)
        local = local + carry[:, :, None, :] * decay  # (B, C, T, N)
    return local.reshape(Bsz, n_chunks * T, N)[:, :L]  # (B, L, N)


class LRU(nn.Module):
    """Linear Recurrent Unit: GELU(Re(C x_k) + D u_k), x_k = Lambda x_{k-1} + gamma * (B u_k), ring init."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, d_state: int = 256, r_min: float = 0.9, r_max: float = 0.999,
                 max_phase: float = 2 * math.pi, lr_factor: float = 0.5, scan_chunk: int = 64) -> None:
        """Args:
            d_model: channels H. l_max: longest input length. bidirectional: add a reversed scan with its own C.
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            d_state: N complex states. r_min, r_max: ring of |Lambda| at init. max_phase: phase range at init.
            lr_factor: nu_log, theta_log, gamma_log and B train at lr * lr_factor, without weight decay.
            scan_chunk: chunk T of the scan.
        """
        super().__init__()
        if not 0.0 <= r_min < r_max <= 1.0:
            raise ValueError(f"need 0 <= r_min < r_max <= 1, got {r_min}, {r_max}")
        if not 0.0 < max_phase <= 2 * math.pi:
            raise ValueError(f"max_phase must be in (0, 2 pi], got {max_phase}")
        self.d_model, self.l_max, self.d_state, self.scan_chunk = d_model, l_max, d_state, scan_chunk
        self.bidirectional, self.causal = bidirectional, not bidirectional
        hint = {"lr_scale": lr_factor, "weight_decay": 0.0}
        N, H = d_state, d_model
        u1 = torch.rand(N, dtype=torch.float64).clamp(1e-7, 1 - 1e-7)  # clamped: finite logs (pitfall 18)
        u2 = torch.rand(N, dtype=torch.float64).clamp(1e-7, 1 - 1e-7)
        nu_log = torch.log(-0.5 * torch.log(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2))
        theta_log = torch.log(max_phase * u2)
        modulus = torch.exp(-torch.exp(nu_log))
        self.nu_log = nn.Parameter(nu_log.float())
        self.theta_log = nn.Parameter(theta_log.float())
        self.gamma_log = nn.Parameter(torch.log(torch.sqrt(1 - modulus ** 2)).float())
        self.B = nn.Parameter(torch.randn(N, H, 2) / math.sqrt(2 * H))
        for p in (self.nu_log, self.theta_log, self.gamma_log, self.B):
            p._optim = dict(hint)  # type: ignore[attr-defined]
        self.C = nn.Parameter(torch.randn(2 if bidirectional else 1, H, N, 2) / math.sqrt(N))
        self.D = nn.Parameter(torch.randn(H))

    def state_size(self, seq_len: int) -> int:
        """Complex state entries per example: N per direction."""
        return self.d_state * (2 if self.bidirectional else 1)

    def log_lambda(self) -> torch.Tensor:
        """(N,) complex log Lambda = -exp(nu_log) + i exp(theta_log)."""
        return torch.complex(-torch.exp(self.nu_log), torch.exp(self.theta_log))

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding, zeroes padded inputs when bidirectional."""
        if mask is not None and self.bidirectional:
            x = x.masked_fill(mask.unsqueeze(-1), 0.0)  # (B, L, H)
        b = self.B * torch.exp(self.gamma_log)[:, None, None]  # (N, H, 2), gamma-normalised B
        v = torch.complex(x @ b[..., 0].T, x @ b[..., 1].T)  # (B, L, N)
        log_lam = self.log_lambda()
        c = torch.view_as_complex(self.C)  # (C_k, H, N)
        states = chunked_scan(v, log_lam, self.scan_chunk)  # (B, L, N)
        y = torch.einsum("hn,bln->blh", c[0], states).real  # (B, L, H)
        if self.bidirectional:
            back = chunked_scan(v.flip(1), log_lam, self.scan_chunk).flip(1)  # (B, L, N), sums u_k ... u_{L-1}
            y = y + torch.einsum("hn,bln->blh", c[1], back).real  # (B, L, H)
        return F.gelu(y.to(x.dtype) + self.D * x)  # (B, L, H)
