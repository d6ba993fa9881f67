"""The default evaluator: train with the task's protocol, select on validation, score test once.

Thin glue over `ssmbench.harness` (the loop is `ssmbench.harness.trainer.train`); `ssmbench eval --evaluator
train_eval` and `ssmbench.evaluate(...)` take the same path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, final

from ssmbench.api import Evaluator
from ssmbench.harness.run_config import RunConfig


@final
class TrainEval(Evaluator):
    """Train on fresh batches, keep the checkpoint with the best validation metric, score test at it."""

    name = "train_eval"
    Config = RunConfig

    def run(self, model: Any, data: Any, config: Any, run_dir: Path) -> Any:
        """model: a name or module:Object; data: a task name; config: a RunConfig or a dict of -o keys."""
        from ssmbench.harness.evaluation import evaluate

        if isinstance(config, RunConfig):
            return evaluate(config=config, out=run_dir)
        return evaluate(model, data, overrides=dict(config or {}), out=run_dir)
