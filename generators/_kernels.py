"""Numba routines shared by the atomic tasks: inf-normalised noise, positional channels, subsets, sorting.

All kernels take their output arrays as arguments and draw only from the per-sample stream they are given.
"""

from __future__ import annotations

from . import _rng  # noqa: F401  (sets NUMBA_DISABLE_INTEL_SVML before numba loads)
from ._rng import normal_s, randint_s

# isort: split
import numpy as np  # noqa: E402
from numba import njit  # noqa: E402


@njit(cache=True)
def fill_ninf_normal(s, out):
    """out[:] = ninf(g), g ~ N(0, 1)^n: noise divided by its max |.| (float64, then rounded). Returns the state."""
    n = out.shape[0]
    g = np.empty(n, dtype=np.float64)
    peak = 0.0
    for t in range(n):
        g[t], s = normal_s(s)
        a = abs(g[t])
        if a > peak:
            peak = a
    peak = max(peak, 1e-12)
    for t in range(n):
        out[t] = g[t] / peak
    return s


@njit(cache=True)
def fill_unit_vector(s, out):
    """out[:] = g / ||g||_2 with g ~ N(0, 1)^n (float64, then rounded to out's dtype). Returns the state."""
    n = out.shape[0]
    g = np.empty(n, dtype=np.float64)
    sq = 0.0
    for t in range(n):
        g[t], s = normal_s(s)
        sq += g[t] * g[t]
    norm = max(np.sqrt(sq), 1e-12)
    for t in range(n):
        out[t] = g[t] / norm
    return s


@njit(cache=True)
def sorted_subset(s, n, m, out):
    """out[:m] = a uniformly random m-subset of {0, ..., n-1}, ascending (Floyd's algorithm, then a sort)."""
    k = 0
    for j in range(n - m, n):
        t, s = randint_s(s, j + 1)
        seen = False
        for q in range(k):
            if out[q] == t:
                seen = True
                break
        out[k] = j if seen else t
        k += 1
    out[:m] = np.sort(out[:m])
    return s


@njit(cache=True)
def stable_order_by_distance(values, centre, order):
    """order[:] = indices of `values` sorted by float64 |v - centre|, ties by index (a stable LSD radix sort).

    The distance of two float32 values is exact in float64 and non-negative, so its IEEE bit pattern orders like
    the value; sorting (bits, index) pairs with a stable radix sort (six 11-bit digits, histograms built in one
    pass, digits that are equal everywhere skipped) gives the stable order in O(n).
    """
    n = values.shape[0]
    keys = np.empty(n, dtype=np.uint64)
    for t in range(n):
        keys[t] = np.float64(abs(np.float64(values[t]) - np.float64(centre))).view(np.uint64)
    hist = np.zeros((6, 2049), dtype=np.int64)
    for t in range(n):
        k = keys[t]
        for p in range(6):
            hist[p, np.int64((k >> np.uint64(11 * p)) & np.uint64(0x7FF)) + 1] += 1
    idx = np.arange(n).astype(np.int64)
    keys2 = np.empty(n, dtype=np.uint64)
    idx2 = np.empty(n, dtype=np.int64)
    for p in range(6):
        h = hist[p]
        if h[1:].max() == n:  # this digit is the same everywhere: the pass would not move anything
            continue
        for b in range(2048):
            h[b + 1] += h[b]
        shift = np.uint64(11 * p)
        for t in range(n):
            k = keys[t]
            b = np.int64((k >> shift) & np.uint64(0x7FF))
            dst = h[b]
            keys2[dst] = k
            idx2[dst] = idx[t]
            h[b] = dst + 1
        keys, keys2 = keys2, keys
        idx, idx2 = idx2, idx
    order[:] = idx


@njit(cache=True)
def fill_noise_then_zeros(s, xi, n_values, pos):
    """One sample's input (T, 3): channel 0 = ninf noise on [0, n_values) then zeros; channels 1-2 = pos.

    Returns the noise values (float32, length n_values) and the state.
    """
    v = np.empty(n_values, dtype=np.float32)
    s = fill_ninf_normal(s, v)
    xi[:n_values, 0] = v
    xi[n_values:, 0] = 0.0
    xi[:, 1:] = pos
    return v, s
