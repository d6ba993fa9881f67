"""The dataset-folder contract: the typed manifest, folder locations, split names, atomic writes and cheap checks."""
