"""Shared SSM pieces: chunked Vandermonde kernels with float64 phases, kernel casts and FFT convolution.

Private to `ssmbench.reference_models`; it imports only torch, so a model file plus this one can be copied into
another project. The kernel of a diagonal SSM is `K[k] = sum_n W_n exp(k log_n)`. Writing `k = cT + t` gives
`K[cT + t] = sum_n (W_n exp(cT log_n)) exp(t log_n)`: one table of `T` powers, one of chunk starts, and real
batched matrix products over n for all chunks at once (docs/models.md, Fast paths). Phases `k * Im log` are formed in
float64 and reduced mod 2 pi before cos/sin, which keeps the kernel within about 4e-7 (relative) at any length.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

TWO_PI = 2.0 * math.pi
KERNEL_CASTS = ("real", "prod", "imag", "sum", "real_prod")


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (n >= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


def chunk_length(length: int, rows: int) -> int:
    """Power-of-two chunk T that balances the power table (N x T) against the chunk-start table (N x rows L/T)."""
    target = math.sqrt(max(1, length) * max(1, rows))
    return max(1, min(next_pow2(length), 1 << max(0, round(math.log2(target)))))


class _Powers(torch.autograd.Function):
    """exp(s (log_re + i log_im)) for every step s, as (real, imag) tables (G, S, N), with a hand-written backward.

    The phase s * log_im is formed in float64 and reduced mod 2 pi before cos/sin (pitfall 1); the magnitude is
    safe in the working dtype. The backward uses dP/dlog_re = s P and dP/dlog_im = i s P, and so needs only the two
    tables: about half the memory passes of autograd through remainder, cos, sin and exp. Written with a separate
    `setup_context` and a generated vmap rule, so that a stack of models (`torch.func.vmap`, packed runs) runs it.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(log_re: torch.Tensor, log_im: torch.Tensor,  # type: ignore[override]
                steps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dtype = log_re.dtype
        phase = torch.remainder(steps.double()[:, None] * log_im.double().unsqueeze(1), TWO_PI)  # (G, S, N)
        phase = phase.to(dtype)
        mag = torch.exp(steps.to(dtype)[:, None] * log_re.unsqueeze(1))  # (G, S, N)
        return mag * torch.cos(phase), mag * torch.sin(phase)

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: tuple) -> None:  # type: ignore[override]
        _, log_im, steps = inputs
        ctx.save_for_backward(*output, steps)
        ctx.im_dtype = log_im.dtype

    @staticmethod
    def backward(ctx, g_re: torch.Tensor | None, g_im: torch.Tensor | None) -> tuple:  # type: ignore[override]
        p_re, p_im, steps = ctx.saved_tensors
        g_re = torch.zeros_like(p_re) if g_re is None else g_re
        g_im = torch.zeros_like(p_im) if g_im is None else g_im
        s = steps.to(p_re.dtype)
        d_re = torch.addcmul(g_re * p_re, g_im, p_im)  # Re(conj(g) P)
        d_im = torch.addcmul(g_im * p_re, g_re, p_im, value=-1.0)  # Re(conj(g) i P)
        return (d_re.transpose(1, 2) @ s, (d_im.transpose(1, 2) @ s).to(ctx.im_dtype), None)  # (G, N) each


