"""Training batches and evaluation sets, streamed or read from a dataset folder, and their way to the device."""
