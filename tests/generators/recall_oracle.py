"""Slow pure-Python references of the recall tasks (mqar, induction_heads), drawing from the same per-sample stream.

`PyStream` re-implements `ssmbench.generators._rng` (SplitMix64, the top-53-bit uniform, Lemire's bounded integers)
on Python ints; the two samplers follow the data cards' procedures step by step, in plain loops, so a test can ask
for byte equality with the Numba kernels and, separately, check the procedures against exact probabilities.
"""

from __future__ import annotations

import math

import numpy as np

from ssmbench.seeding import splitmix64

_GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


class PyStream:
    """The counter-based stream of one sample key, on Python ints."""

    def __init__(self, key: int) -> None:
        self.state = int(key)

    def next_u64(self) -> int:
        out = splitmix64(self.state)  # splitmix64 adds the golden gamma to its argument, then mixes
        self.state = (self.state + _GOLDEN) & _MASK
        return out

    def uniform(self) -> float:
        return (self.next_u64() >> 11) * 2.0**-53

    def randint(self, n: int) -> int:
        """Uniform in [0, n): the high word of r * n, rejecting low words below 2^64 mod n."""
        threshold = ((1 << 64) - n) % n
        while True:
            product = self.next_u64() * n
            if product & _MASK >= threshold:
                return product >> 64


def mqar_sample(key: int, L: int, k: int, vocab_size: int, power_a: float, random_filler: bool
                ) -> tuple[list[int], list[int]]:
    """(inputs, targets) of one MQAR sample, as data_cards/mqar.md describes the procedure."""
    rng = PyStream(key)
    half = vocab_size // 2

    def ordered_sample(low: int, high: int) -> list[int]:
        pool = list(range(low, high))
        for j in range(k):
            t = j + rng.randint(len(pool) - j)
            pool[j], pool[t] = pool[t], pool[j]
        return pool[:k]

    keys, values = ordered_sample(1, half), ordered_sample(half, vocab_size)
    space = (L - 2 * k) // 2
    clocks = [-math.log(1.0 - rng.uniform()) / (g + 1) ** (power_a - 1.0) for g in range(space)]
    gaps = sorted(range(space), key=lambda g: clocks[g])[:k]
    inputs, targets = [0] * L, [-100] * L
    for j in range(k):
        inputs[2 * j], inputs[2 * j + 1] = keys[j], values[j]
        inputs[2 * k + 2 * gaps[j]] = keys[j]
        targets[2 * k + 2 * gaps[j]] = values[j]
    if random_filler:
        for p in range(2 * k, L):
            if inputs[p] == 0:
                inputs[p] = rng.randint(vocab_size)
    return inputs, targets


def successive_sampling_probability(weights: list[float], draws: tuple[int, ...]) -> float:
    """P(the first len(draws) draws without replacement, each ∝ weight among those left, are `draws`, in order)."""
    left, p = float(sum(weights)), 1.0
    for g in draws:
        p *= weights[g] / left
        left -= weights[g]
    return p


def induction_sample(key: int, L: int, vocab_size: int, layout: str = "ssmbench") -> tuple[list[int], list[int], int]:
    """(inputs, targets, special position) of one induction-heads sample (data_cards/induction_heads.md); H3's
    layout draws ordinary ids from 1 .. V-2 and s from [0, L-4]."""
    rng = PyStream(key)
    special = vocab_size - 1
    low = 0 if layout == "ssmbench" else 1
    inputs = [low + rng.randint(special - low) for _ in range(L - 1)] + [special]
    s = rng.randint(L - 2 if layout == "ssmbench" else L - 3)
    inputs[s] = special
    targets = [-100] * L
    targets[L - 1] = inputs[s + 1]
    return inputs, targets, s


def as_arrays(rows: list[tuple], dtypes: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    return tuple(np.array([row[i] for row in rows], dtype=dtype) for i, dtype in enumerate(dtypes))
