"""Fully bracketed modular expressions, shared by modular_arithmetic_brackets and solve_equation (Chomsky hierarchy,
deterministic context-free).

`tasks/dcf/modular_arithmetic_brackets.py` of google-deepmind/neural_networks_chomsky_hierarchy builds an expression
of exactly `length` characters recursively: 1 -> `d`, 2 -> `-d`, 3 -> `(d)`, 4 -> `(-d)`, and from 5 on
`(left op right)` with the left length uniform in 1..length-4 (drawn first), then the left and the right
sub-expressions, then the operator (uniform over +, - or +, -, *). `write_expression` draws in that order with an
explicit stack (Numba has no cheap recursion); `evaluate_tokens` reduces a written expression mod m.

Token ids: digit d is d, + is m, - m+1, * m+2; the brackets' ids are parameters (the two tasks number them apart).

>>> import numpy as np
>>> from ._rng import rng_state
>>> x = np.zeros(9, np.uint8)
>>> write_expression(rng_state(3), 9, 5, True, 8, 9, x, 0)
>>> bool(x[0] == 8 and x[8] == 9), int(evaluate_tokens(x, 0, 9, 5, 8, 9)) in range(5)
(True, True)
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

from collections.abc import Sequence

from ._rng import randint  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402


@njit(cache=True)
def write_expression(state, length, m, mult, lp, rp, x, start):
    """Draw an expression of `length` tokens into x[start:start + length] (the paper's draw order)."""
    kind = np.empty(2 * length + 2, np.int64)  # 0: a sub-expression to draw, 1: an operator to draw
    pos = np.empty(2 * length + 2, np.int64)
    size = np.empty(2 * length + 2, np.int64)
    kind[0], pos[0], size[0] = 0, start, length
    top = 1
    n_ops = 3 if mult else 2
    while top > 0:
        top -= 1
        k, p, s = kind[top], pos[top], size[top]
        if k == 1:
            x[p] = m + randint(state, n_ops)
        elif s == 1:
            x[p] = randint(state, m)
        elif s == 2:
            x[p] = m + 1
            x[p + 1] = randint(state, m)
        elif s == 3:
            x[p] = lp
            x[p + 1] = randint(state, m)
            x[p + 2] = rp
        elif s == 4:
            x[p] = lp
            x[p + 1] = m + 1
            x[p + 2] = randint(state, m)
            x[p + 3] = rp
        else:
            left = 1 + randint(state, s - 4)
            x[p] = lp
            x[p + s - 1] = rp
            # pushed in reverse: the left sub-expression is drawn first, then the right one, then the operator
            kind[top], pos[top], size[top] = 1, p + 1 + left, 1
            kind[top + 1], pos[top + 1], size[top + 1] = 0, p + 2 + left, s - left - 3
            kind[top + 2], pos[top + 2], size[top + 2] = 0, p + 1, left
            top += 3


@njit(cache=True)
def evaluate_tokens(x, start, length, m, lp, rp):
    """The value mod m of the fully bracketed expression x[start:start + length] (a '-' after nothing, '(' or an
    operator negates the digit that follows)."""
    values = np.empty(length + 1, np.int64)
    ops = np.empty(length + 1, np.int64)
    nv = 0
    no = 0
    negate = False
    previous = -1
    for q in range(start, start + length):
        t = np.int64(x[q])
        if t < m:
            values[nv] = (m - t) % m if negate else t
            nv += 1
            negate = False
        elif t == m + 1 and (previous == -1 or previous == lp or m <= previous <= m + 2):
            negate = True
        elif t == rp:
            if no > 0 and ops[no - 1] != lp:
                b, a = values[nv - 1], values[nv - 2]
                op = ops[no - 1] - m
                nv -= 1
                no -= 1
                values[nv - 1] = (a + b) % m if op == 0 else ((a - b) % m if op == 1 else (a * b) % m)
            no -= 1  # the matching '('
        else:
            ops[no] = t
            no += 1
        previous = t
    return values[0]


def parse_value(tokens: Sequence[int], m: int, lp: int, rp: int) -> int:
    """The value mod m of an expression in token ids by recursive descent (the slow, obvious form); ValueError when
    the tokens do not form an expression of the grammar `d | -d | (E) | (E op E)`.

    >>> parse_value([8, 3, 7, 8, 6, 4, 9, 9], 5, 8, 9)  # (3*(-4)) = -12 = 3 mod 5
    3
    """
    tokens = [int(t) for t in tokens]

    def expr(i: int) -> tuple[int, int]:
        if i < len(tokens) and tokens[i] < m:
            return tokens[i] % m, i + 1
        if i + 1 < len(tokens) and tokens[i] == m + 1 and tokens[i + 1] < m:
            return -tokens[i + 1] % m, i + 2
        if i < len(tokens) and tokens[i] == lp:
            a, j = expr(i + 1)
            if j < len(tokens) and tokens[j] == rp:
                return a, j + 1
            if j < len(tokens) and m <= tokens[j] <= m + 2:
                b, k = expr(j + 1)
                if k < len(tokens) and tokens[k] == rp:
                    return (a + b, a - b, a * b)[tokens[j] - m] % m, k + 1
        raise ValueError(f"no expression at token {i}")

    value, end = expr(0)
    if end != len(tokens):
        raise ValueError(f"tokens left after the expression (at {end})")
    return value
