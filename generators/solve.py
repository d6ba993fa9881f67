"""SOLVE: read the rows of [A | B] and output X with A X = B, A a random orthogonal matrix (data_cards/solve.md).

N is the largest integer with N^2 + 2N <= L (exact integer arithmetic), so the N answer slots fall in the zero
tail after the N^2 + N data values. A is Haar-distributed: Householder QR of a Gaussian matrix G = QR in Numba
(no BLAS, so bytes do not depend on library threads), A = Q diag(sign(diag R)). X is a uniform unit vector and
B = A X is computed in float64 from the stored float32 A.

Worked example (L = 8, N = 2: N^2 + N = 6 data values, then 2 zeros)::

    t        0     1     2     3     4     5     6    7
    value   A00   A01   B0    A10   A11   B1    0    0     (+ cos, sin over T = 8)
    output                                      X0   X1    the last N of the T outputs

>>> from ssmbench.seeding import keys_for
>>> import numpy as np
>>> task, cfg = Solve(), SolveConfig(L=8)
>>> out = task.generate(cfg, keys_for("solve", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> rows = out["inputs"][0, :6, 0].reshape(2, 3).astype(np.float64)
>>> A, B, X = rows[:, :2], rows[:, 2], out["targets"][0, :, 0]
>>> bool(np.allclose(A @ A.T, np.eye(2), atol=1e-6) and np.allclose(A @ X, B, atol=1e-6))
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import final

import numpy as np
from numba import njit, prange

from ssmbench.api import TaskConfig

from ._atomic import AtomicTask, atomic_policy, atomic_spec, check_length
from ._kernels import fill_unit_vector
from ._rng import normal_s


def solve_size(L: int) -> int:
    """N = the largest integer with N^2 + 2N <= L, i.e. isqrt(L + 1) - 1."""
    return math.isqrt(L + 1) - 1


def check_solve_length(task: str, L: int) -> None:
    n = max(solve_size(L), 0) if isinstance(L, int) and not isinstance(L, bool) and L >= 0 else 0
    check_length(task, L, 8, f"N >= 2; got N={n}")


@njit(cache=True)
def _apply_reflector(rows, v, beta, k, c0, w):
    """rows[k:, c0:] -= beta * v[k:] (v[k:]^T rows[k:, c0:]), as contiguous row-wise axpy loops that vectorise."""
    n = rows.shape[0]
    m = n - c0
    acc = w[:m]
    acc[:] = 0.0
    for r in range(k, n):
        vr = v[r]
        row = rows[r, c0:]
        for c in range(m):
            acc[c] += vr * row[c]
    for r in range(k, n):
        f = beta * v[r]
        row = rows[r, c0:]
        for c in range(m):
            row[c] -= f * acc[c]


@njit(cache=True)
def haar_orthogonal(s, n, a):
    """a[:, :] = a Haar-random orthogonal n x n matrix (float64); returns the state.

    Draws G ~ N(0, 1)^{n x n} row by row, runs Householder QR on it (reflector v_k = x + sign(x_0)||x|| e_1, so
    R_kk = -sign(x_0)||x||), accumulates Q = H_0 ... H_{n-2} backwards, and scales column k by sign(R_kk)
    (sign(0) = +1).
    """
    g = np.empty((n, n), dtype=np.float64)
    for r in range(n):
        for c in range(n):
            g[r, c], s = normal_s(s)
    vs = np.zeros((n, n), dtype=np.float64)  # reflector k stored in vs[k, k:]
    betas = np.zeros(n, dtype=np.float64)
    signs = np.ones(n, dtype=np.float64)
    w = np.empty(n, dtype=np.float64)
    for k in range(n - 1):
        norm2 = 0.0
        for r in range(k, n):
            norm2 += g[r, k] * g[r, k]
        alpha = np.sqrt(norm2)
        if alpha == 0.0:
            continue  # column already zero: H_k = I, R_kk = 0, sign +1
        sgn = 1.0 if g[k, k] >= 0.0 else -1.0
        signs[k] = -sgn  # sign of R_kk
        v = vs[k]
        for r in range(k, n):
            v[r] = g[r, k]
        v[k] += sgn * alpha
        vnorm2 = 0.0
        for r in range(k, n):
            vnorm2 += v[r] * v[r]
        betas[k] = 2.0 / vnorm2
        _apply_reflector(g, v, betas[k], k, k + 1, w)
    if g[n - 1, n - 1] < 0.0:
        signs[n - 1] = -1.0
    # Q = H_0 ... H_{n-2}: apply the reflectors to the identity from the last to the first
    a[:, :] = 0.0
    for r in range(n):
        a[r, r] = 1.0
    for k in range(n - 2, -1, -1):
        if betas[k] != 0.0:
            _apply_reflector(a, vs[k], betas[k], k, k, w)
    for r in range(n):
        for c in range(n):
            a[r, c] *= signs[c]
    return s


@njit(cache=True)
def write_system(a32, s, xi, y_i, pos):
    """Draw X, write the rows of [A | B] (B = A X in float64 from the stored A) and zeros; y_i = X."""
    n = a32.shape[0]
    x_vec = np.empty(n, dtype=np.float64)
    s = fill_unit_vector(s, x_vec)
    t = 0
    for r in range(n):
        b = 0.0
        for c in range(n):
            xi[t, 0] = a32[r, c]
            b += np.float64(a32[r, c]) * x_vec[c]
            t += 1
        xi[t, 0] = b
        t += 1
    xi[t:, 0] = 0.0
    xi[:, 1:] = pos
    for r in range(n):
        y_i[r, 0] = x_vec[r]
    return s


@njit(parallel=True, cache=True)
def fill_solve(keys, pos, fixed_a, x, y):
    """Shared by SOLVE and SOLVE-FIXED: fixed_a is (0, 0) for SOLVE, the fixed float32 matrix otherwise."""
    n_samples, n = x.shape[0], y.shape[1]
    for i in prange(n_samples):
        s = keys[i]
        if fixed_a.shape[0] > 0:
            a32 = fixed_a
        else:
            a = np.empty((n, n), dtype=np.float64)
            s = haar_orthogonal(s, n, a)
            a32 = a.astype(np.float32)
        write_system(a32, s, x[i], y[i], pos)


def solve_oracle(sample: Mapping[str, np.ndarray], N: int) -> dict[str, np.ndarray]:
    """X from the stored rows of [A | B]: solve A X = B in float64 (A is orthogonal to float32 precision)."""
    rows = np.asarray(sample["inputs"])[: N * (N + 1), 0].astype(np.float64).reshape(N, N + 1)
    return {"targets": np.linalg.solve(rows[:, :N], rows[:, N]).astype(np.float32)[:, None]}


@dataclass(frozen=True)
class SolveConfig(TaskConfig):
    L: int = 4096
    """Input length; N = isqrt(L + 1) - 1 unknowns (63 at 4096, 21 at 512)."""

    def __post_init__(self) -> None:
        check_solve_length("solve", self.L)


@final
class Solve(AtomicTask[SolveConfig]):
    """Solve AX = B for X given the rows of [A | B], A a random orthogonal matrix per sample

    Input (L, 3): the N x (N+1) matrix [A | B] row by row, zeros up to L, then cos and sin. Target (N, 1): the unit
    vector X, aligned with the last N outputs.
    """

    name = "solve"
    version = "1"
    Config = SolveConfig
    policy = atomic_policy(6)

    def spec(self, config: SolveConfig):
        return atomic_spec(config.L, 3, solve_size(config.L), 1)

    def _fill(self, config: SolveConfig, keys, pos, out) -> None:
        fill_solve(keys, pos, np.empty((0, 0), np.float32), out["inputs"], out["targets"])

    def oracle(self, config: SolveConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return solve_oracle(sample, solve_size(config.L))
