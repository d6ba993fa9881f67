"""Flip-flop language modelling, FFL(T, p) of Liu et al. 2023, "Exposing Attention Glitches" (data_cards/flipflop.md).

A sample is T = L tokens, L / 2 (instruction, bit) pairs over the vocabulary w r i 0 1 (ids 0 1 2 3 4, the ids of the
published `synthseq/flipflop` data's README). The first instruction is `w`, the last is `r`, the others are drawn
i.i.d.: `i` with probability p_ignore, `w` and `r` with (1 - p_ignore) / 2 each. The bit after `w` or `i` is a fair
coin; the bit after `r` is the bit of the most recent `w`. Scored ("clean" mode, the paper's): at every `r` the label
is the bit that follows it, -100 elsewhere. The paper's FFL(0.8) trains; FFL(0.98) (sparse) and FFL(0.1) (dense)
test out of distribution (presets "0.8", "0.98", "0.1").

Worked example (L = 12: w 1 i 0 r 1 w 0 i 1 r 0)::

    position   0  1  2  3  4  5  6  7  8  9 10 11
    inputs     w  1  i  0  r  1  w  0  i  1  r  0      ids 0 4 2 3 1 4 0 3 2 4 1 3
    targets    -  -  -  -  1  -  -  -  -  -  0  -      ids 4 at 4, 3 at 10; - is -100

>>> from ssmbench.seeding import keys_for
>>> task, cfg = FlipFlop(), FlipFlopConfig(L=64, p_ignore=0.5)
>>> row = task.generate(cfg, keys_for("flipflop", task.version, cfg.to_dict(), 0, "train", 0, 1))
>>> x, y = row["inputs"][0].tolist(), row["targets"][0].tolist()
>>> x[0], x[62], set(x[0::2]) <= {0, 1, 2}, set(x[1::2]) <= {3, 4}
(0, 1, True, True)
>>> reads = [t for t in range(0, 64, 2) if x[t] == 1]
>>> all(y[t] == x[t + 1] == [x[s + 1] for s in range(0, t, 2) if x[s] == 0][-1] for t in reads)
True
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._rng import randint, rng_state, uniform  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Spec, Task, TaskConfig, TrainingPolicy  # noqa: E402
from ssmbench.errors import ConfigError, VerificationError  # noqa: E402

from ._recall import IGNORE_INDEX, MAX_LENGTH, check_int, token_spec  # noqa: E402

WRITE, READ, IGNORE, BIT0, BIT1 = 0, 1, 2, 3, 4
"""Token ids: the mapping of the `synthseq/flipflop` README ({'w': 0, 'r': 1, 'i': 2, '0': 3, '1': 4})."""
SYMBOLS = "wri01"
PAPER_P_IGNORE = {"0.8": 0.8, "0.98": 0.98, "0.1": 0.1}
"""The paper's FFL(p_i) distributions: 0.8 trains (and its in-distribution test), 0.98 the sparse tail, 0.1 the dense."""


@dataclass(frozen=True)
class FlipFlopConfig(TaskConfig):
    L: int = 512
    """Sequence length T in tokens (even, >= 4): L / 2 instructions, each followed by its bit (the paper: 512)."""
    p_ignore: float = 0.8
    """p_i, the probability of `i` for the instructions between the first `w` and the last `r`; `w` and `r` take
    (1 - p_i) / 2 each (the paper's FFL(p_i) shorthand)."""

    def __post_init__(self) -> None:
        check_int("L", self.L, 4, MAX_LENGTH)
        if self.L % 2:
            raise ConfigError("L", f"must be even (instruction, bit pairs), got {self.L}")
        p = self.p_ignore
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 0 <= p <= 1:
            raise ConfigError("p_ignore", f"must be a probability in [0, 1], got {p!r}")


