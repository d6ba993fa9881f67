"""The default evaluator: train with the task's protocol, select on validation, score test once.

Thin glue over `ssmbench.harness.training.protocol.train_and_score` (the loop is
`ssmbench.harness.training.trainer.train`): `ssmbench eval` (`--evaluator train_eval`, the default) and `ssmbench.evaluate(...)` take this path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, final

from ssmbench.api import Evaluator


@final
class TrainEval(Evaluator):
    """Train on the task's batches, keep the checkpoint with the best validation metric, score test at it."""

    name = "train_eval"

    def run(self, config: Any, *, out: str | Path | None = None, runs_root: str | Path = "runs",
            quiet: bool = False, logger: str | None = None, force: bool = False, **options: Any) -> Any:
        """`force`: train even when the estimated peak memory exceeds the device's free memory."""
        from ssmbench.harness.length_sweep import score_lengths
        from ssmbench.harness.training.protocol import train_and_score

        if options:
            raise TypeError(f"train_eval takes no options {sorted(options)}")
        return train_and_score(config, out, runs_root, quiet=quiet, logger=logger, force=force,
                               score_lengths=score_lengths)  # eval.test_lengths: the best checkpoint at each
