"""S4: a state space with a diagonal-plus-low-rank (NPLR) state matrix, HiPPO-LegS initialisation, bilinear steps.

Per channel h the continuous system is `x' = A x + B u, y = Re(2 C x)` with `A = diag(Lambda) - P P^*` over N/2
complex modes (their conjugates implied). The bilinear discretisation `Ab = (I - dt/2 A)^-1 (I + dt/2 A)` gives the
kernel `K[k] = 2 Re C Ab^k Bb`. It is never formed step by step: the stored output vector is `C~ = C (I - Ab^L)`
for the kernel length L, and then the length-L DFT of K is the resolvent
`Kf(w) = 2/(1+w) * (k00(z) - k01(z) k10(z) / (1 + k11(z)))`, `z = 2 (1-w)/(1+w)` at the roots of unity w, where
`k_ab(z) = dt sum_n a_n b_n / (z - dt Lambda_n)` + the conjugate mode (a Cauchy sum, then the Woodbury identity for
the rank-R term); an inverse FFT returns K (docs/models.md, Reference models). The layer is `GELU(K * u + D u)`.

Example:
    >>> import torch
    >>> layer = S4(8, l_max=64, d_state=16)
    >>> layer(torch.randn(2, 64, 8)).shape
    torch.Size([2, 64, 8])
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._ssm_kernels import conv_layer, ssm_hint

CAUCHY_BLOCK = 1 << 22  # entries of one (H, 2 N/2, nodes) Cauchy block; blocks are rebuilt in the backward pass


def hippo_legs_nplr(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """HiPPO-LegS in normal-plus-low-rank form, half of each conjugate pair: (Lambda, P, B), each (n/2,) complex128.

    `A_LegS + p p^T` with `p_i = sqrt(i + 1/2)` is `-I/2 + S`, S skew-symmetric; S = V diag(i s) V^* (Hermitian
    eigensolver on -iS), so `A_LegS = V (diag(Lambda) - P P^*) V^*` with `Lambda = -1/2 + i s`, `P = V^* p`,
    `B = V^* b`, `b_i = sqrt(2 i + 1)`. The modes with Im Lambda < 0 are kept (their conjugates are implied) and
    Im B is clipped to [-2, 2], as in the S4 reference code.
    """
    i = torch.arange(n, dtype=torch.float64)
    b = torch.sqrt(2 * i + 1)  # (n,)
    a = -torch.tril(b[:, None] * b[None, :], -1) - torch.diag(i + 1)  # (n, n): A_LegS
    p = torch.sqrt(i + 0.5)  # (n,)
    s = a + p[:, None] * p[None, :]  # (n, n) = -I/2 + skew
    herm = (s * -1j).to(torch.complex128)  # eigh reads the lower triangle: the -I/2 part drops out as intended
    eig, vec = torch.linalg.eigh(herm)  # (n,), (n, n)
    lam = torch.mean(torch.diagonal(s)) + 1j * eig  # (n,) complex
    order = torch.sort(lam.imag).indices[: n // 2]  # negative imaginary parts first
    lam, vec = lam[order], vec[:, order]  # (n/2,), (n, n/2)
    v_h = vec.conj().transpose(0, 1)  # (n/2, n)
    b_t = v_h @ b.to(torch.complex128)  # (n/2,)
    b_t = torch.complex(b_t.real, torch.clamp(b_t.imag, -2.0, 2.0))
    return lam, v_h @ p.to(torch.complex128), b_t


class _CauchyBlock(torch.autograd.Function):
    """r = v @ M with M[h, n, l] = 1 / (z_l - w_hn), M built in the forward and rebuilt in the backward pass.

    Gradients (PyTorch's conjugate convention): dv = g @ M^H and dw_n = sum_m conj(v_mn) (g @ (M^2)^H)_mn; only v, w
    and z are stored, so a block costs no memory after its forward pass. A separate `setup_context` and a generated
    vmap rule let a stack of models run it (`torch.func.vmap`, packed runs).
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(v: torch.Tensor, w: torch.Tensor, z: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return torch.bmm(v, 1.0 / (z - w.unsqueeze(-1)))  # (H, M, nodes) via an (H, 2N', nodes) Cauchy block

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: torch.Tensor) -> None:  # type: ignore[override]
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple:  # type: ignore[override]
        v, w, z = ctx.saved_tensors
        m = 1.0 / (z - w.unsqueeze(-1))  # (H, K, nodes)
        gv = torch.bmm(g, m.conj().transpose(1, 2))  # (H, M, K)
        gw = (v.conj() * torch.bmm(g, (m * m).conj().transpose(1, 2))).sum(1)  # (H, K)
        return gv, gw, None


def cauchy(v: torch.Tensor, w: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Conjugate-symmetric Cauchy sums `sum_n v_n / (z - w_n) + conj(v_n) / (z - conj(w_n))`.

    Args:
        v: (H, M, N') complex weights. w: (H, N') complex poles. z: (nodes,) complex evaluation points.

    Returns:
        (H, M, nodes), in blocks of nodes, so the (H, N', nodes) matrix is never held whole.
    """
    v2, w2 = torch.cat([v, v.conj()], -1), torch.cat([w, w.conj()], -1)  # (H, M, 2N'), (H, 2N')
    step = max(1, CAUCHY_BLOCK // max(1, w2.shape[0] * w2.shape[1]))
    return torch.cat([_CauchyBlock.apply(v2, w2, z[s:s + step]) for s in range(0, z.shape[0], step)], -1)


def bilinear_power_correction(lam: torch.Tensor, p: torch.Tensor, log_dt: torch.Tensor, length: int) -> torch.Tensor:
    """`I - Ab^L` on the conjugate-expanded state, per channel: (H, N, N) complex128 (N = 2 N/2).

    Args:
        lam: (H, N/2) complex diagonal. p: (R, H, N/2) complex low-rank factor. log_dt: (H,). length: L.
    """
    lam2 = torch.cat([lam, lam.conj()], -1).to(torch.complex128)  # (H, N)
    p2 = torch.cat([p, p.conj()], -1).to(torch.complex128)  # (R, H, N)
    a = torch.diag_embed(lam2) - torch.einsum("rhn,rhm->hnm", p2, p2.conj())  # (H, N, N)
    half = (torch.exp(log_dt.double()) / 2).to(torch.complex128)[:, None, None]  # (H, 1, 1)
    eye = torch.eye(a.shape[-1], dtype=a.dtype)
    ab = torch.linalg.solve(eye - half * a, eye + half * a)  # (H, N, N)
    return eye - torch.linalg.matrix_power(ab, length)


def _c(t: torch.Tensor) -> torch.Tensor:
    """A real (..., 2) parameter viewed as complex (...)."""
    return torch.view_as_complex(t)


class S4(nn.Module):
    """Structured state space S4 (DPLR, HiPPO-LegS init): GELU(K * u + D u), K from a Cauchy kernel and an inverse FFT."""

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0, d_state: int = 64, rank: int = 1, dt_min: float = 1e-3, dt_max: float = 1e-1,
                 max_kernel_length: int | None = None, lr_ssm: float | None = None, lr_max: float = 1e-3) -> None:
        """Args:
            d_model: channels H. l_max: longest input length; the kernel is built at the roots of unity of
                L_k = min(l_max, max_kernel_length) and cut to the input length (C~ belongs to L_k).
            bidirectional: a second output vector C gives the backward kernel (from lag 1).
            dropout, layer_idx: part of the mixer contract; the harness applies the block dropout.
            d_state: N real state dimensions (N/2 complex modes). rank: R of the low-rank term (LegS needs 1).
            dt_min, dt_max: log-uniform range of dt_h.
            lr_ssm: absolute learning rate of log_dt, Lambda, B and P; by default min(lr_max, the global rate).
        """
        super().__init__()
        if d_state < 2 or d_state % 2:
            raise ValueError(f"d_state counts real dimensions and must be even and >= 2, got {d_state}")
        if rank < 1:
            raise ValueError(f"rank must be >= 1, got {rank}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"need 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
        self.d_model, self.l_max, self.d_state, self.rank = d_model, l_max, d_state, rank
        self.bidirectional, self.causal = bidirectional, not bidirectional
        self.max_kernel_length = max_kernel_length
        self.l_kernel = min(l_max, max_kernel_length) if max_kernel_length else l_max
        hint = {"lr_max": lr_max, "weight_decay": 0.0} if lr_ssm is None else {"lr": lr_ssm, "weight_decay": 0.0}
        H, N2, C_k = d_model, d_state // 2, 2 if bidirectional else 1
        lam, p, b = hippo_legs_nplr(d_state)  # (N/2,) each
        log_dt = torch.rand(H) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)  # (H,)
        p_full = torch.zeros(rank, N2, dtype=torch.complex128)
        p_full[0] = p  # LegS is rank 1; further rows start at 0
        c = torch.randn(C_k, H, N2, dtype=torch.complex128)  # (C_k, H, N/2), E|c|^2 = 1
        with torch.no_grad():  # C~ = C (I - Ab^L) on the conjugate-expanded state
            corr = bilinear_power_correction(lam.expand(H, N2), p_full[:, None].expand(rank, H, N2), log_dt,
                                             self.l_kernel)  # (H, N, N)
            c_t = torch.einsum("chn,hnm->chm", torch.cat([c, c.conj()], -1), corr)[..., :N2]
        self.log_dt = ssm_hint(nn.Parameter(log_dt), hint)
        self.log_A_real = ssm_hint(nn.Parameter(torch.log(-lam.real).float().repeat(H, 1)), hint)  # (H, N/2)
        self.A_imag = ssm_hint(nn.Parameter((-lam.imag).float().repeat(H, 1)), hint)  # (H, N/2), > 0
        self.B = ssm_hint(nn.Parameter(torch.view_as_real(b).float().repeat(H, 1, 1)), hint)  # (H, N/2, 2)
        self.P = ssm_hint(nn.Parameter(torch.view_as_real(p_full).float()[:, None].repeat(1, H, 1, 1)),
                          hint)  # (R, H, N/2, 2)
        self.C = nn.Parameter(torch.view_as_real(c_t).float().contiguous())  # (C_k, H, N/2, 2): C~
        self.D = nn.Parameter(torch.randn(H))

    def state_size(self, seq_len: int) -> int:
        """Real state entries per example in recurrent form: H x N per direction."""
        return self.d_model * self.d_state * (2 if self.bidirectional else 1)

    def kernel(self, length: int) -> torch.Tensor:
        """Real kernel(s) of shape (C_k, H, length), built at L_k roots of unity; C_k = 2 when bidirectional."""
        L_k = self.l_kernel
        if length > L_k:
            raise ValueError(f"S4 was built for kernels of length <= {L_k} (l_max / max_kernel_length), "
                             f"got {length}; build it with l_max >= the input length")
        dt = torch.exp(self.log_dt).unsqueeze(-1)  # (H, 1)
        lam = torch.complex(-torch.exp(self.log_A_real), -self.A_imag)  # (H, N/2)
        p = _c(self.P)  # (R, H, N/2)
        left = torch.cat([_c(self.B).unsqueeze(0), p], 0)  # (1+R, H, N/2): B, P
        right = torch.cat([_c(self.C), p.conj()], 0)  # (C_k+R, H, N/2): C~, Q = conj(P)
        v = left.unsqueeze(1) * right.unsqueeze(0) * dt  # (1+R, C_k+R, H, N/2)
        n_l, n_r = v.shape[:2]
        real = self.log_dt.dtype
        ang = 2 * math.pi / L_k * torch.arange(L_k // 2 + 1, dtype=torch.float64, device=dt.device)
        omega = torch.polar(torch.ones_like(ang), -ang)  # (L_k/2+1,) roots of unity, float64
        z = (2 * (1 - omega) / (1 + omega)).to(lam.dtype)  # bilinear map of the nodes
        r = cauchy(v.permute(2, 0, 1, 3).reshape(v.shape[2], n_l * n_r, -1), lam * dt, z)  # (H, l r, nodes)
        r = r.reshape(-1, n_l, n_r, z.shape[0]).permute(1, 2, 0, 3)  # (1+R, C_k+R, H, nodes)
        R = self.rank
        r00, r01, r10, r11 = r[:1, :-R], r[:1, -R:], r[1:, :-R], r[1:, -R:]
        if R == 1:
            k_f = r00 - r01 * r10 / (1 + r11)  # (1, C_k, H, nodes)
        else:  # Woodbury with an R x R solve per node
            m = torch.eye(R, dtype=r.dtype, device=r.device) + r11.permute(2, 3, 0, 1)  # (H, nodes, R, R)
            sol = torch.linalg.solve(m, r10.permute(2, 3, 0, 1))  # (H, nodes, R, C_k)
            k_f = r00 - torch.einsum("ajhl,hljc->achl", r01, sol)  # (1, C_k, H, nodes)
        k_f = k_f[0] * (2 / (1 + omega)).to(k_f.dtype)  # (C_k, H, nodes): bilinear correction
        return torch.fft.irfft(k_f, n=L_k)[..., :length].to(real)  # (C_k, H, length)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, L, H) -> (B, L, H). `mask` (B, L), True at padding, zeroes padded inputs when bidirectional."""
        return conv_layer(x, self.kernel, self.D, bidirectional=self.bidirectional,
                          max_kernel_length=self.max_kernel_length, mask=mask)
