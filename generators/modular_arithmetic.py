"""Modular arithmetic without brackets: reduce `d op d op ... d` mod 5 (Chomsky hierarchy, regular;
data_cards/modular_arithmetic.md).

A sample is an expression of n tokens, n = L if L is odd, else L - 1 (the paper's generator shortens an even length
by one): digits uniform in 0..m-1 at even positions, operators uniform over +, -, * at odd positions, then the query
token. The one label, at the query, is the expression's value mod m with the usual precedence (* before + and -),
as `tasks/regular/modular_arithmetic.py` of google-deepmind/neural_networks_chomsky_hierarchy evaluates it. Token ids
are the paper's: digit d is d, then + is m, - is m+1, * is m+2, its blank `_` m+3 (never drawn), the query m+4.

Worked example (L = 5, m = 5: the paper's docstring expression 1 - 1 - 1 = 4)::

    position   0  1  2  3  4  5
    inputs     1  6  1  6  1  9       (6 is -, 9 the query token)
    targets    -  -  -  -  -  4       (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = ModularArithmetic(), ModularArithmeticConfig(L=10)
>>> row = task.generate(cfg, keys_for("modular_arithmetic", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> len(x), x[-1], y[:-1] == [-100] * 9
(10, 9, True)
>>> text = "".join(str(t) if t < 5 else "+-*"[t - 5] for t in x[:-1])
>>> eval(text) % 5 == y[-1]
True
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ._rng import randint, rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TrainingPolicy  # noqa: E402
from ssmbench.errors import VerificationError  # noqa: E402

from ._recall import IGNORE_INDEX, check_int  # noqa: E402
from ._regular import StringConfig, check_final_layout, empty_tapes, final_label_spec, final_targets  # noqa: E402

OPERATORS = ("+", "-", "*", "_")
"""The paper's `OP_BY_CHARACTER` order: operator k has token id modulus + k (`_`, the blank, is never drawn)."""


@dataclass(frozen=True)
class ModularArithmeticConfig(StringConfig):
    """L: the requested expression length; an even L gives an expression of L - 1 tokens."""

    modulus: int = 5
    """Digits 0..modulus-1 and classes (the paper uses 5)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("modulus", self.modulus, 2, 100)

    @property
    def n(self) -> int:
        """Tokens of the expression: L, or L - 1 when L is even (an expression has odd length)."""
        return self.L if self.L % 2 else self.L - 1


@njit(parallel=True, cache=True)
def _fill_modular(keys, m, inputs, targets):
    n, t = inputs.shape
    length = t - 1
    for i in prange(n):
        state = rng_state(keys[i])
        x = inputs[i]
        total = 0
        term = randint(state, m)
        x[0] = term
        for p in range(1, length, 2):
            op = randint(state, 3)  # 0 +, 1 -, 2 *
            digit = randint(state, m)
            x[p] = m + op
            x[p + 1] = digit
            if op == 2:
                term = (term * digit) % m
            else:
                total = (total + term) % m
                term = digit if op == 0 else (m - digit) % m
        x[length] = m + 4
        targets[i, :] = IGNORE_INDEX
        targets[i, length] = (total + term) % m


def evaluate(tokens: Sequence[int], modulus: int) -> int:
    """The value mod `modulus` of an expression in token ids, * before + and - (the slow, obvious form)."""
    terms: list[list[int]] = [[1, int(tokens[0])]]  # [sign, product] per additive term
    for op, digit in zip(tokens[1::2], tokens[2::2], strict=True):
        symbol = OPERATORS[int(op) - modulus]
        if symbol == "*":
            terms[-1][1] *= int(digit)
        else:
            terms.append([1 if symbol == "+" else -1, int(digit)])
    return sum(sign * product for sign, product in terms) % modulus


@typing.final
class ModularArithmetic(Task[ModularArithmeticConfig]):
    """Reduce an expression of digits and +, -, * modulo 5 (Chomsky hierarchy, regular: modular_arithmetic)

    Input (n+1,) token ids, n = L or L - 1 (odd): digits 0..m-1 and operators m (+), m+1 (-), m+2 (*) alternating,
    then the query token m+4; target (n+1,): at the query the value mod m (* first), -100 elsewhere.
    """

    name: ClassVar[str] = "modular_arithmetic"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = ModularArithmeticConfig
    presets: ClassVar[dict[str, ModularArithmeticConfig]] = {"40": ModularArithmeticConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 3, "state_tracking": 1},
                                                      preset_family="chomsky")

    def spec(self, config: ModularArithmeticConfig) -> Spec:
        m = config.modulus
        return final_label_spec(config.n, [*map(str, range(m)), *OPERATORS], [str(c) for c in range(m)],
                                f"token ids of an expression of {config.n} tokens: digits 0..{m - 1} at even "
                                f"positions, operators {m} (+), {m + 1} (-), {m + 2} (*) at odd ones",
                                f"the value mod {m}, * before + and -")

    def generate(self, config: ModularArithmeticConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tapes(keys, config.n)
        if keys.shape[0]:
            _fill_modular(keys, config.modulus, out["inputs"], out["targets"])
        return out

    def oracle(self, config: ModularArithmeticConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Evaluate the expression (`evaluate`); the layout and the digit / operator alternation are checked."""
        m = config.modulus
        tokens = check_final_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                    np.asarray(sample["targets"]).reshape(-1), m + 4, m)
        if any(t >= m for t in tokens[0::2]) or any(not m <= t < m + 3 for t in tokens[1::2]):
            raise VerificationError("modular_arithmetic sample is malformed",
                                    ["digits must sit at even positions and +, -, * at odd ones"])
        return {"targets": final_targets(config.n, evaluate(tokens, m))}
