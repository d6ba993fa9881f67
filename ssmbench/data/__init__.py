"""Dataset folders, in four parts by who needs them: `folder/` (the contract: manifest, locations, checks),
`read/` (the reader), `make/` (the builder: plan, shards, manifest, card) and `hub/` (names: catalogue, get,
download, verify, publish, repack, `open_dataset`). Importing this package imports none of them; numpy, h5py and
numba load lazily, torch never at module level.

The public names (`from ssmbench.data import TaskStream, ShardAwareSampler, EvalShardSampler, open_dataset,
Manifest, load_manifest, open_folder`) load their module on first use. `ssmbench.data.loader` and
`ssmbench.data.streaming` are the old homes of some of them, kept for code that imports from there."""

from __future__ import annotations

from typing import Any

_LAZY = {"open_dataset": ("ssmbench.data.hub.open", "open_dataset"),
         "open_folder": ("ssmbench.data.read.loader", "open_folder"),
         "load_manifest": ("ssmbench.data.folder.manifest", "load_manifest"),
         "Manifest": ("ssmbench.data.folder.manifest", "Manifest"),
         "TaskStream": ("ssmbench.data.read.streaming", "TaskStream"),
         "ShardAwareSampler": ("ssmbench.data.read.samplers", "ShardAwareSampler"),
         "EvalShardSampler": ("ssmbench.data.read.samplers", "EvalShardSampler")}


__all__ = sorted(_LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def __getattr__(name: str) -> Any:  # PEP 562: the names load their module on first use
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'ssmbench.data' has no attribute {name!r}")
