"""Compute sqrt: the integer square root of a binary number (Chomsky hierarchy, context-sensitive;
data_cards/compute_sqrt.md).

A sample is a number uniform in 1 .. 2^L - 1 written in L bits, big-endian (most significant first), then
ceil(L / 2) query tokens 2; the answer is floor(sqrt(number)) in ceil(L / 2) bits, big-endian, every position scored,
as `tasks/cs/compute_sqrt.py` of google-deepmind/neural_networks_chomsky_hierarchy lays it out.

Worked example (L = 6, the paper's docstring 100101 = 37 -> 6 = 110)::

    position   0  1  2  3  4  5  6  7  8
    inputs     1  0  0  1  0  1  2  2  2      (2 is the query token)
    targets    -  -  -  -  -  -  1  1  0      (- is -100)

>>> import math
>>> from ssmbench.seeding import keys_for
>>> task, cfg = ComputeSqrt(), ComputeSqrtConfig(L=11)
>>> row = task.generate(cfg, keys_for("compute_sqrt", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> len(x), int("".join(map(str, y[11:])), 2) == math.isqrt(int("".join(map(str, x[:11])), 2))
(17, True)
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._rng import randint, rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TrainingPolicy  # noqa: E402

from ._chomsky_tape import check_tape_layout, empty_tape, tape_spec, tape_targets  # noqa: E402
from ._recall import IGNORE_INDEX  # noqa: E402
from ._regular import StringConfig  # noqa: E402


@dataclass(frozen=True)
class ComputeSqrtConfig(StringConfig):
    """L: the number's width in bits (the root has ceil(L / 2))."""

    @property
    def T(self) -> int:
        """Answer positions: ceil(L / 2) (the paper's `output_length`)."""
        return (self.L + 1) // 2


@njit(cache=True)
def _isqrt_bits(x, L, h, out):
    """out[:h] = floor(sqrt) of the big-endian number x[:L], big-endian: the digit-by-digit method, two bits a step,
    on little-endian bit arrays (remainder R < 2^(h + 2), root r < 2^h)."""
    R = np.zeros(h + 3, np.int64)
    r = np.zeros(h + 1, np.int64)
    t = np.zeros(h + 3, np.int64)
    pad = 2 * h - L  # 1 when L is odd: a leading 0 makes whole pairs
    for step in range(h):
        hi_pos = 2 * step - pad
        hi = x[hi_pos] if hi_pos >= 0 else 0
        lo = x[hi_pos + 1]
        for k in range(h + 2, 1, -1):  # R = R << 2 | (hi lo)
            R[k] = R[k - 2]
        R[1], R[0] = hi, lo
        t[:] = 0  # t = r << 2 | 1
        t[0] = 1
        for k in range(h + 1):
            if k + 2 < h + 3:
                t[k + 2] = r[k]
        bigger = 0  # compare R with t from the top
        for k in range(h + 2, -1, -1):
            if R[k] != t[k]:
                bigger = 1 if R[k] > t[k] else -1
                break
        for k in range(h, 0, -1):  # r = r << 1
            r[k] = r[k - 1]
        if bigger >= 0:
            borrow = 0
            for k in range(h + 3):
                d = R[k] - t[k] - borrow
                borrow = 1 if d < 0 else 0
                R[k] = d + 2 * borrow
            r[0] = 1
        else:
            r[0] = 0
    for j in range(h):
        out[j] = r[h - 1 - j]


@njit(parallel=True, cache=True)
def _fill_sqrt(keys, L, inputs, targets):
    n = inputs.shape[0]
    h = (L + 1) // 2
    for i in prange(n):
        state = rng_state(keys[i])
        x = inputs[i]
        while True:  # uniform over 1 .. 2^L - 1: L fair bits, redrawn while all are 0
            nonzero = False
            for p in range(L):
                b = randint(state, 2)
                x[p] = b
                nonzero = nonzero or b == 1
            if nonzero:
                break
        x[L:] = 2
        targets[i, :L] = IGNORE_INDEX
        _isqrt_bits(x, L, h, targets[i, L:])


@typing.final
class ComputeSqrt(Task[ComputeSqrtConfig]):
    """Compute the integer square root of a big-endian binary number (Chomsky hierarchy, CS: compute_sqrt)

    Input (L + ceil(L/2),) token ids: a number in 1..2^L-1 as L big-endian bits, then ceil(L/2) query tokens 2;
    target: -100 at the bits, floor(sqrt(number)) as ceil(L/2) big-endian bits at the query positions.
    """

    name: ClassVar[str] = "compute_sqrt"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = ComputeSqrtConfig
    presets: ClassVar[dict[str, ComputeSqrtConfig]] = {"40": ComputeSqrtConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text2text-generation"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 14}, preset_family="chomsky")

    def spec(self, config: ComputeSqrtConfig) -> Spec:
        return tape_spec(config.L, config.T, ("0", "1"), ("0", "1"), "token ids: a number in 1..2^L-1 as L "
                         "big-endian bits", "floor(sqrt(number)) as ceil(L/2) big-endian bits")

    def generate(self, config: ComputeSqrtConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tape(keys, config.L, config.T)
        if keys.shape[0]:
            _fill_sqrt(keys, config.L, out["inputs"], out["targets"])
        return out

    def oracle(self, config: ComputeSqrtConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`math.isqrt` of the number, written in ceil(L/2) bits; the layout is checked."""
        bits, _ = check_tape_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                    np.asarray(sample["targets"]).reshape(-1), config.L, 2, 2)
        root = math.isqrt(int("".join(map(str, bits)), 2))
        return {"targets": tape_targets(config.L, [int(c) for c in f"{root:0{config.T}b}"])}
