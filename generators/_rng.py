"""Project-owned counter-based random numbers for Numba kernels, keyed by one uint64 per sample.

A stream is a 1-element uint64 array holding a SplitMix64 state, created from the sample's key with
`rng_state(key)`. Every draw advances only that sample's state, so sample i's numbers depend on keys[i] alone, for
any thread or process count (never Numba's `np.random`: 32-bit seeds, per-thread state). Normals use a 256-layer
ziggurat (Marsaglia and Tsang 2000, with Doornik's independent layer bits) whose tables are computed once here in
float64; its slow paths (wedges, the tail) use exp and log, kept deterministic by `NUMBA_DISABLE_INTEL_SVML`.

>>> s = rng_state(7)
>>> a = next_u64(s); b = next_u64(s)
>>> a != b and a == next_u64(rng_state(7))
True
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_DISABLE_INTEL_SVML", "1")  # before numba: SVML changes the last bits of exp/log

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_TWO_M53 = 1.0 / 9007199254740992.0


def _ziggurat_tables(layers: int = 256) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Doornik's ZIGNOR tables: layer edges x[0..C], ratios x[i+1]/x[i], and f(x) = exp(-x^2/2)."""
    r = 3.6541528853610088
    v = 0.00492867323399
    x = np.zeros(layers + 1)
    f = np.exp(-0.5 * r * r)
    x[0] = v / f
    x[1] = r
    for i in range(2, layers):
        x[i] = np.sqrt(-2.0 * np.log(v / x[i - 1] + f))
        f = np.exp(-0.5 * x[i] * x[i])
    x[layers] = 0.0
    ratio = x[1:] / x[:-1]
    return x, ratio, np.exp(-0.5 * x * x)


_ZX, _ZR, _ZF = _ziggurat_tables()
_ZTAIL = float(_ZX[1])


@njit(cache=True)
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def rng_state(key):
    """A fresh stream (1-element uint64 array) for one sample's key."""
    s = np.empty(1, dtype=np.uint64)
    s[0] = np.uint64(key)
    return s


@njit(cache=True)
def next_u64(state):
    """Next 64 random bits: SplitMix64 (state += golden gamma, then the finaliser)."""
    state[0] = state[0] + _GOLDEN
    return _mix(state[0])


@njit(cache=True)
def uniform(state):
    """Uniform double in [0, 1) from the top 53 bits."""
    return float(next_u64(state) >> np.uint64(11)) * _TWO_M53


@njit(cache=True)
def randint(state, n):
    """Uniform integer in [0, n) without modulo bias (Lemire's multiply-shift with rejection), n >= 1."""
    n64 = np.uint64(n)
    threshold = (np.uint64(0) - n64) % n64
    while True:
        r = next_u64(state)
        # 128-bit product hi/lo via 32-bit halves
        a_lo = r & np.uint64(0xFFFFFFFF)
        a_hi = r >> np.uint64(32)
        b_lo = n64 & np.uint64(0xFFFFFFFF)
        b_hi = n64 >> np.uint64(32)
        lo_lo = a_lo * b_lo
        hi_lo = a_hi * b_lo
        lo_hi = a_lo * b_hi
        hi_hi = a_hi * b_hi
        cross = (lo_lo >> np.uint64(32)) + (hi_lo & np.uint64(0xFFFFFFFF)) + lo_hi
        hi = hi_hi + (hi_lo >> np.uint64(32)) + (cross >> np.uint64(32))
        lo = (cross << np.uint64(32)) | (lo_lo & np.uint64(0xFFFFFFFF))
        if lo >= threshold:
            return np.int64(hi)


@njit(cache=True)
def normal(state):
    """One standard normal draw (ziggurat)."""
    while True:
        bits = next_u64(state)
        i = np.int64(bits & np.uint64(0xFF))
        u = 2.0 * (float(bits >> np.uint64(11)) * _TWO_M53) - 1.0
        if abs(u) < _ZR[i]:
            return u * _ZX[i]
        if i == 0:  # tail beyond R (Marsaglia 1964)
            while True:
                x = -np.log(1.0 - uniform(state)) / _ZTAIL
                y = -np.log(1.0 - uniform(state))
                if y + y >= x * x:
                    break
            return -(_ZTAIL + x) if u < 0.0 else _ZTAIL + x
        x = u * _ZX[i]
        f0 = np.exp(-0.5 * (_ZX[i] * _ZX[i] - x * x))
        f1 = np.exp(-0.5 * (_ZX[i + 1] * _ZX[i + 1] - x * x))
        if f1 + uniform(state) * (f0 - f1) < 1.0:
            return x


# ---- Scalar-state API: the state is a plain uint64 threaded through calls (`x, s = normal_s(s)`). ----
# Numba passes arrays to non-inlined functions with enough overhead to triple the cost of a normal draw, so the hot
# kernels use these. Both APIs produce the same stream: `normal_s` and `normal` agree draw for draw.


@njit(cache=True)
def next_s(s):
    """(64 random bits, new state)."""
    s = s + _GOLDEN
    return _mix(s), s


@njit(cache=True)
def uniform_s(s):
    """(uniform double in [0, 1), new state)."""
    bits, s = next_s(s)
    return float(bits >> np.uint64(11)) * _TWO_M53, s


@njit(cache=True)
def _normal_slow_s(s, i, u):
    while True:
        if i == 0:
            while True:
                a, s = uniform_s(s)
                b, s = uniform_s(s)
                x = -np.log(1.0 - a) / _ZTAIL
                y = -np.log(1.0 - b)
                if y + y >= x * x:
                    break
            return (-(_ZTAIL + x) if u < 0.0 else _ZTAIL + x), s
        x = u * _ZX[i]
        f0 = np.exp(-0.5 * (_ZX[i] * _ZX[i] - x * x))
        f1 = np.exp(-0.5 * (_ZX[i + 1] * _ZX[i + 1] - x * x))
        a, s = uniform_s(s)
        if f1 + a * (f0 - f1) < 1.0:
            return x, s
        bits, s = next_s(s)
        i = np.int64(bits & np.uint64(0xFF))
        u = 2.0 * (float(bits >> np.uint64(11)) * _TWO_M53) - 1.0
        if abs(u) < _ZR[i]:
            return u * _ZX[i], s


@njit(cache=True)
def normal_s(s):
    """(standard normal draw, new state); small fast path so that LLVM inlines it into callers."""
    bits, s = next_s(s)
    i = np.int64(bits & np.uint64(0xFF))
    u = 2.0 * (float(bits >> np.uint64(11)) * _TWO_M53) - 1.0
    if abs(u) < _ZR[i]:
        return u * _ZX[i], s
    return _normal_slow_s(s, i, u)


@njit(cache=True)
def randint_s(s, n):
    """(uniform integer in [0, n), new state), n >= 1; the same draws as `randint`."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = s
    r = randint(state, n)
    return r, state[0]


@njit(cache=True)
def fill_normal(state, out):
    """Fill a 1-D float64 array with standard normals."""
    for t in range(out.shape[0]):
        out[t] = normal(state)
