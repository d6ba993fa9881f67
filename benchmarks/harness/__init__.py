"""Harness speed: the training step, the batch feed, threads, checkpoints and the config walk (benchmarks/README.md)."""
