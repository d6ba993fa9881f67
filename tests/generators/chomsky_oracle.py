"""Slow pure-Python references of the Chomsky-hierarchy DCF tasks, drawing from the same per-sample stream as the
kernels.

Each sampler follows the paper's procedure as its data card restates it, in the paper's own shape (the bracketed
expression is built recursively, as `generate_one_expression_and_result` does, not with the kernel's explicit
stack) and labels it in its own way: Python's `eval` of the expression text for the brackets, a Python list for the
stack. A test can then ask for byte equality with the kernels.
"""

from __future__ import annotations

from recall_oracle import PyStream

IGNORE = -100


def _tape(tokens: list[int], query: int, answer: list[int], scored: int) -> tuple[list[int], list[int]]:
    return (tokens + [query] * len(answer),
            [IGNORE] * len(tokens) + answer[:scored] + [IGNORE] * (len(answer) - scored))


def reverse_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    bits = [rng.randint(2) for _ in range(L)]
    return _tape(bits, 2, list(reversed(bits)), L)


def stack_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    s = 1 if L == 1 else 1 + rng.randint(L - 1)
    stack = [rng.randint(2) for _ in range(s)]
    actions = [2 + rng.randint(3) for _ in range(L - s)]
    current = list(stack)
    for a in actions:
        if a == 2:
            if current:
                current.pop()
        else:
            current.append(a - 3)
    answer = current[::-1] + [2]
    return _tape(stack + actions, 5, answer + [0] * (L + 1 - len(answer)), len(answer))


def expression_text(rng: PyStream, length: int, m: int, mult: bool) -> str:
    """The paper's recursive `generate_one_expression_and_result`, as text (its value is left to `eval`)."""
    if length == 1:
        return str(rng.randint(m))
    if length == 2:
        return f"-{rng.randint(m)}"
    if length == 3:
        return f"({rng.randint(m)})"
    if length == 4:
        return f"(-{rng.randint(m)})"
    left_length = 1 + rng.randint(length - 4)
    left = expression_text(rng, left_length, m, mult)
    right = expression_text(rng, length - left_length - 3, m, mult)
    op = "+-*"[rng.randint(3 if mult else 2)]
    return f"({left}{op}{right})"


def brackets_sample(key: int, L: int, m: int, mult: bool) -> tuple[list[int], list[int]]:
    text = expression_text(PyStream(key), L, m, mult)
    ids = {**{str(d): d for d in range(m)}, "+": m, "-": m + 1, "*": m + 2, "(": m + 3, ")": m + 4}
    return [ids[c] for c in text] + [m + 6], [IGNORE] * L + [eval(text) % m]  # noqa: S307 (digits, + - * ( ))


def equation_sample(key: int, L: int, m: int) -> tuple[list[int], list[int]]:
    if L < 3:
        return [0] * L + [m + 6], [IGNORE] * L + [0]
    rng = PyStream(key)
    text = expression_text(rng, L - 2, m, False)
    value = eval(text) % m  # noqa: S307 (digits, + - ( ))
    idx = rng.randint(L - 2)
    while not text[idx].isdigit():
        idx = (idx + 1) % (L - 2)
    equation = f"{text[:idx]}x{text[idx + 1:]}={value}"
    ids = {**{str(d): d for d in range(m)}, "+": m, "-": m + 1, "(": m + 2, ")": m + 3, "x": m + 4, "=": m + 5}
    return [ids[c] for c in equation] + [m + 6], [IGNORE] * L + [int(text[idx])]


def duplicate_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    bits = [rng.randint(2) for _ in range(L)]
    return _tape(bits, 2, bits * 2, 2 * L)


def odds_first_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    bits = [rng.randint(2) for _ in range(L)]
    odd = [b for p, b in enumerate(bits) if p % 2 == 1]
    even = [b for p, b in enumerate(bits) if p % 2 == 0]
    return _tape(bits, 2, odd + even, L)


def bucket_sort_sample(key: int, L: int, v: int) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    symbols = [rng.randint(v) for _ in range(L)]
    return _tape(symbols, v, sorted(symbols), L)


def missing_duplicate_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    if L == 1:
        return [1, 4], [IGNORE, 1]
    rng = PyStream(key)
    half = [rng.randint(2) for _ in range(L // 2)]
    tape = half + half
    idx = rng.randint(len(tape))
    label, tape[idx] = tape[idx], 2
    return tape + [3] * (L % 2) + [4], [IGNORE] * L + [label]


def _operands(rng: PyStream, L: int) -> list[int]:
    """The expression `n 2 m` (little-endian bits), or one number for L <= 2, as the paper draws it."""
    if L <= 2:
        value = rng.randint(2**L - 1)
        return [(value >> j) & 1 for j in range(L)]
    width = 1 + rng.randint(L - 2)
    numbers = []
    for w in (width, L - 1 - width):
        bits = [0] * w
        while not any(bits):
            bits = [rng.randint(2) for _ in range(w)]
        numbers.append(bits)
    return numbers[0] + [2] + numbers[1]


def _binary(value: int) -> list[int]:
    return [int(c) for c in f"{value:b}"[::-1]]


def _split(tokens: list[int]) -> tuple[int, int]:
    cut = tokens.index(2)
    return (int("".join(map(str, tokens[:cut][::-1])), 2), int("".join(map(str, tokens[cut + 1:][::-1])), 2))


def binary_addition_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    tokens = _operands(PyStream(key), L)
    if L <= 2:
        total = int("".join(map(str, tokens[::-1])), 2)
    else:
        n, m = _split(tokens)
        total = n + m
    answer = _binary(total) + [2]
    return _tape(tokens, 3, answer + [0] * (L + 1 - len(answer)), len(answer))


def binary_multiplication_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    tokens = _operands(PyStream(key), L)
    if L <= 2:
        answer = [0] * (L - 1) + [2]
    else:
        n, m = _split(tokens)
        answer = _binary(n * m) + [2]
    return _tape(tokens, 3, answer + [0] * (L - len(answer)), len(answer))


def compute_sqrt_sample(key: int, L: int) -> tuple[list[int], list[int]]:
    rng = PyStream(key)
    bits = [0] * L
    while not any(bits):
        bits = [rng.randint(2) for _ in range(L)]
    number = int("".join(map(str, bits)), 2)
    low, high = 0, 1 << ((L + 1) // 2)  # bisection on r * r <= number (not math.isqrt, the oracle's)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if middle * middle <= number else (low, middle)
    root = low
    h = (L + 1) // 2
    return _tape(bits, 2, [int(c) for c in format(root, f"0{h}b")], h)
