"""Missing duplicate string: a bit string written twice with one bit blanked; say the blanked bit (Chomsky
hierarchy, context-sensitive; data_cards/missing_duplicate_string.md).

As `tasks/cs/missing_duplicate_string.py` of google-deepmind/neural_networks_chomsky_hierarchy builds it: h = L // 2
uniform bits, written twice; one of the 2h positions, uniform, is replaced by the placeholder 2 and its bit is the
label; an odd L appends the empty token 3. Then the query token 4 (the paper's output token). L = 1 is the paper's
placeholder: input 1, label 1.

Worked example (L = 8, the paper's docstring 01100210 -> 1)::

    position   0  1  2  3  4  5  6  7  8
    inputs     0  1  1  0  0  2  1  0  4      (2 the missing bit, 4 the query token)
    targets    -  -  -  -  -  -  -  -  1      (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = MissingDuplicateString(), MissingDuplicateStringConfig(L=9)
>>> row = task.generate(cfg, keys_for("missing_duplicate_string", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> x.count(2), x[8:], [b if b != 2 else y[-1] for b in x[:4]] == [b if b != 2 else y[-1] for b in x[4:8]]
(1, [3, 4], True)
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

from ._recall import IGNORE_INDEX  # noqa: E402
from ._regular import StringConfig, check_final_layout, empty_tapes, final_label_spec, final_targets  # noqa: E402

MISSING, EMPTY, QUERY = 2, 3, 4
"""The placeholder of the blanked bit, the paper's empty token after an odd-length tape, the query token."""


@dataclass(frozen=True)
class MissingDuplicateStringConfig(StringConfig):
    """L: the tape length (two copies of L // 2 bits, and the empty token when L is odd)."""


@njit(parallel=True, cache=True)
def _fill_missing(keys, inputs, targets):
    n, t = inputs.shape
    L = t - 1
    h = L // 2
    for i in prange(n):
        x = inputs[i]
        targets[i, :] = IGNORE_INDEX
        x[L] = 4
        if L == 1:
            x[0] = 1
            targets[i, L] = 1
            continue
        state = rng_state(keys[i])
        for p in range(h):
            bit = randint(state, 2)
            x[p] = bit
            x[h + p] = bit
        idx = randint(state, 2 * h)
        targets[i, L] = x[idx]
        x[idx] = 2
        if L % 2:
            x[L - 1] = 3


@typing.final
class MissingDuplicateString(Task[MissingDuplicateStringConfig]):
    """Find the blanked bit of a bit string written twice (Chomsky hierarchy, CS: missing_duplicate_string)

    Input (L+1,) token ids: L // 2 bits twice, one of them replaced by 2, then 3 when L is odd, then the query token
    4; target (L+1,): at the query the blanked bit, -100 elsewhere.
    """

    name: ClassVar[str] = "missing_duplicate_string"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = MissingDuplicateStringConfig
    presets: ClassVar[dict[str, MissingDuplicateStringConfig]] = {"40": MissingDuplicateStringConfig(L=40)}
    default_preset: ClassVar[str] = "40"
    default_n: ClassVar[int] = 10_000
    hf_task_category: ClassVar[str] = "text-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"chomsky": 9}, preset_family="chomsky")

    def spec(self, config: MissingDuplicateStringConfig) -> Spec:
        return final_label_spec(config.L, ("0", "1", "<missing>", "<empty>"), ("0", "1"),
                                "token ids: L // 2 uniform bits twice, one replaced by 2 (missing); 3 (empty) "
                                "closes an odd L", "the missing bit")

    def generate(self, config: MissingDuplicateStringConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys, out = empty_tapes(keys, config.L)
        if keys.shape[0]:
            _fill_missing(keys, out["inputs"], out["targets"])
        return out

    def oracle(self, config: MissingDuplicateStringConfig, sample: Mapping[str, np.ndarray]
               ) -> dict[str, np.ndarray]:
        """Read the blanked bit from the other copy; the layout (one blank, two equal copies) is checked."""
        L, h = config.L, config.L // 2
        tape = check_final_layout(self.name, np.asarray(sample["inputs"]).reshape(-1),
                                  np.asarray(sample["targets"]).reshape(-1), QUERY, 2)
        if L == 1:
            return {"targets": final_targets(L, 1)}
        first, second = tape[:h], tape[h:2 * h]
        tail_ok = tape[2 * h:] == ([EMPTY] if L % 2 else [])
        if (first + second).count(MISSING) != 1 or not tail_ok or any(
                a != b for a, b in zip(first, second, strict=True) if MISSING not in (a, b)):
            raise VerificationError(f"{self.name} sample is malformed",
                                    ["expected two equal copies with one bit replaced by 2 (then 3 if L is odd)"])
        idx = (first + second).index(MISSING)
        return {"targets": final_targets(L, (first + second)[(idx + h) % (2 * h)])}
