"""Evaluators (installed as `ssmbench.evaluators`): name -> ("module:Class", summary)."""

BUILTIN: dict[str, tuple[str, str]] = {
    "train_eval": ("ssmbench.evaluators.train_eval:TrainEval",
                   "Train on fresh batches, keep the checkpoint with the best validation metric, score test at it."),
}