@njit(parallel=True, cache=True)
def _fill_flipflop(keys, p_ignore, inputs, targets):
    n, L = inputs.shape
    last = L // 2 - 1
    p_write = p_ignore + (1.0 - p_ignore) / 2.0  # u < p_ignore: i; u < p_write: w; else r
    for s in prange(n):
        state = rng_state(keys[s])
        x, y = inputs[s], targets[s]
        y[:] = IGNORE_INDEX
        register = 0
        for j in range(last + 1):
            if j == 0:
                op = WRITE
            elif j == last:
                op = READ
            else:
                u = uniform(state)
                op = IGNORE if u < p_ignore else (WRITE if u < p_write else READ)
            x[2 * j] = op
            if op == READ:
                x[2 * j + 1] = BIT0 + register
                y[2 * j] = BIT0 + register
            else:
                bit = randint(state, 2)
                x[2 * j + 1] = BIT0 + bit
                if op == WRITE:
                    register = bit


def render(tokens: np.ndarray) -> str:
    """The flip-flop string of a row of ids, as the published data writes it (`w1i0r1...`)."""
    return "".join(SYMBOLS[int(t)] for t in tokens)


@typing.final
class FlipFlop(Task[FlipFlopConfig]):
    """Output the bit of the most recent write at every read: flip-flop language modelling (Liu et al. 2023)

    Input (L,) token ids w r i 0 1 = 0 1 2 3 4, (instruction, bit) pairs from FFL(L, p_ignore); target (L,): at each
    `r` the bit id that follows it (the last written bit), -100 elsewhere.
    """

    name: ClassVar[str] = "flipflop"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = FlipFlopConfig
    presets: ClassVar[dict[str, FlipFlopConfig]] = {k: FlipFlopConfig(p_ignore=p) for k, p in PAPER_P_IGNORE.items()}
    default_preset: ClassVar[str] = "0.8"
    default_n: ClassVar[int] = 16_000
    preset_option: ClassVar[typing.Literal["length", "size", "preset"]] = "preset"
    hf_task_category: ClassVar[str] = "token-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(groups={"flipflop": 0}, scoring_keys=("p_ignore",))
    """A fresh stream every step (the paper trains on fresh samples); the quick section and paper rows "flipflop"."""

    def spec(self, config: FlipFlopConfig) -> Spec:
        return token_spec(
            config.L, 5, "uint8", "int8",
            f"token ids w=0 r=1 i=2 '0'=3 '1'=4: {config.L // 2} (instruction, bit) pairs, first w, last r, "
            f"p(i) = {config.p_ignore} in between",
            "at each r the id of the bit that follows it (the most recently written bit); -100 elsewhere")

    def generate(self, config: FlipFlopConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        out = {"inputs": np.empty((keys.shape[0], config.L), np.uint8),
               "targets": np.empty((keys.shape[0], config.L), np.int8)}
        if keys.shape[0]:
            _fill_flipflop(keys, float(config.p_ignore), out["inputs"], out["targets"])
        return out

    def oracle(self, config: FlipFlopConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the 1-bit register over the inputs: at each `r`, the bit of the most recent `w`; the grammar (pairs,
        first w, last r, every read bit equal to the register) is checked."""
        x = [int(t) for t in np.asarray(sample["inputs"]).reshape(-1)]
        ops, bits = x[0::2], x[1::2]
        problems = []
        if any(op not in (WRITE, READ, IGNORE) for op in ops) or any(b not in (BIT0, BIT1) for b in bits):
            problems.append(f"not (instruction, bit) pairs: {render(np.array(x[:16]))}...")
        elif ops[0] != WRITE or ops[-1] != READ:
            problems.append(f"the first instruction is {SYMBOLS[ops[0]]} and the last {SYMBOLS[ops[-1]]}; "
                            "expected w and r")
        if problems:
            raise VerificationError("flipflop sample is malformed", problems)
        targets = np.full(config.L, IGNORE_INDEX, np.int8)
        register = None
        for j, (op, bit) in enumerate(zip(ops, bits, strict=True)):
            if op == WRITE:
                register = bit
            elif op == READ:
                if bit != register:
                    raise VerificationError("flipflop sample is malformed",
                                            [f"instruction {j} reads {SYMBOLS[bit]}, the register holds "
                                             f"{SYMBOLS[register]}"])
                targets[2 * j] = register
        return {"targets": targets}