def _powers(log_re: torch.Tensor | None, log_im: torch.Tensor | None, steps: torch.Tensor,
            dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Tables exp(s log Lambda) for every step s, as (real, imag), each (G, S, N); a missing part is 0."""
    ref = log_re if log_re is not None else log_im
    assert ref is not None
    log_re = torch.zeros(ref.shape, dtype=dtype, device=ref.device) if log_re is None else log_re.to(dtype)
    log_im = torch.zeros(ref.shape, dtype=dtype, device=ref.device) if log_im is None else log_im
    return _Powers.apply(log_re, log_im, steps)


def vandermonde(w_re: torch.Tensor, w_im: torch.Tensor, log_re: torch.Tensor | None,
                log_im: torch.Tensor | None, length: int, *, imag: bool = False,
                chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Re (and optionally Im) of K[g, m, k] = sum_n W[g, m, n] exp(k (log_re[g, n] + i log_im[g, n])).

    With k = cT + t, W'[c] = W * Lambda^(cT) and P[t] = Lambda^t: Re K = Re W' . Re P - Im W' . Im P and
    Im K = Re W' . Im P + Im W' . Re P, real batched matrix products over n for all chunks at once. Tables are laid
    out (G, steps, N) so that every elementwise step runs over contiguous memory.

    Args:
        w_re, w_im: (G, M, N) real and imaginary parts of the output weights (G groups sharing one Lambda).
        log_re: (G, N) real part of log Lambda (<= 0), or None for 0.
        log_im: (G, N) imaginary part of log Lambda, or None for 0. Pass it in float64 when it is itself a
            product (for example dt * Im Lambda), so that k * log_im keeps full precision.
        length: kernel length L_k.
        imag: also return Im K.
        chunk: chunk length T (default: balanced, see `chunk_length`).

    Returns:
        (Re K, Im K or None), each (G, M, length) in the dtype of w_re.
    """
    G, M, N = w_re.shape
    dtype, device = w_re.dtype, w_re.device
    T = chunk or chunk_length(length, M)
    n_chunks = -(-length // T)
    p_re, p_im = _powers(log_re, log_im, torch.arange(T, device=device), dtype)  # (G, T, N)
    q_re, q_im = _powers(log_re, log_im, torch.arange(n_chunks, device=device) * T, dtype)  # (G, C, N)
    w_re, w_im, q_re, q_im = w_re.unsqueeze(1), w_im.unsqueeze(1), q_re.unsqueeze(2), q_im.unsqueeze(2)
    wq_re = (w_re * q_re - w_im * q_im).reshape(G, n_chunks * M, N)  # (G, C M, N), Re W'
    wq_im = (w_re * q_im + w_im * q_re).reshape(G, n_chunks * M, N)  # (G, C M, N), Im W'
    p_re, p_im = p_re.transpose(1, 2), p_im.transpose(1, 2)  # (G, N, T) views
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # TF32 costs ~1e-3 relative kernel error (pitfall 7)
    try:
        outs = [torch.bmm(wq_re, p_re) - torch.bmm(wq_im, p_im)]  # (G, C M, T)
        if imag:
            outs.append(torch.bmm(wq_re, p_im) + torch.bmm(wq_im, p_re))  # (G, C M, T)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    res = [o.reshape(G, n_chunks, M, T).transpose(1, 2).reshape(G, M, n_chunks * T)[..., :length]
           for o in outs]  # (G, M, L_k)
    return res[0], (res[1] if imag else None)


def cast_kernel(k_re: torch.Tensor, k_im: torch.Tensor | None, how: str) -> torch.Tensor:
    """Real kernel from (Re K, Im K), each (..., H, L_k): `real`, `prod`, `imag`, `sum` or `real_prod`."""
    if how == "real":
        return k_re
    assert k_im is not None
    if how == "prod":
        return k_re * k_im
    if how == "imag":
        return k_im
    if how == "sum":
        return k_re + k_im
    if how == "real_prod":  # first floor(H/2) channels Re K, the rest Re K * Im K
        half = k_re.shape[-2] // 2
        return torch.cat([k_re[..., :half, :], (k_re * k_im)[..., half:, :]], dim=-2)
    raise ValueError(f"unknown kernel cast {how!r}")


def zoh_log_and_scale(log_dt: torch.Tensor, lam_re: torch.Tensor, lam_im: torch.Tensor,
                      dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Zero-order hold of a diagonal continuous SSM, per channel h and mode n.

    Args:
        log_dt: (H,) log step sizes. lam_re, lam_im: (H, N) or (N,) real and imaginary parts of Lambda (Re < 0).

    Returns:
        (Re dt Lambda in `dtype`, Im dt Lambda in float64, Re s, Im s), with s = (exp(dt Lambda) - 1) / Lambda
        (guarded by max(|Lambda|^2, 1e-7)) in `dtype`. Computed in float64 so that exp(z) - 1 keeps its digits
        at tiny dt.
    """
    dt = torch.exp(log_dt.double()).unsqueeze(-1)  # (H, 1)
    lre, lim = lam_re.double(), lam_im.double()
    zre, zim = dt * lre, dt * lim  # (H, N)
    # exp(z) - 1 without cancellation: expm1(x) cos y - 2 sin^2(y/2) + i e^x sin y
    e_re = torch.expm1(zre) * torch.cos(zim) - 2.0 * torch.sin(zim / 2) ** 2
    e_im = torch.exp(zre) * torch.sin(zim)
    denom = torch.clamp(lre * lre + lim * lim, min=1e-7)
    s_re = (e_re * lre + e_im * lim) / denom  # (e - 1) * conj(Lambda) / |Lambda|^2
    s_im = (e_im * lre - e_re * lim) / denom
    return zre.to(dtype), zim, s_re.to(dtype), s_im.to(dtype)


def fft_conv(u: torch.Tensor, k_fwd: torch.Tensor, k_bwd: torch.Tensor | None = None) -> torch.Tensor:
    """Causal (or two-sided) per-channel convolution via FFT.

    y[i] = sum_{0 <= i-j < L_k} k_fwd[i-j] u[j] + sum_{1 <= j-i <= L_k} k_bwd[j-i-1] u[j].

    Args:
        u: (B, H, L) input. k_fwd: (H, L_k) causal kernel. k_bwd: (H, L_k) backward kernel starting at lag 1.

    Returns:
        (B, H, L), computed in float32 (or float64 for float64 inputs) outside autocast.
    """
    L, L_k = u.shape[-1], k_fwd.shape[-1]
    n = next_pow2(L + L_k)  # n >= L + L_k: no wrap-around (pitfall 4); a power of two is fast (pitfall 5)
    work = torch.float64 if u.dtype == torch.float64 else torch.float32
    with torch.autocast(device_type=u.device.type, enabled=False):
        u, k_fwd = u.to(work), k_fwd.to(work)
        if k_bwd is None:
            k_f = torch.fft.rfft(k_fwd, n=n)  # (H, n/2+1)
        else:
            buf = torch.cat([k_fwd, k_fwd.new_zeros(k_fwd.shape[0], n - 2 * L_k),
                             k_bwd.to(work).flip(-1)], dim=-1)  # (H, n)
            k_f = torch.fft.rfft(buf, n=n)  # (H, n/2+1)
        u_f = torch.fft.rfft(u, n=n)  # (B, H, n/2+1)
        return torch.fft.irfft(u_f * k_f, n=n)[..., :L]  # (B, H, L)


def ssm_hint(param: torch.nn.Parameter, hint: dict) -> torch.nn.Parameter:
    """Attach an optimiser hint (`_optim`) to a parameter and return it."""
    param._optim = dict(hint)  # type: ignore[attr-defined]
    return param


def conv_layer(x: torch.Tensor, kernel_fn, D: torch.Tensor, *, bidirectional: bool,
               max_kernel_length: int | None, mask: torch.Tensor | None) -> torch.Tensor:
    """The long-convolution mixer GELU(K * u + D u) shared by DLR, DSS_EXP, S4D, S4 and SGConv.

    The FFT runs along the last dimension, on the (B, H, L) view; its output is laid out once as x (one copy, in
    x's dtype), so that D u, GELU, their backward and the layers after read memory in order. Applied to the
    transposed view instead, every one of them ran strided: an SGConv layer's forward+backward took 7-26 % longer
    on the CPU (benchmarks/harness/conv_layout.py), and GELU took ATen's scalar erf (outputs differ by float32 rounding).

    Args:
        x: (B, L, H). kernel_fn: length -> (C_k, H, length) real kernels (C_k = 2 when bidirectional).
        D: (H,) skip. mask: (B, L), True at padding; padded inputs are zeroed for two-sided kernels.
    """
    L = x.shape[1]
    if mask is not None and bidirectional:
        x = x.masked_fill(mask.unsqueeze(-1), 0.0)  # (B, L, H)
    L_k = min(L, max_kernel_length) if max_kernel_length else L
    k = kernel_fn(L_k)  # (C_k, H, L_k)
    y = fft_conv(x.transpose(1, 2), k[0], k[1] if bidirectional else None)  # (B, H, L)
    y = torch.empty_like(x).copy_(y.transpose(1, 2))  # (B, L, H), in x's dtype and memory layout
    return F.gelu(y + D * x)  # (B, L, H)
