"""Score without training: a checkpoint (`ssmbench eval --checkpoint CKPT`), or the freshly initialised model.

`ssmbench eval --evaluator score_only --model dlr --task cumsum --split val` scores the model as the training seed
initialises it (the untrained baseline a learning curve starts from); with `--checkpoint` the checkpoint's own config
and weights are scored (`ssmbench.harness.scoring.score_checkpoint`). Either way the run folder holds config.json
and metrics.json with the one split scored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, final

from ssmbench.api import Evaluator


@final
class ScoreOnly(Evaluator):
    """Score the model of a run config (initialised from its seed) on one split; no training."""

    name = "score_only"

    def run(self, config: Any, *, out: str | Path | None = None, runs_root: str | Path = "runs",
            quiet: bool = False, logger: str | None = None, split: str = "test", **options: Any) -> Any:
        from ssmbench.harness.scoring import score

        if options:
            raise TypeError(f"score_only takes no options {sorted(options)}")
        return score(config, None, split, out=out, runs_root=runs_root)
