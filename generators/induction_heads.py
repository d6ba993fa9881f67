"""Induction heads as the Mamba paper sets it (Gu and Dao 2023, section 4.1.2; data_cards/induction_heads.md).

A sample is L - 1 tokens drawn uniformly from the ordinary ids 0 .. V-2, with the special id V-1 written over one
position s (uniform in [0, L-3], so the token after it is ordinary), and the special id again at the last position
L - 1; the one scored label, at L - 1, is the token that followed the first special id, x[s + 1]. Vocabulary 16 and
training at L = 256, testing at 2^6 .. 2^20 (presets "64" .. "1048576"), as in the paper. `layout="h3"` is the
generator of H3 (HazyResearch/safari), the prior work the paper compares with: ordinary ids 1 .. V-2 (id 0, H3's
unused no-op token, never occurs) and s uniform in [0, L-4].

Worked example (L = 8, V = 4: ordinary ids 0, 1, 2, special 3)::

    position   0  1  2  3  4  5  6  7
    inputs     2  0  3  1  1  2  0  3       special at s = 2, then x[3] = 1
    targets    -  -  -  -  -  -  -  1       (- is -100)

>>> from ssmbench.seeding import keys_for
>>> task, cfg = InductionHeads(), InductionHeadsConfig(L=64)
>>> row = task.generate(cfg, keys_for("induction_heads", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y, s = row["inputs"][0], row["targets"][0], int(row["special_position"][0])
>>> [int(p) for p in (x == 15).nonzero()[0]] == [s, 63] and int(y[63]) == int(x[s + 1])
True
>>> int((y != -100).sum())
1
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ._rng import randint, rng_state  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Field, Spec, Task, TaskConfig, TrainingPolicy  # noqa: E402
from ssmbench.errors import ConfigError, VerificationError  # noqa: E402

from ._recall import IGNORE_INDEX, MAX_LENGTH, check_int, token_spec  # noqa: E402

LAYOUTS = ("ssmbench", "h3")
"""Values of `layout`: ssmbench's reading of the paper's text (the default), or H3's generator (safari's
`generate_induction_head`, test-split samples)."""
PAPER_LENGTHS = tuple(2**e for e in range(6, 21))
"""The Mamba paper's test lengths 2^6 .. 2^20 (Table 2); it trains at 2^8 = 256."""


@dataclass(frozen=True)
class InductionHeadsConfig(TaskConfig):
    L: int = 256
    """Sequence length, the final special token included."""
    vocab_size: int = 16
    """Ids 0 .. vocab_size-2 are ordinary tokens (1 .. vocab_size-2 with layout "h3"), vocab_size-1 is the special
    token."""
    layout: str = "ssmbench"
    """"ssmbench": s uniform in [0, L-3], ordinary ids from 0; "h3": H3's generator, s uniform in [0, L-4] and id 0
    unused (data_cards/induction_heads.md)."""
    added_defaults: ClassVar[dict[str, Any]] = {"layout": "ssmbench"}

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigError("layout", f"must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        check_int("L", self.L, 4, MAX_LENGTH)
        check_int("vocab_size", self.vocab_size, 3 if self.layout == "ssmbench" else 4, 256)

    @property
    def first_ordinary(self) -> int:
        """The lowest ordinary id: 0, or 1 with H3's layout (its id 0 is a no-op token that never occurs)."""
        return 0 if self.layout == "ssmbench" else 1

    @property
    def last_first_special(self) -> int:
        """The largest position of the first special token: L - 3, or L - 4 with H3's layout."""
        return self.L - (3 if self.layout == "ssmbench" else 4)


@njit(parallel=True, cache=True)
def _fill_induction(keys, vocab_size, low, last_s, inputs, targets, special_position):
    n, L = inputs.shape
    special = vocab_size - 1
    for i in prange(n):
        state = rng_state(keys[i])
        x = inputs[i]
        for t in range(L - 1):
            x[t] = low + randint(state, special - low)
        s = randint(state, last_s + 1)
        x[s] = special
        x[L - 1] = special
        targets[i, :] = IGNORE_INDEX
        targets[i, L - 1] = x[s + 1]
        special_position[i] = s


@typing.final
class InductionHeads(Task[InductionHeadsConfig]):
    """Recall the token that followed the special token's first occurrence (Mamba's induction heads)

    Input (L,) token ids: uniform ordinary tokens with the special token at one random position and at the end;
    target (L,): at the last position the token that followed the first special token, -100 elsewhere.
    """

    name: ClassVar[str] = "induction_heads"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = InductionHeadsConfig
    presets: ClassVar[dict[str, InductionHeadsConfig]] = {str(L): InductionHeadsConfig(L=L) for L in PAPER_LENGTHS}
    default_preset: ClassVar[str] = "256"
    default_n: ClassVar[int] = 16_000
    hf_task_category: ClassVar[str] = "token-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"zoology": 1})

    def spec(self, config: InductionHeadsConfig) -> Spec:
        return token_spec(
            config.L, config.vocab_size, "uint8", "int16",
            f"token ids: ordinary {config.first_ordinary}..{config.vocab_size - 2}, special {config.vocab_size - 1} "
            f"at special_position "
            f"and at the last position",
            "at the last position the token after the first special token; -100 elsewhere",
            extra={"special_position": Field("int32", (), "position s of the first special token (the answer is "
                                                          "inputs[s + 1]; recall distance L - 2 - s)", shuffle=True)})

    def generate(self, config: InductionHeadsConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        n = keys.shape[0]
        out = {"inputs": np.empty((n, config.L), np.uint8), "targets": np.empty((n, config.L), np.int16),
               "special_position": np.empty(n, np.int32)}
        if n:
            _fill_induction(keys, config.vocab_size, config.first_ordinary, config.last_first_special, out["inputs"],
                            out["targets"], out["special_position"])
        return out

    def oracle(self, config: InductionHeadsConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Find the special token's first occurrence in the inputs and label the last position with its successor."""
        x = [int(t) for t in np.asarray(sample["inputs"]).reshape(-1)]
        special = config.vocab_size - 1
        where = [p for p, t in enumerate(x) if t == special]
        if len(where) != 2 or where[1] != config.L - 1 or where[0] > config.last_first_special:
            raise VerificationError("induction_heads sample is malformed",
                                    [f"special token {special} at {where[:5]}, expected once in "
                                     f"[0, {config.last_first_special}] and at L-1 = {config.L - 1}"])
        if min(x) < config.first_ordinary:
            raise VerificationError("induction_heads sample is malformed",
                                    [f"token id {min(x)} below the first ordinary id {config.first_ordinary}"])
        targets = np.full(config.L, IGNORE_INDEX, np.int16)
        targets[-1] = x[where[0] + 1]
        return {"targets": targets, "special_position": np.int32(where[0])}
