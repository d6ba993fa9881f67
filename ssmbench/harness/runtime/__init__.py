"""Process-level plumbing of a run: devices and ranks, CPU threads, the wall-clock limit, mixed precision."""
