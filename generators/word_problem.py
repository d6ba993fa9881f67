"""Group word problems: the running product of a sequence of group elements (data_cards/word_problem.md).

*The Illusion of State in State-Space Models* (Merrill, Petty, Sabharwal, ICML 2024; jopetty/word-problem,
`src/generate_data.py`): a sample is L elements of a finite group drawn uniformly (tokens are the elements' ids,
numbered as that repository's `abstract_algebra` numbers them: generators/_groups.py), and the label at every
position t is the product g_0·g_1·…·g_t. Groups: S5 (120 elements, not solvable), A5 (60, simple), A4_x_Z5 (60,
solvable) and Z60 (60, abelian); any `S<n>`, `A<n>`, `Z<n>` or `_x_` product of at most 256 elements works.

Worked example (Z60, L = 4: the running sum mod 60)::

    position   0   1   2   3
    inputs    50  20   5  59
    targets   50  10  15  14

>>> from ssmbench.seeding import keys_for
>>> task, cfg = WordProblem(), WordProblemConfig(group="Z60", L=6)
>>> row = task.generate(cfg, keys_for("word_problem", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> all(y[t] == sum(x[: t + 1]) % 60 for t in range(6))
True
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._rng import randint, rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TaskConfig, TrainingPolicy  # noqa: E402
from ssmbench.errors import VerificationError  # noqa: E402

from ._groups import cayley_table, parse_group  # noqa: E402
from ._recall import MAX_LENGTH, check_int, token_spec  # noqa: E402

PAPER_GROUPS = ("S5", "A5", "A4_x_Z5", "Z60")
"""The groups of the paper's experiments (its repository's data files: A5, A4_x_Z5, Z60; S5 in the paper's text)."""


@dataclass(frozen=True)
class WordProblemConfig(TaskConfig):
    group: str = "A5"
    """Group name: `S<n>`, `A<n>`, `Z<n>` or products joined by `_x_` (A4_x_Z5), at most 256 elements."""
    L: int = 20
    """Sequence length (the paper's k; its repository's data files have k = 2 .. 20)."""

    def __post_init__(self) -> None:
        parse_group(self.group)
        check_int("L", self.L, 1, MAX_LENGTH)

    @property
    def order(self) -> int:
        return int(cayley_table(self.group).shape[0])


@njit(parallel=True, cache=True)
def _fill_word_problem(keys, table, inputs, targets):
    n, L = inputs.shape
    order = table.shape[0]
    for i in prange(n):
        state = rng_state(keys[i])
        product = 0  # the identity
        for t in range(L):
            g = randint(state, order)
            inputs[i, t] = g
            product = table[product, g]
            targets[i, t] = product


@typing.final
class WordProblem(Task[WordProblemConfig]):
    """Track the running product of group elements: the word problem of S5, A5, A4xZ5 or Z60 (Illusion of State)

    Input (L,) token ids: uniform elements of the group; target (L,): at every position the product of the elements
    so far (element ids as jopetty/word-problem numbers them).
    """

    name: ClassVar[str] = "word_problem"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = WordProblemConfig
    presets: ClassVar[dict[str, WordProblemConfig]] = {g: WordProblemConfig(group=g) for g in PAPER_GROUPS}
    default_preset: ClassVar[str] = "A5"
    default_n: ClassVar[int] = 100_000
    preset_option: ClassVar[typing.Literal["length", "size", "preset"]] = "preset"
    hf_task_category: ClassVar[str] = "token-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"state_tracking": 2})

    def spec(self, config: WordProblemConfig) -> Spec:
        spec = token_spec(config.L, config.order, "uint8", "int16",
                          f"ids of uniform elements of {config.group} (jopetty/word-problem's numbering; 0 is the "
                          f"identity)",
                          "at every position t the id of the product of elements 0..t")
        # a product of uniform elements is uniform over the group: chance is 1/|G|, scaled accuracy means something
        return dataclasses.replace(spec, metrics=(*spec.metrics, "scaled_accuracy"))

    def generate(self, config: WordProblemConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        out = {"inputs": np.empty((keys.shape[0], config.L), np.uint8),
               "targets": np.empty((keys.shape[0], config.L), np.int16)}
        if keys.shape[0]:
            _fill_word_problem(keys, np.ascontiguousarray(cayley_table(config.group)), out["inputs"],
                               out["targets"])
        return out

    def oracle(self, config: WordProblemConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Multiply the elements left to right with the group's Cayley table (every id must be an element)."""
        table = cayley_table(config.group)
        x = [int(t) for t in np.asarray(sample["inputs"]).reshape(-1)]
        if len(x) != config.L or any(not 0 <= g < config.order for g in x):
            raise VerificationError("word_problem sample is malformed",
                                    [f"expected {config.L} element ids in 0..{config.order - 1}"])
        targets, product = np.empty(config.L, np.int16), 0
        for t, g in enumerate(x):
            product = int(table[product, g])
            targets[t] = product
        return {"targets": targets}
