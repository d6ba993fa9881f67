"""Two binary numbers around a separator, shared by binary_addition and binary_multiplication (Chomsky hierarchy,
context-sensitive).

`tasks/cs/binary_addition.py` of google-deepmind/neural_networks_chomsky_hierarchy writes `n 2 m` in little-endian
binary (least significant bit first): for L >= 3 the first number's width uniform in 1..L-2, the second's L-1 minus
it, each number uniform in 1 .. 2^width - 1 (zero-padded to its width); for L <= 2 one number uniform in
0 .. 2^L - 2 in L bits and no separator. `draw_operands` draws that into a tape; `bits_of` / `value_of` convert.

>>> value_of([0, 1, 1]), bits_of(6), bits_of(0)
(6, [0, 1, 1], [0])
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

from collections.abc import Sequence

from ._rng import randint  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

from numba import njit  # noqa: E402

SEPARATOR = 2
"""The operator token between the numbers (the paper's `2`), also the answer's termination class."""


@njit(cache=True)
def draw_operands(state, L, x):
    """Write the expression of L tokens into x[:L]; the first number's width (0 when L <= 2: a single number)."""
    if L <= 2:
        value = randint(state, (1 << L) - 1)
        for j in range(L):
            x[j] = (value >> j) & 1
        return 0
    width = 1 + randint(state, L - 2)
    x[width] = SEPARATOR
    for start, w in ((0, width), (width + 1, L - 1 - width)):
        while True:  # uniform over the nonzero w-bit numbers: w fair bits, redrawn while all are 0
            nonzero = False
            for j in range(w):
                b = randint(state, 2)
                x[start + j] = b
                nonzero = nonzero or b == 1
            if nonzero:
                break
    return width


def value_of(bits: Sequence[int]) -> int:
    """The number whose little-endian bits are `bits`."""
    return sum(int(b) << j for j, b in enumerate(bits))


def bits_of(value: int) -> list[int]:
    """Little-endian bits of `value` without leading (trailing) zeros; [0] for 0 (the paper's `f'{num:b}'`)."""
    return [int(c) for c in reversed(f"{value:b}")]
