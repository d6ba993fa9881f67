"""Modular arithmetic with brackets: reduce a fully bracketed expression mod 5 (Chomsky hierarchy, deterministic
context-free; data_cards/modular_arithmetic_brackets.md).

A sample is an expression of exactly L tokens drawn as `tasks/dcf/modular_arithmetic_brackets.py` of
google-deepmind/neural_networks_chomsky_hierarchy draws it (`_brackets.write_expression`; the repository's experiments
build the task with `mult=True`, so +, -, * by default), then the query token. The one label, at the query, is the
expression's value mod m. Token ids are the paper's: digit d is d, then + m, - m+1, * m+2, ( m+3, ) m+4, its `x`
m+5 (never drawn), the query m+6 (the paper's `input_size`, its output token).

Worked example (L = 8, m = 5: (3*(-4)) = -12 = 3 mod 5)::

    position   0  1  2  3  4  5  6  7  8
    inputs     8  3  7  8  6  4  9  9 11      (8 '(', 7 '*', 6 '-', 9 ')', 11 the query)
    targets    -  -  -  -  -  -  -  -  3      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = ModularArithmeticBrackets(), ModularArithmeticBracketsConfig(L=12)
>>> row = task.generate(cfg, keys_for("modular_arithmetic_brackets", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> text = "".join(str(t) if t < 5 else "+-*()"[t - 5] for t in x[:-1])
>>> len(x), x[-1], eval(text) % 5 == y[-1]
(13, 11, True)
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._rng import rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TrainingPolicy  # noqa: E402
from ssmbench.errors import ConfigError, VerificationError  # noqa: E402

from ._brackets import evaluate_tokens, parse_value, write_expression  # noqa: E402
from ._recall import IGNORE_INDEX, check_int  # noqa: E402
from ._regular import StringConfig, check_final_layout, empty_tapes, final_label_spec, final_targets  # noqa: E402

SYMBOLS = ("+", "-", "*", "(", ")", "x")
"""The paper's `alphabet_to_int` after the digits: symbol k has id modulus + k (`x` is never drawn here)."""


@dataclass(frozen=True)
class ModularArithmeticBracketsConfig(StringConfig):
    """L: the number of tokens of the expression."""

    modulus: int = 5
    """Digits 0..modulus-1 and classes (the paper uses 5)."""
    mult: bool = True
    """Whether `*` is drawn (the repository's experiments: `mult=True`; the class's own default is False)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("modulus", self.modulus, 2, 100)
        if not isinstance(self.mult, bool):
            raise ConfigError("mult", f"must be true or false, got {self.mult!r}")


@njit(parallel=True, cache=True)
def _fill_brackets(keys, m, mult, inputs, targets):
    n, t = inputs.shape
    L = t - 1
    for i in prange(n):
        state = rng_state(keys[i])
        write_expression(state, L, m, mult, m + 3, m + 4, inputs[i], 0)
        inputs[i, L] = m + 6
        targets[i, :] = IGNORE_INDEX
        targets[i, L] = evaluate_tokens(inputs[i], 0, L, m, m + 3, m + 4)


@typing.final
class ModularArithmeticBrackets(Task[ModularArithmeticBracketsConfig]):
    """Reduce a bracketed expression of digits and +, -, * modulo 5 (Chomsky hierarchy, DCF: modular_arithmetic_brackets)

    Input (L+1,) token ids: an expression of L tokens (digits 0..m-1, m +, m+1 -, m+2 *, m+3 (, m+4 )), then the
    query token m+6; target (L+1,): at the query the value mod m, -100 elsewhere.
    """

    name: ClassVar[str] = "modular_arithmetic_brackets"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = ModularArithmeticBracketsConfig
    presets: ClassVar[dict[str, ModularArithmeticBracketsConfig]] = {"40": ModularArithmeticBracketsConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 6}, preset_family="chomsky")

    def spec(self, config: ModularArithmeticBracketsConfig) -> Spec:
        m = config.modulus
        ops = "+, -, *" if config.mult else "+, -"
        return final_label_spec(config.L, [*map(str, range(m)), *SYMBOLS], [str(c) for c in range(m)],
                                f"token ids of a fully bracketed expression of {config.L} tokens: digits "
                                f"0..{m - 1}, {ops} ({m}, {m + 1}, {m + 2}), brackets {m + 3} and {m + 4}",
                                f"the value mod {m}")

    def generate(self, config: ModularArithmeticBracketsConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tapes(keys, config.L)
        if keys.shape[0]:
            _fill_brackets(keys, config.modulus, config.mult, out["inputs"], out["targets"])
        return out

    def oracle(self, config: ModularArithmeticBracketsConfig, sample: Mapping[str, np.ndarray]
               ) -> dict[str, np.ndarray]:
        """Parse and evaluate the expression (`_brackets.parse_value`); a malformed expression is refused."""
        m = config.modulus
        tokens = check_final_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                    np.asarray(sample["targets"]).reshape(-1), m + 6, m)
        if not config.mult and m + 2 in tokens:
            raise VerificationError(f"{self.name} sample is malformed", ["'*' in an expression without it"])
        try:
            value = parse_value(tokens, m, m + 3, m + 4)
        except ValueError as err:
            raise VerificationError(f"{self.name} sample is malformed", [str(err)]) from None
        return {"targets": final_targets(config.L, value)}
