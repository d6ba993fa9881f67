"""The learning-rate schedule of a run (`train.schedule`): constant, or linear warm-up then cosine decay.

Example:
    >>> f = lr_factor("cosine", warmup_steps=10, schedule_steps=110)
    >>> [round(f(s), 3) for s in (0, 5, 10, 60, 110, 200)]
    [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    >>> lr_factor("constant", 0, 100)(7)
    1.0
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...errors import ConfigError


def lr_factor(schedule: str, warmup_steps: int, schedule_steps: int) -> Callable[[int], float]:
    """Multiplier of the base LR at optimiser step s: constant, or linear warm-up then cosine to 0.

    f(s) = s / W for s < W, else max(0, (1 + cos(pi (s - W) / (S - W))) / 2); the LR is 0 at step 0 of a
    warm-up. Training may stop before S (the Pathfinder 256 / 512 runs did).
    """
    if schedule == "constant":
        return lambda s: 1.0
    if schedule != "cosine":
        raise ConfigError("train.schedule", f"must be constant or cosine, got {schedule!r}")
    if schedule_steps <= warmup_steps:
        raise ConfigError("train.schedule_steps", f"must exceed train.warmup_steps ({warmup_steps}), "
                                                  f"got {schedule_steps}")

    def f(s: int) -> float:
        if s < warmup_steps:
            return s / warmup_steps
        progress = min(1.0, (s - warmup_steps) / (schedule_steps - warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    return f
