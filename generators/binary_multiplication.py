"""Binary multiplication: multiply two little-endian binary numbers (Chomsky hierarchy, context-sensitive;
data_cards/binary_multiplication.md).

A sample is `n 2 m` (`_binary.draw_operands`: L tokens, numbers in little-endian binary), then L query tokens 3; the
answer is n * m in little-endian binary without leading zeros, then the termination token 2, as
`tasks/cs/binary_multiplication.py` of google-deepmind/neural_networks_chomsky_hierarchy lays it out (the product has
at most L - 1 bits, so it fits with its termination token in `output_length` = L). The paper pads with 0s and
scores only up to the termination token; ssmbench stores -100 after it. L <= 2 is the paper's special case: one
number, and the fixed answer of L - 1 zeros then 2.

Worked example (L = 9, the paper's docstring 001 * 01101 = 0001101, i.e. 4 * 22 = 88)::

    position   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17
    inputs     0  0  1  2  0  1  1  0  1  3  3  3  3  3  3  3  3  3   (2 the '*', 3 the query token)
    targets    -  -  -  -  -  -  -  -  -  0  0  0  1  1  0  1  2  -   (- is -100; 2 ends the product)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = BinaryMultiplication(), BinaryMultiplicationConfig(L=12)
>>> row = task.generate(cfg, keys_for("binary_multiplication", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> times = x.index(2); n, m = value_of(x[:times]), value_of(x[times + 1:12])
>>> y[12:12 + y[12:].index(2)] == bits_of(n * m), x[12:] == [3] * 12
(True, True)
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
from ssmbench.errors import VerificationError  # noqa: E402

from ._binary import SEPARATOR, bits_of, draw_operands, value_of  # noqa: E402
from ._chomsky_tape import check_tape_layout, empty_tape, tape_spec, tape_targets  # noqa: E402
from ._recall import IGNORE_INDEX  # noqa: E402
from ._regular import StringConfig  # noqa: E402


@dataclass(frozen=True)
class BinaryMultiplicationConfig(StringConfig):
    """L: the expression's length (both numbers and the '*'); the answer has L positions."""


@njit(parallel=True, cache=True)
def _fill_multiplication(keys, inputs, targets):
    n, t = inputs.shape
    L = t // 2
    for i in prange(n):
        state = rng_state(keys[i])
        x, y = inputs[i], targets[i]
        width = draw_operands(state, L, x)
        x[L:] = 3
        y[:] = IGNORE_INDEX
        if width == 0:  # the paper's fixed answer: L - 1 zeros, then the end
            for j in range(L - 1):
                y[L + j] = 0
            y[2 * L - 1] = SEPARATOR
            continue
        other = L - 1 - width
        acc = np.zeros(L, np.int64)  # schoolbook: column sums, then the carries
        for a in range(width):
            if x[a] == 1:
                for b in range(other):
                    acc[a + b] += x[width + 1 + b]
        carry = 0
        for j in range(L):
            s = acc[j] + carry
            acc[j] = s & 1
            carry = s >> 1
        top = L - 1
        while top > 0 and acc[top] == 0:
            top -= 1
        for j in range(top + 1):
            y[L + j] = acc[j]
        y[L + top + 1] = SEPARATOR


@typing.final
class BinaryMultiplication(Task[BinaryMultiplicationConfig]):
    """Multiply two little-endian binary numbers (Chomsky hierarchy, CS: binary_multiplication)

    Input (2L,) token ids: n, 2, m in little-endian binary (L tokens), then L query tokens 3; target (2L,): n * m
    in little-endian binary then 2 at the first query positions, -100 elsewhere.
    """

    name: ClassVar[str] = "binary_multiplication"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = BinaryMultiplicationConfig
    presets: ClassVar[dict[str, BinaryMultiplicationConfig]] = {"40": BinaryMultiplicationConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text2text-generation"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 13}, preset_family="chomsky")

    def spec(self, config: BinaryMultiplicationConfig) -> Spec:
        return tape_spec(config.L, config.L, ("0", "1", "*"), ("0", "1", "<end>"),
                         "token ids: two numbers in little-endian binary around 2 (*)",
                         "the product in little-endian binary, then 2 (the end); -100 after the end")

    def generate(self, config: BinaryMultiplicationConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tape(keys, config.L, config.L)
        if keys.shape[0]:
            _fill_multiplication(keys, out["inputs"], out["targets"])
        return out

    def oracle(self, config: BinaryMultiplicationConfig, sample: Mapping[str, np.ndarray]
               ) -> dict[str, np.ndarray]:
        """Multiply the two numbers as Python integers; the layout is checked."""
        L = config.L
        tokens, _ = check_tape_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                      np.asarray(sample["targets"]).reshape(-1), L, 3, 3)
        if L <= 2 and SEPARATOR not in tokens:
            answer = [0] * (L - 1) + [SEPARATOR]
        elif L > 2 and tokens.count(SEPARATOR) == 1 and 0 < tokens.index(SEPARATOR) < L - 1:
            times = tokens.index(SEPARATOR)
            answer = bits_of(value_of(tokens[:times]) * value_of(tokens[times + 1:])) + [SEPARATOR]
        else:
            raise VerificationError(f"{self.name} sample is malformed", ["expected two numbers around one 2"])
        return {"targets": tape_targets(L, answer + [0] * (L - len(answer)), scored=len(answer))}
