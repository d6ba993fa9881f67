"""Mamba's selective state space mixer (S6): Delta, B and C are computed from the input at every step.

With `x, z = W_in u` (each E = expand * H channels), `x = SiLU(causal depthwise conv(x))`, `Delta = softplus(W_dt
(W_r x) + b_dt)`, `B = W_B x`, `C = W_C x` (N each), the scan per channel e and state n is
`h_t = exp(Delta_te A_en) h_{t-1} + Delta_te B_tn x_te`, `y_te = sum_n C_tn h_ten + D_e x_te`, and the output is
`W_out (y * SiLU(z))` (docs/models.md, Reference models). `A = -exp(A_log)` starts at the S4D-Real values -1..-N.
With `eig_range="-1_1"` the transition `exp(Delta A)` in (0, 1] becomes `2 exp(Delta A) - 1` in (-1, 1] (Grazzi et
al., ICLR 2025, as their code `mamba_mod.py` does it; the input term Delta B x is unchanged), which lets the state
flip sign on an input and so track parity.

The scan is pure PyTorch and exact: one fused multiply-add per step over all (batch, channel, state) entries, with a
hand-written backward pass that runs the same recurrence in reverse; long sequences are cut into checkpointed chunks, so
nothing of size L x E x N is held for the backward pass. On CUDA with the `mamba_ssm` package installed, its fused
`selective_scan_fn` runs the scan instead.

Example:
    >>> import torch
    >>> layer = Mamba(8, l_max=64)
    >>> layer(torch.randn(2, 64, 8)).shape
    torch.Size([2, 64, 8])
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

CHUNK_ELEMENTS = 1 << 24  # B x E x chunk x N entries per checkpointed chunk
EIG_RANGES = ("0_1", "-1_1")  # range of the transition: e^{Delta A}, or 2 e^{Delta A} - 1


class _ScanChunk(torch.autograd.Function):
    """One chunk of the selective scan with a hand-written backward pass.

    Forward: `a = e^{Delta A}`, `b = Delta u B`, then `h_t = a_t h_{t-1} + b_t` as one fused multiply-add per step
    over all (batch, channel, state) entries, and `y_t = h_t C_t`. Backward: the same recurrence in reverse,
    `g_t = C_t dy_t + a_{t+1} g_{t+1}`, then `dDelta A = g_t h_{t-1} a_t` and the products for the rest. Exact; the
    tensors are laid out (step, batch, channel, state) so that every pass is contiguous.
    """

    @staticmethod
    def forward(ctx, u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor,  # type: ignore[override]
                C: torch.Tensor, h0: torch.Tensor, neg: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        S, Bt, E, N = u.shape[-1], u.shape[0], u.shape[1], A.shape[1]
        d = delta.permute(2, 0, 1).contiguous()  # (S, Bt, E)
        ul = u.permute(2, 0, 1).contiguous()  # (S, Bt, E)
        du = d * ul
        bl, cl = B.permute(2, 0, 1).contiguous(), C.permute(2, 0, 1).contiguous()  # (S, Bt, N)
        a = torch.exp(d.unsqueeze(-1) * A)  # (S, Bt, E, N)
        if neg:
            a = 2 * a - 1  # in (-1, 1]
        h = du.unsqueeze(-1) * bl.unsqueeze(2)  # (S, Bt, E, N): b, overwritten by the states
        prev = h0
        for t in range(S):
            torch.addcmul(h[t], a[t], prev, out=h[t])
            prev = h[t]
        y = torch.matmul(h.view(S * Bt, E, N), cl.view(S * Bt, N, 1)).view(S, Bt, E)
        ctx.save_for_backward(a, h, h0, d, ul, du, bl, cl, A)
        ctx.neg = neg
        return y.permute(1, 2, 0), h[-1].clone()

    @staticmethod
    def backward(ctx, gy: torch.Tensor, gh_end: torch.Tensor | None) -> tuple:  # type: ignore[override]
        a, h, h0, d, ul, du, bl, cl, A = ctx.saved_tensors
        S, Bt, E, N = a.shape
        gyl = gy.permute(2, 0, 1).contiguous()  # (S, Bt, E)
        g = gyl.unsqueeze(-1) * cl.unsqueeze(2)  # (S, Bt, E, N): dL/dh_t from y_t
        if gh_end is not None:
            g[-1] += gh_end
        for t in range(S - 2, -1, -1):
            torch.addcmul(g[t], a[t + 1], g[t + 1], out=g[t])
        gc = torch.matmul(gyl.view(S * Bt, 1, E), h.view(S * Bt, E, N)).view(S, Bt, N)
        gdb = torch.matmul(g.view(S * Bt, E, N), bl.view(S * Bt, N, 1)).view(S, Bt, E)  # d(Delta u)
        gbl = torch.matmul(du.view(S * Bt, 1, E), g.view(S * Bt, E, N)).view(S, Bt, N)
        gh0 = a[0] * g[0]
        gz = torch.empty_like(g)  # d(Delta A) = g_t h_{t-1} a_t
        torch.mul(g[0], h0, out=gz[0])
        torch.mul(g[1:], h[:-1], out=gz[1:])
        gz.mul_(a + 1 if ctx.neg else a)  # da / d(Delta A): e^{Delta A}, or 2 e^{Delta A} = a + 1
        gd = (gz * A).sum(-1) + gdb * ul  # (S, Bt, E)
        gA = (gz * d.unsqueeze(-1)).sum((0, 1))  # (E, N)
        gu = gdb * d
        return (gu.permute(1, 2, 0), gd.permute(1, 2, 0), gA, gbl.permute(1, 2, 0), gc.permute(1, 2, 0), gh0, None)


def _scan_chunk(u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                h0: torch.Tensor, fused_cpu: bool = True, neg: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk: u, delta (Bt, E, l), A (E, N), B, C (Bt, N, l), h0 (Bt, E, N) -> (y (Bt, E, l), h_end).

    On the CPU the fused Numba loops of `selective_scan_cpu` run it (same arithmetic, ~10x faster than the broadcast
    passes below); `fused_cpu=False` keeps the pure-PyTorch path (the tests' oracle, and every other device).
    """
    if fused_cpu and u.device.type == "cpu":
        from .selective_scan_cpu import ScanChunkCPU

        return ScanChunkCPU.apply(u, delta, A, B, C, h0, neg)
    return _ScanChunk.apply(u, delta, A, B, C, h0, neg)


