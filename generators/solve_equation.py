"""Solve equation: find the digit hidden as `x` in a bracketed equation mod 5 (Chomsky hierarchy, deterministic
context-free; data_cards/solve_equation.md).

As `tasks/dcf/solve_equation.py` of google-deepmind/neural_networks_chomsky_hierarchy builds it: an expression of
L - 2 tokens without `*` (`_brackets.write_expression`, so the solution is unique), its value v; a position drawn
uniformly, moved right (cyclically) to the first digit, whose digit becomes the label and is replaced by `x`; then
`=` and v. L tokens in all, then the query token. L < 3 gives the paper's placeholder: L zeros, label 0.
Token ids are the paper's: digit d is d, + m, - m+1, ( m+2, ) m+3, x m+4, = m+5, the query m+6.

Worked example (L = 10, m = 5: (x-(-2))=4, so x = 2)::

    position   0  1  2  3  4  5  6  7  8  9 10
    inputs     7  9  6  7  6  2  8  8 10  4 11     (7 '(', 9 x, 6 '-', 8 ')', 10 '=', 11 the query)
    targets    -  -  -  -  -  -  -  -  -  -  2     (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = SolveEquation(), SolveEquationConfig(L=15)
>>> row = task.generate(cfg, keys_for("solve_equation", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> text = "".join(str(t) if t < 5 else "+-()x="[t - 5] for t in x[:13])
>>> len(x), x.count(9), x[13], eval(text.replace("x", str(y[-1]))) % 5 == x[14]
(16, 1, 10, True)
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._rng import randint, rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TrainingPolicy  # noqa: E402
from ssmbench.errors import VerificationError  # noqa: E402

from ._brackets import evaluate_tokens, parse_value, write_expression  # noqa: E402
from ._recall import IGNORE_INDEX, check_int  # noqa: E402
from ._regular import StringConfig, check_final_layout, empty_tapes, final_label_spec, final_targets  # noqa: E402

SYMBOLS = ("+", "-", "(", ")", "x", "=")
"""The paper's `alphabet_to_int` of solve_equation after the digits: symbol k has id modulus + k."""


@dataclass(frozen=True)
class SolveEquationConfig(StringConfig):
    """L: the number of tokens of the equation (expression, `=`, its value)."""

    modulus: int = 5
    """Digits 0..modulus-1 and classes (the paper uses 5)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("modulus", self.modulus, 2, 100)


@njit(parallel=True, cache=True)
def _fill_equation(keys, m, inputs, targets):
    n, t = inputs.shape
    L = t - 1
    for i in prange(n):
        x = inputs[i]
        targets[i, :] = IGNORE_INDEX
        x[L] = m + 6
        if L < 3:
            x[:L] = 0
            targets[i, L] = 0
            continue
        state = rng_state(keys[i])
        k = L - 2
        write_expression(state, k, m, False, m + 2, m + 3, x, 0)
        value = evaluate_tokens(x, 0, k, m, m + 2, m + 3)
        idx = randint(state, k)
        while x[idx] >= m:
            idx = (idx + 1) % k
        targets[i, L] = x[idx]
        x[idx] = m + 4
        x[k] = m + 5
        x[k + 1] = value


@typing.final
class SolveEquation(Task[SolveEquationConfig]):
    """Find the digit hidden as x in a bracketed equation modulo 5 (Chomsky hierarchy, DCF: solve_equation)

    Input (L+1,) token ids: an expression of L - 2 tokens with one digit replaced by x (m+4), then = (m+5) and the
    expression's value, then the query token m+6; target (L+1,): at the query the hidden digit, -100 elsewhere.
    """

    name: ClassVar[str] = "solve_equation"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = SolveEquationConfig
    presets: ClassVar[dict[str, SolveEquationConfig]] = {"40": SolveEquationConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 7}, preset_family="chomsky")

    def spec(self, config: SolveEquationConfig) -> Spec:
        m = config.modulus
        return final_label_spec(config.L, [*map(str, range(m)), *SYMBOLS], [str(c) for c in range(m)],
                                f"token ids of an equation of {config.L} tokens: a bracketed expression (digits "
                                f"0..{m - 1}, + {m}, - {m + 1}, ( {m + 2}, ) {m + 3}) with one digit replaced by x "
                                f"({m + 4}), then = ({m + 5}) and its value",
                                "the hidden digit")

    def generate(self, config: SolveEquationConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tapes(keys, config.L)
        if keys.shape[0]:
            _fill_equation(keys, config.modulus, out["inputs"], out["targets"])
        return out

    def oracle(self, config: SolveEquationConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Try every digit for x and keep the one whose value is the right-hand side (unique: no `*`)."""
        m, L = config.modulus, config.L
        tokens = check_final_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                    np.asarray(sample["targets"]).reshape(-1), m + 6, m)
        if L < 3:
            return {"targets": final_targets(L, 0)}
        expression, (equals, rhs) = tokens[:-2], tokens[-2:]
        if equals != m + 5 or rhs >= m or expression.count(m + 4) != 1 or m + 5 in expression:
            raise VerificationError(f"{self.name} sample is malformed", ["expected one x, then = and a digit"])
        try:
            solutions = [d for d in range(m)
                         if parse_value([d if t == m + 4 else t for t in expression], m, m + 2, m + 3) == rhs]
        except ValueError as err:
            raise VerificationError(f"{self.name} sample is malformed", [str(err)]) from None
        if len(solutions) != 1:
            raise VerificationError(f"{self.name} sample is malformed", [f"{len(solutions)} solutions for x"])
        return {"targets": final_targets(L, solutions[0])}
