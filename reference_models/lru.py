"""LRU: the Linear Recurrent Unit of Orvieto et al., run with a chunked, hierarchical parallel scan.

`x_k = Lambda x_{k-1} + exp(gamma_log) * (B u_k)`, `y_k = Re(C x_k) + D u_k`, with
`Lambda = exp(-exp(nu_log) + i exp(theta_log))` initialised uniformly on a ring r_min <= |Lambda| <= r_max with
phase in [0, max_phase], and `gamma = sqrt(1 - |Lambda|^2)` (docs/models.md, Reference models). The mixer returns GELU(y).
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

TWO_PI = 2 * math.pi


def chunked_scan(v_re: torch.Tensor, v_im: torch.Tensor, log_re: torch.Tensor, log_im: torch.Tensor,
                 chunk: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """All states of x_k = lam * x_{k-1} + v_k (x_{-1} = 0) for lam = exp(log_re + i log_im), in real arithmetic.

    Inside a chunk of T steps the states are one real matrix product per state with the 2T x 2T block form of the
    Toeplitz matrix lam^(t-s), t >= s; the final states of the chunks form a recurrence with lam^T, solved by the
    same function (depth log_T L); each chunk then adds lam^(t+1) times the state carried in. Powers of lam use
    float64 phases (k * theta reaches 1e5 rad at long L).

    Args:
        v_re, v_im: (N, B, L) real and imaginary parts of the inputs, states first.
        log_re, log_im: (N,) log |lam| and arg lam (kept in float64 through the recursion). chunk: T.

    Returns:
        (x_re, x_im), each (N, B, L).
    """
    N, B, L = v_re.shape
    T = min(chunk, L)
    n_chunks = -(-L // T)
    pad = n_chunks * T - L
    log_re, log_im = log_re.double(), log_im.double()
    lag = torch.arange(T, dtype=torch.float64, device=v_re.device)
    lag = lag[:, None] - lag[None, :]  # (T, T), t - s
    live = lag >= 0
    mag = torch.exp(lag.clamp(min=0) * log_re[:, None, None]) * live  # (N, T, T)
    phase = torch.remainder(lag.clamp(min=0) * log_im[:, None, None], TWO_PI)  # (N, T, T)
    t_re, t_im = (mag * torch.cos(phase)).to(v_re.dtype), (mag * torch.sin(phase)).to(v_re.dtype)
    # [x_re, x_im] = [v_re, v_im] @ [[Tr^T, Ti^T], [-Ti^T, Tr^T]]
    block = torch.cat([torch.cat([t_re.mT, t_im.mT], dim=2), torch.cat([-t_im.mT, t_re.mT], dim=2)], dim=1)
    vs = torch.cat([F.pad(v_re, (0, pad)).reshape(N, B * n_chunks, T),
                    F.pad(v_im, (0, pad)).reshape(N, B * n_chunks, T)], dim=2)  # (N, B C, 2T)
    xs = torch.bmm(vs, block)  # (N, B C, 2T)
    x_re, x_im = xs[..., :T].reshape(N, B, n_chunks, T), xs[..., T:].reshape(N, B, n_chunks, T)  # (N, B, C, T)
    if n_chunks > 1:
        e_re, e_im = chunked_scan(x_re[..., -1], x_im[..., -1], T * log_re, T * log_im, chunk)  # (N, B, C)
        c_re = F.pad(e_re[..., :-1], (1, 0)).unsqueeze(-1)  # (N, B, C, 1), state entering chunk c
        c_im = F.pad(e_im[..., :-1], (1, 0)).unsqueeze(-1)
        steps = torch.arange(1, T + 1, dtype=torch.float64, device=v_re.device)
        d_mag = torch.exp(steps * log_re[:, None])  # (N, T): lam^(t+1)
        d_phase = torch.remainder(steps * log_im[:, None], TWO_PI)
        d_re = (d_mag * torch.cos(d_phase)).to(v_re.dtype)[:, None, None, :]  # (N, 1, 1, T)
        d_im = (d_mag * torch.sin(d_phase)).to(v_re.dtype)[:, None, None, :]
        x_re = x_re + c_re * d_re - c_im * d_im  # (N, B, C, T)
        x_im = x_im + c_re * d_im + c_im * d_re
    return x_re.reshape(N, B, n_chunks * T)[..., :L], x_im.reshape(N, B, n_chunks * T)[..., :L]  # (N, B, L)


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

    @staticmethod
    def _read(x_re: torch.Tensor, x_im: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """Re(C x) for states (N, B, L) and C (H, N, 2): (B, L, H)."""
        return torch.einsum("nbl,hn->blh", x_re, c[..., 0]) - torch.einsum("nbl,hn->blh", x_im, c[..., 1])

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding, zeroes padded inputs when bidirectional."""
        if mask is not None and self.bidirectional:
            x = x.masked_fill(mask.unsqueeze(-1), 0.0)  # (B, L, H)
        b = self.B * torch.exp(self.gamma_log)[:, None, None]  # (N, H, 2), gamma-normalised B
        v_re = torch.matmul(b[..., 0], x.transpose(1, 2)).transpose(0, 1)  # (N, B, L)
        v_im = torch.matmul(b[..., 1], x.transpose(1, 2)).transpose(0, 1)  # (N, B, L)
        log_re, log_im = -torch.exp(self.nu_log), torch.exp(self.theta_log)  # (N,)
        y = self._read(*chunked_scan(v_re, v_im, log_re, log_im, self.scan_chunk), self.C[0])  # (B, L, H)
        if self.bidirectional:  # states summarising u_k ... u_{L-1}
            b_re, b_im = chunked_scan(v_re.flip(-1), v_im.flip(-1), log_re, log_im, self.scan_chunk)
            y = y + self._read(b_re.flip(-1), b_im.flip(-1), self.C[1])  # (B, L, H)
        return F.gelu(y.to(x.dtype) + self.D * x)  # (B, L, H)
