"""Evaluators (installed as `ssmbench.evaluators`): name -> ("module:Class", summary)."""

BUILTIN: dict[str, tuple[str, str]] = {
    "train_eval": ("ssmbench.evaluators.train_eval:TrainEval",
                   "Train on the task's batches, keep the checkpoint with the best validation metric, score test "
                   "at it (the default)."),
    "score_only": ("ssmbench.evaluators.score_only:ScoreOnly",
                   "Score without training: a checkpoint (--checkpoint), or the model as initialised."),
}
