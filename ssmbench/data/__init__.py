"""Dataset folders, in four parts by who needs them: `folder/` (the contract: manifest, locations, checks),
`read/` (the reader), `build/` (the builder: plan, shards, manifest, card) and `hub/` (names: catalogue, get,
download, verify, publish, repack, `open_dataset`). Importing this package imports none of them; numpy, h5py and
numba load lazily, torch never at module level."""

from __future__ import annotations

from typing import Any

_LAZY = {"open_dataset": ("ssmbench.data.hub.open", "open_dataset"),
         "open_folder": ("ssmbench.data.read.loader", "open_folder"),
         "load_manifest": ("ssmbench.data.folder.manifest", "load_manifest"),
         "Manifest": ("ssmbench.data.folder.manifest", "Manifest"),
         "TaskStream": ("ssmbench.data.read.streaming", "TaskStream")}


def __getattr__(name: str) -> Any:  # PEP 562: the names load their module on first use
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'ssmbench.data' has no attribute {name!r}")
