"""Datasets by name: catalogue, get, download, verify, publish, repack, and `open_dataset(name or path)`."""
