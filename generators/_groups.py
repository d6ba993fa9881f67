"""Finite groups for the word problems, with the element order of jopetty/word-problem (its `abstract_algebra`).

A group name is one or more factors joined by `_x_` (a direct product), each `S<n>` (symmetric), `A<n>`
(alternating) or `Z<n>` (cyclic), as `src/generate_data.py` of jopetty/word-problem reads `--group`. Elements are
numbered as that code's `G.elements` lists them, so token ids are its ids:

* `S<n>`: the permutations of (1, ..., n) in `itertools.permutations` order (index 0 is the identity); the product
  a·b is the composition a(b(i)) (`Perm.__mul__`: `self.mapping[other.mapping[i]]`);
* `A<n>`: the even permutations, in their `S<n>` order (`commutator_subalgebra` sorts by the parent's order);
* `Z<n>`: 0 .. n-1 with addition mod n (element i is a^i);
* `G_x_H`: pairs in `itertools.product` order, so (g, h) is g·|H| + h; products factor-wise.

>>> table = cayley_table("S3")
>>> table.shape, int(table[0, 4]), int(table[4, 0])          # 0 is the identity
((6, 6), 4, 4)
>>> permutations_of(3)[:3].tolist()
[[1, 2, 3], [1, 3, 2], [2, 1, 3]]
>>> int(cayley_table("Z60")[59, 2]), cayley_table("A4_x_Z5").shape
(1, (60, 60))
"""

from __future__ import annotations

import functools
import itertools
import math
import re

import numpy as np

from ssmbench.errors import ConfigError

MAX_ORDER = 256
"""Token ids are stored as uint8, so a group has at most 256 elements (S5 has 120)."""
_FACTOR = re.compile(r"([SAZ])([1-9][0-9]*)")


def permutations_of(n: int) -> np.ndarray:
    """(n!, n) the permutations of 1..n in `itertools.permutations` order."""
    return np.array(list(itertools.permutations(range(1, n + 1))), np.int64).reshape(-1, n)


def _is_even(perm: np.ndarray) -> bool:
    return sum(int(a > b) for i, a in enumerate(perm) for b in perm[i + 1:]) % 2 == 0


def _permutation_table(perms: np.ndarray) -> np.ndarray:
    """Cayley table of a set of permutations closed under composition: table[a, b] = index of a(b(i))."""
    index = {tuple(int(v) for v in p): k for k, p in enumerate(perms)}
    table = np.empty((len(perms), len(perms)), np.int64)
    for a, pa in enumerate(perms):
        for b, pb in enumerate(perms):
            table[a, b] = index[tuple(int(pa[v - 1]) for v in pb)]
    return table


def factor_order(kind: str, n: int) -> int:
    """The number of elements of S<n>, A<n> or Z<n>."""
    return {"S": math.factorial(n), "A": max(math.factorial(n) // 2, 1), "Z": n}[kind]


def parse_group(name: object) -> list[tuple[str, int]]:
    """The factors [(kind, n), ...] of a group name; ConfigError naming `group` if it is not one or too large."""
    if not isinstance(name, str):
        raise ConfigError("group", f"must be a name such as S5, A5, A4_x_Z5 or Z60, got {name!r}")
    factors = []
    for part in name.split("_x_"):
        match = _FACTOR.fullmatch(part)
        if match is None:
            raise ConfigError("group", f"{name!r}: factor {part!r} is not S<n>, A<n> or Z<n>",
                              "e.g. S5, A5, A4_x_Z5, Z60")
        kind, n = match.group(1), int(match.group(2))
        if kind in "SA" and n > 5:
            raise ConfigError("group", f"{name!r}: {kind}{n} has more than {MAX_ORDER} elements")
        factors.append((kind, n))
    order = int(np.prod([factor_order(k, n) for k, n in factors]))
    if order > MAX_ORDER:
        raise ConfigError("group", f"{name!r} has {order} elements; at most {MAX_ORDER} fit a uint8 token id")
    return factors


def _factor_table(kind: str, n: int) -> np.ndarray:
    if kind == "Z":
        return (np.arange(n)[:, None] + np.arange(n)[None, :]) % n
    perms = permutations_of(n)
    if kind == "A":
        perms = perms[[_is_even(p) for p in perms]]
    return _permutation_table(perms)


@functools.lru_cache(maxsize=32)
def _cached_table(name: str) -> np.ndarray:
    table = np.zeros((1, 1), np.int64)
    for kind, n in parse_group(name):
        right = _factor_table(kind, n)
        g, h = table.shape[0], right.shape[0]
        # (a, c)·(b, d) = (a·b, c·d), the pair (x, y) numbered x·h + y
        table = (table[:, None, :, None] * h + right[None, :, None, :]).reshape(g * h, g * h)
    table.setflags(write=False)
    return table


def cayley_table(name: str) -> np.ndarray:
    """(order, order) int64, read-only: table[a, b] = the id of a·b in the word-problem numbering."""
    return _cached_table(name)
