"""MIPS: at each position output the value whose key best matches the query so far (data_cards/mips.md).

Each position i carries a query q_i, a key k_i and a value v_i (unit vectors in R^D); the target at i is
v[j*] with j* = argmax_{j <= i} <q_i, k_j> (float64 inner products of the stored float32 vectors, ties to the
lowest j; over all j when causal = false).

Worked example (L = 3, D = 2; scores <q_i, k_j> shown for j <= i)::

    i   scores over j <= i        j*   target
    0   [0.3]                     0    v0
    1   [-0.9, 0.8]               1    v1
    2   [0.95, 0.1, -0.2]         0    v0

>>> import numpy as np
>>> from ssmbench.seeding import keys_for
>>> task, cfg = Mips(), MipsConfig(L=16, D=2)
>>> out = task.generate(cfg, keys_for("mips", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> out["inputs"].shape, out["targets"].shape
((1, 16, 8), (1, 16, 2))
>>> bool(np.array_equal(task.oracle(cfg, {"inputs": out["inputs"][0]})["targets"], out["targets"][0]))
True

Speed: the argmax is exact but screened in float32. Eight queries at a time scan the keys, each tracking its best
and runner-up float32 score; a float32 score differs from the float64 one by at most 2 (D + 1) 2^-24 (D rounded products of
unit-vector coordinates and their rounded sum), so when the runner-up trails the best by more than twice that bound,
the float32 winner is the float64 winner. Otherwise (near-ties, exact ties) the query is rescanned in float64. Memory is O(L * D).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import final

import numpy as np
from numba import njit, prange

from ssmbench.api import TaskConfig

from ._atomic import AtomicTask, atomic_policy, atomic_spec, check_bool, check_length, check_positive
from ._kernels import fill_unit_vector

_LANES = 8


@dataclass(frozen=True)
class MipsConfig(TaskConfig):
    L: int = 4096
    """Sequence length."""
    D: int = 4
    """Dimension of the query, key and value vectors."""
    causal: bool = True
    """Argmax over keys j <= i (the paper); false: over all keys (not used in the paper; models may be bidirectional)."""

    def __post_init__(self) -> None:
        check_positive("D", self.D)
        check_bool("causal", self.causal)
        check_length("mips", self.L, 1)


@njit(cache=True)
def _exact_argmax(qk64, q_row, i_stop):
    """Lowest j < i_stop maximising the float64 inner product (the slow, exact path)."""
    best = -np.inf
    arg = 0
    for j in range(i_stop):
        score = 0.0
        for d in range(q_row.shape[0]):
            score += q_row[d] * qk64[j, d]
        if score > best:
            best = score
            arg = j
    return arg


@njit(cache=True)
def _screen_d4(kt32, q32, i0, stop, best, runner, arg):
    """D = 4 fast path: eight lanes of float32 scores per key, branch-free updates (vectorises)."""
    L = q32.shape[0]
    q0 = np.empty(_LANES, dtype=np.float32)
    q1 = np.empty(_LANES, dtype=np.float32)
    q2 = np.empty(_LANES, dtype=np.float32)
    q3 = np.empty(_LANES, dtype=np.float32)
    for lane in range(_LANES):
        i = min(i0 + lane, L - 1)
        q0[lane], q1[lane], q2[lane], q3[lane] = q32[i, 0], q32[i, 1], q32[i, 2], q32[i, 3]
    k0, k1, k2, k3 = kt32[0], kt32[1], kt32[2], kt32[3]
    for j in range(stop):
        a0, a1, a2, a3 = k0[j], k1[j], k2[j], k3[j]
        for lane in range(_LANES):
            s = ((q0[lane] * a0 + q1[lane] * a1) + q2[lane] * a2) + q3[lane] * a3
            gt = s > best[lane]
            r = runner[lane]
            runner[lane] = best[lane] if gt else (s if s > r else r)
            arg[lane] = j if gt else arg[lane]
            best[lane] = s if gt else best[lane]


@njit(cache=True)
def _screen_any_d(kt32, q32, i0, stop, best, runner, arg):
    """Any D: the same screen with the scores accumulated one dimension at a time."""
    L, D = q32.shape[0], q32.shape[1]
    qq = np.empty((D, _LANES), dtype=np.float32)
    for lane in range(_LANES):
        for d in range(D):
            qq[d, lane] = q32[min(i0 + lane, L - 1), d]
    sc = np.empty(_LANES, dtype=np.float32)
    for j in range(stop):
        sc[:] = 0.0
        for d in range(D):
            kd = kt32[d, j]
            for lane in range(_LANES):
                sc[lane] += qq[d, lane] * kd
        for lane in range(_LANES):
            s = sc[lane]
            gt = s > best[lane]
            r = runner[lane]
            runner[lane] = best[lane] if gt else (s if s > r else r)
            arg[lane] = j if gt else arg[lane]
            best[lane] = s if gt else best[lane]


@njit(cache=True)
def _argmax_block(kt32, q32, k64, q64, i0, causal, out):
    """out[lane] = exact argmax for queries i0 .. i0+7 (fewer at the end), screened in float32."""
    L, D = q32.shape[0], q32.shape[1]
    lanes = min(_LANES, L - i0)
    best = np.full(_LANES, -np.inf, dtype=np.float32)
    runner = np.full(_LANES, -np.inf, dtype=np.float32)
    arg = np.zeros(_LANES, dtype=np.int64)
    # keys every lane may see without masking, then (causal) the diagonal block, masked per lane
    stop = i0 if causal else L
    if D == 4:
        _screen_d4(kt32, q32, i0, stop, best, runner, arg)
    else:
        _screen_any_d(kt32, q32, i0, stop, best, runner, arg)
    if causal:
        for lane in range(lanes):
            for j in range(i0, i0 + lane + 1):
                s = np.float32(0.0)
                for d in range(D):
                    s += q32[i0 + lane, d] * kt32[d, j]
                if s > best[lane]:
                    runner[lane] = best[lane]
                    best[lane] = s
                    arg[lane] = j
                elif s > runner[lane]:
                    runner[lane] = s
    margin = 4.0 * (D + 1) * 2.0**-24  # twice the bound 2 (D + 1) 2^-24 on |float32 score - float64 score|
    for lane in range(lanes):
        i = i0 + lane
        if runner[lane] >= best[lane] - margin:  # near-tie in float32: decide in float64
            out[lane] = _exact_argmax(k64, q64[i], i + 1 if causal else L)
        else:
            out[lane] = arg[lane]


@njit(parallel=True, cache=True)
def _fill_mips(keys, pos, causal, x, y):
    n, L, D = y.shape[0], y.shape[1], y.shape[2]
    for i in prange(n):
        s = keys[i]
        xi = x[i]
        vec = np.empty(D, dtype=np.float32)
        for block in range(3):  # queries, then keys, then values
            for t in range(L):
                s = fill_unit_vector(s, vec)
                xi[t, block * D:(block + 1) * D] = vec
        xi[:, 3 * D:] = pos
        q32 = np.ascontiguousarray(xi[:, :D])
        kt32 = np.ascontiguousarray(xi[:, D:2 * D].T)
        q64 = q32.astype(np.float64)
        k64 = xi[:, D:2 * D].astype(np.float64)
        winners = np.empty(_LANES, dtype=np.int64)
        for i0 in range(0, L, _LANES):
            _argmax_block(kt32, q32, k64, q64, i0, causal, winners)
            for lane in range(min(_LANES, L - i0)):
                y[i, i0 + lane, :] = xi[winners[lane], 2 * D:3 * D]


@final
class Mips(AtomicTask[MipsConfig]):
    """At each position output the value whose key has the largest inner product with the query

    Input (L, 3D + 2): query, key and value unit vectors, then cos and sin. Target (L, D): the value at the key
    j <= i with the largest float64 inner product with query i (ties to the lowest j).
    """

    name = "mips"
    version = "1"
    Config = MipsConfig
    policy = atomic_policy(10)

    def spec(self, config: MipsConfig):
        D = config.D
        return atomic_spec(config.L, 3 * D + 2, config.L, D, causal=config.causal,
                           input_doc="query (D), key (D), value (D) unit vectors, cos, sin", shuffled=("inputs",))

    def _fill(self, config: MipsConfig, keys, pos, out) -> None:
        _fill_mips(keys, pos, config.causal, out["inputs"], out["targets"])

    def oracle(self, config: MipsConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Brute force in float64, one query block at a time (O(L^2) time, O(block * L) memory)."""
        x = np.asarray(sample["inputs"]).astype(np.float64)
        D, L = config.D, config.L
        q, k, v = x[:, :D], x[:, D:2 * D], x[:, 2 * D:3 * D]
        out = np.empty((L, D), dtype=np.float32)
        for start in range(0, L, 256):
            scores = q[start:start + 256] @ k.T  # (block, L)
            if config.causal:
                rows = np.arange(start, min(start + 256, L))[:, None]
                scores[np.arange(L)[None, :] > rows] = -np.inf
            out[start:start + 256] = v[np.argmax(scores, axis=1)]  # argmax takes the lowest index on ties
        return {"targets": out}
