"""The training loop and what it checks and records around a run: memory, model facts, task figures."""
