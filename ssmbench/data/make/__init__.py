"""Writing a dataset folder: plan, shard jobs, finalize (manifest, card, preview), estimates and task docs."""
