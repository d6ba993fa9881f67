"""Slow pure-Python references of the state-tracking tasks, drawing from the same per-sample stream as the kernels.

Each sampler follows its data card's procedure in plain loops (the draws in the same order as the Numba kernel) and
labels the sample in its own, independent way: Python's `eval` for modular arithmetic, permutations composed as
dicts (parity from cycle counts, not inversions) for the groups. A test can then ask for byte equality with the
kernels, and separately check the procedures against exact probabilities.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from recall_oracle import PyStream

IGNORE = -100


def _final(tokens: list[int], query: int, label: int) -> tuple[list[int], list[int]]:
    return tokens + [query], [IGNORE] * len(tokens) + [label]


def parity_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    bits = [rng.randint(2) for _ in range(L)]
    return _final(bits, 2, bits.count(1) % 2)


def even_pairs_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    bits = [rng.randint(2) for _ in range(L)]
    text = "".join(map(str, bits))
    pairs = sum(text[i:i + 2] in ("01", "10") for i in range(L - 1))
    return _final(bits, 2, pairs % 2)


def cycle_sample(key: int, L: int, cycle: int) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    actions = [rng.randint(3) for _ in range(L)]
    position = 0
    for a in actions:
        position = (position + {0: -1, 1: 0, 2: 1}[a]) % cycle
    return _final(actions, 3, position)


def modular_sample(key: int, L: int, m: int) -> tuple[list[int], list[int]]:
    """Digits and operators drawn in position order (digit, then operator and digit pairs); labelled by `eval`."""
    rng = PyStream(key)
    n = L if L % 2 else L - 1
    tokens = [rng.randint(m)]
    while len(tokens) < n:
        op = rng.randint(3)
        tokens += [m + op, rng.randint(m)]
    return _final(tokens, m + 4, eval(expression_text(tokens, m)) % m)  # noqa: S307 (digits and + - * only)


def expression_text(tokens: list[int], m: int) -> str:
    return "".join(str(t) if t < m else "+-*_"[t - m] for t in tokens)


def group_elements(name: str) -> tuple[list, callable]:
    """(elements in the word-problem numbering, multiply) for S<n>, A<n>, Z<n> and `_x_` products, from scratch."""
    factors = []
    for part in name.split("_x_"):
        kind, n = part[0], int(part[1:])
        if kind == "Z":
            factors.append((list(range(n)), lambda a, b, n=n: (a + b) % n))
            continue
        perms = list(itertools.permutations(range(1, n + 1)))
        if kind == "A":
            perms = [p for p in perms if _sign(p) == 1]
        factors.append((perms, lambda a, b: tuple(a[b[i] - 1] for i in range(len(a)))))  # a(b(i))
    elements = [tuple(e) for e in itertools.product(*(f[0] for f in factors))]

    def multiply(a, b):
        return tuple(op(x, y) for (_, op), x, y in zip(factors, a, b, strict=True))

    return elements, multiply


def _sign(perm: tuple[int, ...]) -> int:
    """+1 or -1 from the cycle decomposition: (-1)^(n - number of cycles)."""
    seen, cycles = set(), 0
    for start in range(1, len(perm) + 1):
        if start not in seen:
            cycles += 1
            i = start
            while i not in seen:
                seen.add(i)
                i = perm[i - 1]
    return -1 if (len(perm) - cycles) % 2 else 1


def word_problem_sample(key: int, L: int, elements: list, multiply) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    index = {e: i for i, e in enumerate(elements)}
    xs = [rng.randint(len(elements)) for _ in range(L)]
    product, out = elements[0], []
    for g in xs:
        product = multiply(product, elements[g])
        out.append(index[product])
    return xs, out


def cycle_label_law(L: int, cycle: int) -> np.ndarray:
    """Exact P(final position = c) of L uniform steps in {-1, 0, +1} on a cycle (a convolution, step by step)."""
    p = np.zeros(cycle)
    p[0] = 1.0
    for _ in range(L):
        p = (np.roll(p, -1) + p + np.roll(p, 1)) / 3
    return p


def modular_label_law(L: int, m: int) -> np.ndarray:
    """Exact P(value = v) of a uniform expression, by dynamic programming over (sum so far, current signed term)."""
    n = L if L % 2 else L - 1
    state = np.zeros((m, m))  # [total, term]
    for d in range(m):
        state[0, d] += 1 / m
    for _ in range(n // 2):
        nxt = np.zeros((m, m))
        for total, term, d in itertools.product(range(m), range(m), range(m)):
            w = state[total, term] / (3 * m)
            nxt[(total + term) % m, d] += w  # +
            nxt[(total + term) % m, (-d) % m] += w  # -
            nxt[total, (term * d) % m] += w  # *
        state = nxt
    law = np.zeros(m)
    for total, term in itertools.product(range(m), range(m)):
        law[(total + term) % m] += state[total, term]
    assert math.isclose(law.sum(), 1.0)
    return law
