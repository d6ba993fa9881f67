"""Stack manipulation: run POP / PUSH 0 / PUSH 1 on a given stack and output the final stack (Chomsky hierarchy,
deterministic context-free; data_cards/stack_manipulation.md).

A sample is a stack of s bits given bottom to top (s uniform in 1..L-1), then L - s actions uniform over POP (2),
PUSH 0 (3), PUSH 1 (4), then L + 1 query tokens 5, as `tasks/dcf/stack_manipulation.py` of
google-deepmind/neural_networks_chomsky_hierarchy draws them (L = 1: one bit, no action). POP on an empty stack does
nothing. The answer is the final stack top to bottom, then the termination token 2; the paper pads it with 0s to
L + 1 tokens and scores only up to the termination token (`accuracy_mask`); ssmbench stores -100 after it.

Worked example (L = 7, the paper's docstring: 0 1 1 0 PUSH 1 POP POP -> 1 1 0, then the termination token)::

    position   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14
    inputs     0  1  1  0  4  2  2  5  5  5  5  5  5  5  5     (4 PUSH 1, 2 POP, 5 the query token)
    targets    -  -  -  -  -  -  -  1  1  0  2  -  -  -  -     (- is -100; 2 ends the stack)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = StackManipulation(), StackManipulationConfig(L=7)
>>> row = task.generate(cfg, keys_for("stack_manipulation", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> len(x), x[7:] == [5] * 8, y[:7] == [-100] * 7, y.count(2)
(15, True, True, 1)
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

from ._chomsky_tape import check_tape_layout, empty_tape, tape_spec, tape_targets  # noqa: E402
from ._recall import IGNORE_INDEX  # noqa: E402
from ._regular import StringConfig  # noqa: E402

POP, PUSH_0, PUSH_1, END = 2, 3, 4, 2
"""Action ids (the paper's 2, 3, 4) and the answer's termination class (the paper's `output_size - 1`)."""


@dataclass(frozen=True)
class StackManipulationConfig(StringConfig):
    """L: the number of input tokens (stack and actions); the answer has L + 1 positions."""


@njit(parallel=True, cache=True)
def _fill_stack(keys, inputs, targets):
    n, t = inputs.shape
    L = (t - 1) // 2
    for i in prange(n):
        state = rng_state(keys[i])
        x, y = inputs[i], targets[i]
        stack = np.empty(L, np.int64)
        if L == 1:
            s = 1
        else:
            s = 1 + randint(state, L - 1)
        for p in range(s):
            stack[p] = randint(state, 2)
            x[p] = stack[p]
        depth = s
        for p in range(s, L):
            a = 2 + randint(state, 3)
            x[p] = a
            if a == 2:
                if depth > 0:
                    depth -= 1
            else:
                stack[depth] = a - 3
                depth += 1
        y[:] = IGNORE_INDEX
        for p in range(depth):
            y[L + p] = stack[depth - 1 - p]
        y[L + depth] = 2
        x[L:] = 5


def run_stack(tokens: Sequence[int]) -> list[int]:
    """The final stack, top first, of a tape of bits (the initial stack) then actions; the obvious list form.

    >>> run_stack([0, 1, 1, 0, PUSH_1, POP, POP])
    [1, 1, 0]
    """
    stack: list[int] = []
    for t in tokens:
        if t in (0, 1):
            stack.append(t)
        elif t == POP:
            stack = stack[:-1]
        else:
            stack.append(t - PUSH_0)
    return stack[::-1]


@typing.final
class StackManipulation(Task[StackManipulationConfig]):
    """Run stack instructions and output the final stack (Chomsky hierarchy, DCF: stack_manipulation)

    Input (2L+1,) token ids: a stack of bits (bottom to top), actions 2 (POP), 3 (PUSH 0), 4 (PUSH 1), then L + 1
    query tokens 5; target (2L+1,): the final stack top to bottom then 2 at the first query positions, -100
    elsewhere.
    """

    name: ClassVar[str] = "stack_manipulation"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = StackManipulationConfig
    presets: ClassVar[dict[str, StackManipulationConfig]] = {"40": StackManipulationConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text2text-generation"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 5}, preset_family="chomsky")

    def spec(self, config: StackManipulationConfig) -> Spec:
        return tape_spec(config.L, config.L + 1, ("0", "1", "POP", "PUSH 0", "PUSH 1"), ("0", "1", "<end>"),
                         "token ids: a stack of bits bottom to top, then actions 2 (POP), 3 (PUSH 0), 4 (PUSH 1)",
                         "the final stack top to bottom, then 2 (the end); -100 after the end")

    def generate(self, config: StackManipulationConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tape(keys, config.L, config.L + 1)
        if keys.shape[0]:
            _fill_stack(keys, out["inputs"], out["targets"])
        return out

    def oracle(self, config: StackManipulationConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the actions on the stack (`run_stack`); the layout is checked."""
        L = config.L
        tokens, _ = check_tape_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                      np.asarray(sample["targets"]).reshape(-1), L, 5, 3)
        stack = run_stack(tokens)
        answer = stack + [END] + [0] * (L - len(stack))
        return {"targets": tape_targets(L, answer, scored=len(stack) + 1)}
