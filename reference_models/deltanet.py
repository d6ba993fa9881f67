"""DeltaNet: linear attention with the delta rule (Yang et al., NeurIPS 2024), recurrent and chunked (WY) forms.

Per head, with a state S (d_v x d_k) starting at 0, unit-norm keys and queries and a write strength beta_t:

    S_t = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,    o_t = S_t q_t / sqrt(d_k)

(equivalently S_t = S_{t-1} + beta_t (v_t - S_{t-1} k_t) k_t^T: the value stored under k_t moves toward v_t). The
transition I - beta_t k_t k_t^T has eigenvalues 1 (d_k - 1 times) and 1 - beta_t: `beta_range="0_1"` takes
beta = sigmoid(W_beta u) (eigenvalues in [0, 1]), `"0_2"` takes beta = 2 sigmoid(W_beta u) (in [-1, 1], Grazzi et
al., ICLR 2025, which is what lets the layer count modulo 2). The layer follows flash-linear-attention's `DeltaNet`
(fla/layers/delta_net.py): q, k, v = SiLU(causal depthwise conv_4(W_q u)), ... ; q, k L2-normalised per head;
the 1/sqrt(d_k) scale of its kernels; RMSNorm of each head's output, then W_o (docs/models.md, Reference models).

`delta_rule_recurrent` is the loop over time; `delta_rule_chunked` (the default) is the chunkwise form: inside a
chunk of C steps the writes u_i = beta_i (v_i - S_{i-1} k_i) solve one unit lower-triangular system (the UT form of
the WY representation of the product of the chunk's transitions), so a chunk costs a few (C x C) and (C x d)
matrix products, and only the chunk-final states are carried step by step.

Example:
    >>> import torch
    >>> layer = DeltaNet(16, l_max=64, n_heads=2, beta_range="0_2")
    >>> layer(torch.randn(2, 64, 16)).shape
    torch.Size([2, 64, 16])
    >>> q, k = torch.nn.functional.normalize(torch.randn(2, 2, 2, 10, 8), dim=-1)
    >>> v, beta = torch.randn(2, 2, 10, 8), torch.rand(2, 2, 10)
    >>> torch.allclose(delta_rule_chunked(q, k, v, beta, chunk=4), delta_rule_recurrent(q, k, v, beta), atol=1e-5)
    True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

BETA_RANGES = {"0_1": 1.0, "0_2": 2.0}  # beta = scale * sigmoid(W_beta u)
MODES = ("chunk", "recurrent")


def delta_rule_recurrent(q: Tensor, k: Tensor, v: Tensor, beta: Tensor) -> Tensor:
    """The delta rule step by step: q, k (B, h, L, d_k) unit rows, v (B, h, L, d_v), beta (B, h, L) -> o (B, h, L, d_v).

    `o_t = S_t q_t / sqrt(d_k)` with `S_t = S_{t-1} + beta_t (v_t - S_{t-1} k_t) k_t^T`, S_{-1} = 0.
    """
    Bt, nh, L, dk = k.shape
    S = v.new_zeros(Bt, nh, v.shape[-1], dk)  # (B, h, d_v, d_k)
    q = q * dk ** -0.5
    out = []
    for t in range(L):
        kt = k[:, :, t]  # (B, h, d_k)
        write = beta[:, :, t, None] * (v[:, :, t] - (S @ kt[..., None])[..., 0])  # (B, h, d_v)
        S = S + write[..., None] * kt[..., None, :]
        out.append((S @ q[:, :, t, :, None])[..., 0])  # (B, h, d_v)
    return torch.stack(out, 2)  # (B, h, L, d_v)


def delta_rule_chunked(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, chunk: int = 64) -> Tensor:
    """The delta rule in chunks of `chunk` steps; same arguments and result as `delta_rule_recurrent`.

    Inside a chunk with incoming state S_0, the writes U (rows u_i = beta_i (v_i - S_{i-1} k_i)) satisfy
    `(I + tril(diag(beta) K K^T, -1)) U = diag(beta) (V - K S_0^T)`, so U = U_0 - W S_0^T with `U_0 = T diag(beta) V`,
    `W = T diag(beta) K`, T the inverse of the unit lower-triangular matrix (one triangular solve for every chunk at
    once). Then `O = Q S_0^T + tril(Q K^T) U` (diagonal included) and the state leaving the chunk is
    `S_0 + U^T K`. Steps past L are padded with k = v = beta = 0, which write nothing.
    """
    Bt, nh, L, dk = k.shape
    dv = v.shape[-1]
    C = max(1, min(chunk, L))
    n = -(-L // C)
    pad = n * C - L
    q, k, v = (F.pad(t, (0, 0, 0, pad)).reshape(Bt, nh, n, C, t.shape[-1]) for t in (q * dk ** -0.5, k, v))
    b = F.pad(beta, (0, pad)).reshape(Bt, nh, n, C, 1)  # (B, h, n, C, 1)
    eye = torch.eye(C, dtype=k.dtype, device=k.device)
    lower = eye + torch.tril(b * (k @ k.mT), -1)  # (B, h, n, C, C), unit lower triangular
    wy = torch.linalg.solve_triangular(lower, torch.cat([b * v, b * k], -1), upper=False, unitriangular=True)
    u0, w = wy[..., :dv], wy[..., dv:]  # (B, h, n, C, d_v), (B, h, n, C, d_k)
    qk = torch.tril(q @ k.mT)  # (B, h, n, C, C), causal within the chunk
    S = v.new_zeros(Bt, nh, dv, dk)  # (B, h, d_v, d_k)
    out = []
    for c in range(n):
        u = u0[:, :, c] - w[:, :, c] @ S.mT  # (B, h, C, d_v)
        out.append(q[:, :, c] @ S.mT + qk[:, :, c] @ u)  # (B, h, C, d_v)
        S = S + u.mT @ k[:, :, c]
    return torch.stack(out, 2).reshape(Bt, nh, n * C, dv)[:, :, :L]  # (B, h, L, d_v)


class DeltaNet(nn.Module):
    """DeltaNet (delta rule, multi-head): W_o(RMSNorm(o)), o_t = S_t q_t, S_t = S_{t-1}(I - beta_t k_t k_t^T) + beta_t v_t k_t^T."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, n_heads: int = 4, beta_range: str = "0_1", conv_size: int = 4,
                 mode: str = "chunk", chunk_size: int = 64, norm_eps: float = 1e-5) -> None:
        """Args:
            d_model: channels H (= d_k = d_v summed over heads). l_max: longest input length (unused).
            bidirectional: refused (causal only).
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            n_heads: heads, H / n_heads channels each. beta_range: `0_1` (beta = sigmoid) or `0_2` (2 sigmoid).
            conv_size: width of the causal depthwise convolutions on q, k, v (0: none, SiLU of the projections).
            mode: `chunk` (default) or `recurrent` (the step loop). chunk_size: C of the chunked form.
            norm_eps: epsilon of the per-head output RMSNorm.
        """
        super().__init__()
        if bidirectional:
            raise ValueError("DeltaNet is causal only; bidirectional=True is refused")
        if beta_range not in BETA_RANGES:
            raise ValueError(f"beta_range must be one of {sorted(BETA_RANGES)}, got {beta_range!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"d_model {d_model} must be a positive multiple of n_heads {n_heads}")
        if conv_size < 0 or chunk_size < 1:
            raise ValueError(f"need conv_size >= 0 and chunk_size >= 1, got {conv_size}, {chunk_size}")
        self.causal, self.l_max, self.d_model, self.n_heads = True, l_max, d_model, n_heads
        self.beta_scale, self.mode, self.chunk_size = BETA_RANGES[beta_range], mode, chunk_size
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.conv = (nn.Conv1d(3 * d_model, 3 * d_model, conv_size, groups=3 * d_model, padding=conv_size - 1,
                               bias=False) if conv_size else None)
        self.beta_proj = nn.Linear(d_model, n_heads, bias=False)
        self.o_norm = nn.RMSNorm(d_model // n_heads, eps=norm_eps)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)

    def state_size(self, seq_len: int) -> int:
        """Recurrent state per example: a d_k x d_v matrix per head, and the conv's last conv_size - 1 inputs."""
        conv = 0 if self.conv is None else 3 * self.d_model * (self.conv.kernel_size[0] - 1)
        return self.d_model * self.d_model // self.n_heads + conv

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` is ignored: the layer is causal."""
        Bt, L, H = x.shape
        qkv = self.qkv(x)  # (B, L, 3H)
        if self.conv is not None:
            qkv = self.conv(qkv.transpose(1, 2))[..., :L].transpose(1, 2)  # causal: left context only
        q, k, v = F.silu(qkv).view(Bt, L, 3, self.n_heads, H // self.n_heads).permute(2, 0, 3, 1, 4)  # (B, h, L, d)
        q, k = F.normalize(q, dim=-1, eps=1e-6), F.normalize(k, dim=-1, eps=1e-6)
        beta = self.beta_scale * torch.sigmoid(self.beta_proj(x)).transpose(1, 2)  # (B, h, L)
        work = torch.float64 if x.dtype == torch.float64 else torch.float32  # the solve in float32 under AMP
        with torch.autocast(device_type=x.device.type, enabled=False):
            q, k, v, beta = (t.to(work) for t in (q, k, v, beta))
            if self.mode == "chunk":
                o = delta_rule_chunked(q, k, v, beta, self.chunk_size)
            else:
                o = delta_rule_recurrent(q, k, v, beta)  # (B, h, L, d_v)
        o = o.to(x.dtype)
        return self.o_proj(self.o_norm(o).transpose(1, 2).reshape(Bt, L, H))  # (B, L, H)
