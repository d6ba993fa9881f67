"""What a run leaves behind: the run folder and its lock, checkpoints, plots, loggers, results tables."""
