"""What a task is trained and selected on: losses, metric states, objectives, headline metrics."""