def selective_scan(u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                   D: torch.Tensor, z: torch.Tensor | None = None, delta_bias: torch.Tensor | None = None,
                   delta_softplus: bool = True, chunk: int | None = None, fused_cpu: bool = True,
                   eig_range: str = "0_1") -> torch.Tensor:
    """The selective scan, with the argument layout of mamba_ssm's `selective_scan_fn` (real A, B and C per step).

    Args:
        u, delta: (Bt, E, L). A: (E, N). B, C: (Bt, N, L). D: (E,). z: (Bt, E, L) gate or None.
        delta_bias: (E,) added to delta before the softplus. chunk: steps per checkpointed chunk.
        fused_cpu: on the CPU, run each chunk with the fused Numba loops (False: the pure-PyTorch recurrence).
        eig_range: `0_1` (transition e^{Delta A}) or `-1_1` (2 e^{Delta A} - 1).

    Returns:
        (Bt, E, L): `(sum_n C h + D u) * SiLU(z)`.
    """
    from torch.utils.checkpoint import checkpoint

    if eig_range not in EIG_RANGES:
        raise ValueError(f"eig_range must be one of {EIG_RANGES}, got {eig_range!r}")
    neg = eig_range == "-1_1"
    dtype_in = u.dtype
    work = torch.float64 if dtype_in == torch.float64 else torch.float32  # as the reference: float32 under AMP
    with torch.autocast(device_type=u.device.type, enabled=False):
        u, delta, A, B, C, D = (t.to(work) for t in (u, delta, A, B, C, D))
        if delta_bias is not None:
            delta = delta + delta_bias.to(work).unsqueeze(-1)
        if delta_softplus:
            delta = F.softplus(delta)
        Bt, E, L = u.shape
        N = A.shape[1]
        step = chunk or max(64, CHUNK_ELEMENTS // max(1, Bt * E * N))
        h = u.new_zeros(Bt, E, N)
        ys = []
        for s in range(0, L, step):
            sl = slice(s, s + step)
            args = (u[..., sl], delta[..., sl], A, B[..., sl], C[..., sl], h, fused_cpu, neg)
            y, h = checkpoint(_scan_chunk, *args, use_reentrant=False) if step < L else _scan_chunk(*args)
            ys.append(y)
        out = torch.cat(ys, -1) + u * D.unsqueeze(-1)  # (Bt, E, L)
        if z is not None:
            out = out * F.silu(z.to(work))
    return out.to(dtype_in)


def _fused_scan():
    """mamba_ssm's fused CUDA `selective_scan_fn`, or None where it is not installed."""
    try:
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
    except Exception:  # not installed, or built without CUDA
        return None
    return selective_scan_fn


class _Direction(nn.Module):
    """The input-dependent SSM of one direction: causal conv, projections to Delta, B, C, and A, D."""

    def __init__(self, d_inner: int, d_state: int, d_conv: int, dt_rank: int, dt_min: float, dt_max: float,
                 dt_init_floor: float) -> None:
        super().__init__()
        self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(d_inner, dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(dt_rank, d_inner)
        bound = dt_rank ** -0.5
        nn.init.uniform_(self.dt_proj.weight, -bound, bound)
        dt = torch.exp(torch.rand(d_inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        dt = dt.clamp(min=dt_init_floor)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
        a = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)  # (E, N): S4D-Real
        self.A_log = nn.Parameter(torch.log(a))
        self.A_log._optim = {"weight_decay": 0.0}  # type: ignore[attr-defined]
        self.D = nn.Parameter(torch.ones(d_inner))
        self.D._optim = {"weight_decay": 0.0}  # type: ignore[attr-defined]
        self.dt_rank, self.d_state = dt_rank, d_state

    def forward(self, x: torch.Tensor, z: torch.Tensor | None, chunk: int | None, eig_range: str) -> torch.Tensor:
        """x, z: (Bt, E, L) -> (Bt, E, L)."""
        L = x.shape[-1]
        x = F.silu(self.conv1d(x)[..., :L])  # (Bt, E, L), causal
        dt, B, C = torch.split(self.x_proj(x.transpose(1, 2)), [self.dt_rank, self.d_state, self.d_state], -1)
        delta = (dt @ self.dt_proj.weight.T).transpose(1, 2)  # (Bt, E, L), bias added in the scan
        A = -torch.exp(self.A_log)  # (E, N)
        B, C = B.transpose(1, 2).contiguous(), C.transpose(1, 2).contiguous()  # (Bt, N, L)
        fused = _fused_scan() if x.is_cuda and x.dtype != torch.float64 and eig_range == "0_1" else None
        if fused is not None:
            return fused(x.contiguous(), delta.contiguous(), A, B, C, self.D.float(), z=z,
                         delta_bias=self.dt_proj.bias.float(), delta_softplus=True)
        return selective_scan(x, delta, A, B, C, self.D, z=z, delta_bias=self.dt_proj.bias, chunk=chunk,
                              eig_range=eig_range)


class Mamba(nn.Module):
    """Mamba selective SSM mixer (S6): W_out(scan(SiLU(conv(W_x u)); Delta, B, C from the input) * SiLU(W_z u))."""

    packable = False
    """Not stacked into packed runs: the CPU scan runs Numba loops on NumPy arrays, which `torch.func.vmap` cannot
    batch (members of a Mamba sweep run one by one)."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, d_state: int = 16, d_conv: int = 4, expand: int = 2,
                 dt_rank: int | None = None, dt_min: float = 1e-3, dt_max: float = 1e-1,
                 dt_init_floor: float = 1e-4, chunk_size: int | None = None, eig_range: str = "0_1") -> None:
        """Args:
            d_model: channels H. l_max: longest input length (unused: the scan takes any length).
            bidirectional: a second SSM (own conv, projections, A, D) scans the reversed sequence; the two outputs
                are added before the gate (shared in/out projections).
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            d_state: N per channel. d_conv: causal conv width. expand: E = expand * H.
            dt_rank: rank of the Delta projection (default ceil(H / 16)). dt_min, dt_max, dt_init_floor: range of
                softplus(b_dt) at init (log-uniform). chunk_size: steps per checkpointed scan chunk.
            eig_range: `0_1` (Mamba: transition e^{Delta A} in (0, 1]) or `-1_1` (2 e^{Delta A} - 1 in (-1, 1],
                Grazzi et al.; runs the PyTorch/Numba scan, never `mamba_ssm`'s kernel, which has the first built in).
        """
        super().__init__()
        if d_state < 1 or d_conv < 1 or expand < 1:
            raise ValueError(f"need d_state, d_conv, expand >= 1, got {d_state}, {d_conv}, {expand}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"need 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
        if eig_range not in EIG_RANGES:
            raise ValueError(f"eig_range must be one of {EIG_RANGES}, got {eig_range!r}")
        self.d_model, self.l_max, self.d_state, self.eig_range = d_model, l_max, d_state, eig_range
        self.bidirectional, self.causal = bidirectional, not bidirectional
        self.d_inner, self.chunk_size = expand * d_model, chunk_size
        rank = dt_rank or math.ceil(d_model / 16)
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner, bias=False)
        self.ssm = nn.ModuleList([_Direction(self.d_inner, d_state, d_conv, rank, dt_min, dt_max, dt_init_floor)
                                  for _ in range(2 if bidirectional else 1)])
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def state_size(self, seq_len: int) -> int:
        """Recurrent state per example: E x N SSM entries and E x (d_conv - 1) conv inputs, per direction."""
        conv = self.ssm[0].conv1d.kernel_size[0] - 1
        return self.d_inner * (self.d_state + conv) * len(self.ssm)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding, zeroes padded inputs when bidirectional."""
        if mask is not None and self.bidirectional:
            x = x.masked_fill(mask.unsqueeze(-1), 0.0)
        xs, z = self.in_proj(x).transpose(1, 2).chunk(2, dim=1)  # (B, E, L) each
        y = self.ssm[0](xs, z, self.chunk_size, self.eig_range)  # (B, E, L)
        if self.bidirectional:  # the gate distributes over the sum
            y = y + self.ssm[1](xs.flip(-1), z.flip(-1), self.chunk_size, self.eig_range).flip(-1)
        return self.out_proj(y.transpose(1, 2))  # (B, L, H)
