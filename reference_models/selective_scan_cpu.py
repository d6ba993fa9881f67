"""The selective scan of Mamba (S6) as two fused Numba loops for the CPU: one pass forward, one pass backward.

The pure-PyTorch scan in `mamba.py` materialises a dozen (L, B, E, N) tensors per chunk (`e^{Delta A}`, the
broadcast products, the gradients); on the CPU those broadcast passes are memory-bound. Here each state (b, e, n)
is one scalar carried along the sequence: forward computes `h_t = e^{Delta_t A_n} h_{t-1} + Delta_t u_t B_tn` and
accumulates `y_t += C_tn h_t`, keeping only the states for the backward loop, which runs the adjoint recurrence
`g_t = C_tn dy_t + e^{Delta_{t+1} A_n} g_{t+1}` in reverse (recomputing the exponentials) and accumulates every
gradient on the way. Same arithmetic as the PyTorch path up to the order of the sums over N and E (float64: equal
to ~1e-15, tests/reference_models/test_mamba.py).

Layouts: u, delta (Bt, E, S); A (E, N); B, C (Bt, N, S); h0 (Bt, E, N); the kept states (Bt, E, N, S), so every
loop reads and writes contiguously along t. Rows are spread over Numba threads by batch element (the gradients
of B, C sum over channels, so one thread owns a batch element's rows); the thread count follows torch's
(`torch.get_num_threads()`).

>>> import torch
>>> u, delta = torch.randn(2, 3, 5), torch.rand(2, 3, 5)
>>> A, B, C = -torch.rand(3, 4), torch.randn(2, 4, 5), torch.randn(2, 4, 5)
>>> y, h = ScanChunkCPU.apply(u, delta, A, B, C, torch.zeros(2, 3, 4))
>>> y.shape, h.shape
(torch.Size([2, 3, 5]), torch.Size([2, 3, 4]))
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
from numba import prange


@numba.njit(parallel=True, cache=True)
def _forward(u, delta, A, B, C, h0, h_out, y, neg, one):  # pragma: no cover - compiled
    """u, delta (Bt, E, S); A (E, N); B, C (Bt, N, S); h0 (Bt, E, N) -> h_out (Bt, E, N, S), y (Bt, E, S).

    State n of row (b, e) is one scalar carried along t; every array is read and written contiguously in t.
    `neg`: the transition is 2 e^{Delta A} - 1 (in [-1, 1]) instead of e^{Delta A}; `one` is 1 in u's dtype (a
    float literal would widen a float32 transition to float64).
    """
    n_batch, n_chan, n_step = u.shape
    n_state = A.shape[1]
    for b in prange(n_batch):
        du = np.empty(n_step, dtype=u.dtype)
        acc = np.empty(n_step, dtype=np.float64)
        for e in range(n_chan):
            for t in range(n_step):
                du[t] = delta[b, e, t] * u[b, e, t]
                acc[t] = 0.0
            for n in range(n_state):
                h = h0[b, e, n]
                an = A[e, n]
                for t in range(n_step):
                    a = math.exp(delta[b, e, t] * an)
                    if neg:
                        a = a + a - one
                    h = a * h + du[t] * B[b, n, t]
                    h_out[b, e, n, t] = h
                    acc[t] += C[b, n, t] * h
            for t in range(n_step):
                y[b, e, t] = acc[t]


@numba.njit(parallel=True, cache=True)
def _backward(gy, gh_end, u, delta, A, B, C, h0, h_in, gu, gdelta, gA_part, gB, gC, gh0, neg, one):  # pragma: no cover
    """Adjoint pass: gy (Bt, E, S), gh_end (Bt, E, N) and the forward's states h (Bt, E, N, S) -> the gradients.

    `g` carries dL/dh_t backwards: g_t = C_t dy_t + a_{t+1} g_{t+1}, with a_t = e^{Delta_t A} recomputed. gA_part
    (Bt, E, N) is one batch element's share of dA (summed by the caller); gB, gC (Bt, N, S) sum over channels here
    and must be zeroed by the caller. `neg`: a_t = 2 e^{Delta_t A} - 1, whose slope in Delta A is 2 e^{Delta_t A}.
    """
    n_batch, n_chan, n_step = u.shape
    n_state = A.shape[1]
    for b in prange(n_batch):
        du = np.empty(n_step, dtype=u.dtype)
        g_du = np.empty(n_step, dtype=np.float64)  # sum_n g_tn B_tn = dL/d(Delta_t u_t)
        g_da = np.empty(n_step, dtype=np.float64)  # sum_n dL/d(Delta_t A_n) A_n
        for e in range(n_chan):
            for t in range(n_step):
                du[t] = delta[b, e, t] * u[b, e, t]
                g_du[t] = 0.0
                g_da[t] = 0.0
            for n in range(n_state):
                g = gh_end[b, e, n]  # a_{t+1} g_{t+1}, carried; the step's own C dy is added below
                an = A[e, n]
                ga = 0.0
                for t in range(n_step - 1, -1, -1):
                    d = delta[b, e, t]
                    a = math.exp(d * an)
                    slope = a  # da / d(Delta A)
                    if neg:
                        slope = a + a
                        a = slope - one
                    g = g + C[b, n, t] * gy[b, e, t]  # dL/dh_t
                    prev = h_in[b, e, n, t - 1] if t > 0 else h0[b, e, n]
                    g_dA = g * prev * slope  # dL/d(Delta_t A_n)
                    g_da[t] += g_dA * an
                    ga += g_dA * d
                    g_du[t] += g * B[b, n, t]
                    gB[b, n, t] += du[t] * g
                    gC[b, n, t] += gy[b, e, t] * h_in[b, e, n, t]
                    g = a * g  # carried to step t - 1
                gA_part[b, e, n] = ga
                gh0[b, e, n] = g
            for t in range(n_step):
                gdelta[b, e, t] = g_da[t] + g_du[t] * u[b, e, t]
                gu[b, e, t] = g_du[t] * delta[b, e, t]


class ScanChunkCPU(torch.autograd.Function):
    """One chunk of the selective scan on the CPU: the interface of `mamba._ScanChunk`, fused Numba loops inside."""

    @staticmethod
    def forward(ctx, u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor,  # type: ignore[override]
                C: torch.Tensor, h0: torch.Tensor, neg: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """u, delta (Bt, E, S); A (E, N); B, C (Bt, N, S); h0 (Bt, E, N) -> y (Bt, E, S), h_end (Bt, E, N).
        `neg`: transitions 2 e^{Delta A} - 1 (Mamba's `eig_range="-1_1"`)."""
        u, delta, A, B, C, h0 = (t.detach().contiguous() for t in (u, delta, A, B, C, h0))
        Bt, E, S = u.shape
        h = torch.empty(Bt, E, A.shape[1], S, dtype=u.dtype)  # (Bt, E, N, S): every state, for the backward pass
        y = torch.empty(Bt, E, S, dtype=u.dtype)
        with _threads():
            _forward(u.numpy(), delta.numpy(), A.numpy(), B.numpy(), C.numpy(), h0.numpy(), h.numpy(), y.numpy(),
                     bool(neg), u.numpy().dtype.type(1))
        ctx.save_for_backward(u, delta, A, B, C, h0, h)
        ctx.neg = bool(neg)
        return y, h[..., -1].clone()

    @staticmethod
    def backward(ctx, gy: torch.Tensor | None, gh_end: torch.Tensor | None) -> tuple:  # type: ignore[override]
        u, delta, A, B, C, h0, h = ctx.saved_tensors
        gy = torch.zeros_like(u) if gy is None else gy.contiguous()
        gh_end = torch.zeros_like(h0) if gh_end is None else gh_end.contiguous()
        gu, gdelta = torch.empty_like(u), torch.empty_like(u)
        gA_part, gh0 = torch.empty_like(h0), torch.empty_like(h0)  # (Bt, E, N)
        gB, gC = torch.zeros_like(B), torch.zeros_like(C)  # (Bt, N, S)
        with _threads():
            _backward(gy.numpy(), gh_end.numpy(), u.numpy(), delta.numpy(), A.numpy(), B.numpy(), C.numpy(),
                      h0.numpy(), h.numpy(), gu.numpy(), gdelta.numpy(), gA_part.numpy(), gB.numpy(), gC.numpy(),
                      gh0.numpy(), ctx.neg, u.numpy().dtype.type(1))
        return gu, gdelta, gA_part.sum(0), gB, gC, gh0, None


class _threads:
    """Run the Numba loops on as many threads as torch uses here (the harness sets that per machine)."""

    def __enter__(self) -> None:
        self.before = numba.get_num_threads()
        numba.set_num_threads(max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)))

    def __exit__(self, *exc: object) -> None:
        numba.set_num_threads(self.before)
