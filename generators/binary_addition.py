"""Binary addition: add two little-endian binary numbers (Chomsky hierarchy, context-sensitive;
data_cards/binary_addition.md).

A sample is `n 2 m` (`_binary.draw_operands`: L tokens, numbers in little-endian binary), then L + 1 query tokens 3;
the answer is n + m in little-endian binary without leading zeros, then the termination token 2, as
`tasks/cs/binary_addition.py` of google-deepmind/neural_networks_chomsky_hierarchy lays it out. The paper pads the
answer with 0s to L + 1 tokens and scores only up to the termination token (`accuracy_mask`); ssmbench stores -100
after it. L <= 2 is the paper's special case: one number and its own binary form.

Worked example (L = 9, the paper's docstring 001 + 01101 = 01011, i.e. 4 + 22 = 26)::

    position   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18
    inputs     0  0  1  2  0  1  1  0  1  3  3  3  3  3  3  3  3  3  3   (2 the '+', 3 the query token)
    targets    -  -  -  -  -  -  -  -  -  0  1  0  1  1  2  -  -  -  -   (- is -100; 2 ends the sum)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = BinaryAddition(), BinaryAdditionConfig(L=12)
>>> row = task.generate(cfg, keys_for("binary_addition", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> plus = x.index(2); n, m = value_of(x[:plus]), value_of(x[plus + 1:12])
>>> y[12:12 + y[12:].index(2)] == bits_of(n + m), x[12:] == [3] * 13
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
class BinaryAdditionConfig(StringConfig):
    """L: the expression's length (both numbers and the '+'); the answer has L + 1 positions."""


@njit(parallel=True, cache=True)
def _fill_addition(keys, inputs, targets):
    n, t = inputs.shape
    L = (t - 1) // 2
    for i in prange(n):
        state = rng_state(keys[i])
        x, y = inputs[i], targets[i]
        width = draw_operands(state, L, x)
        x[L:] = 3
        y[:] = IGNORE_INDEX
        total = np.zeros(L + 1, np.int64)
        if width == 0:
            for j in range(L):
                total[j] = x[j]
        else:
            carry = 0
            for j in range(L):  # bit j of n (below width) plus bit j of m (below L - 1 - width)
                a = x[j] if j < width else 0
                b = x[width + 1 + j] if j < L - 1 - width else 0
                s = a + b + carry
                total[j] = s & 1
                carry = s >> 1
            total[L] = carry
        top = L
        while top > 0 and total[top] == 0:
            top -= 1
        for j in range(top + 1):
            y[L + j] = total[j]
        y[L + top + 1] = SEPARATOR


@typing.final
class BinaryAddition(Task[BinaryAdditionConfig]):
    """Add two little-endian binary numbers (Chomsky hierarchy, CS: binary_addition)

    Input (2L+1,) token ids: n, 2, m in little-endian binary (L tokens), then L + 1 query tokens 3; target (2L+1,):
    n + m in little-endian binary then 2 at the first query positions, -100 elsewhere.
    """

    name: ClassVar[str] = "binary_addition"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = BinaryAdditionConfig
    presets: ClassVar[dict[str, BinaryAdditionConfig]] = {"40": BinaryAdditionConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text2text-generation"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 12}, preset_family="chomsky")

    def spec(self, config: BinaryAdditionConfig) -> Spec:
        return tape_spec(config.L, config.L + 1, ("0", "1", "+"), ("0", "1", "<end>"),
                         "token ids: two numbers in little-endian binary around 2 (+)",
                         "the sum in little-endian binary, then 2 (the end); -100 after the end")

    def generate(self, config: BinaryAdditionConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tape(keys, config.L, config.L + 1)
        if keys.shape[0]:
            _fill_addition(keys, out["inputs"], out["targets"])
        return out

    def oracle(self, config: BinaryAdditionConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Add the two numbers as Python integers; the layout (one '+' inside, or none for L <= 2) is checked."""
        L = config.L
        tokens, _ = check_tape_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                      np.asarray(sample["targets"]).reshape(-1), L, 3, 3)
        if L <= 2:
            total = value_of(tokens) if SEPARATOR not in tokens else -1
        elif tokens.count(SEPARATOR) == 1 and 0 < tokens.index(SEPARATOR) < L - 1:
            plus = tokens.index(SEPARATOR)
            total = value_of(tokens[:plus]) + value_of(tokens[plus + 1:])
        else:
            total = -1
        if total < 0:
            raise VerificationError(f"{self.name} sample is malformed", ["expected two numbers around one 2"])
        answer = bits_of(total) + [SEPARATOR]
        return {"targets": tape_targets(L, answer + [0] * (L + 1 - len(answer)), scored=len(answer))}
