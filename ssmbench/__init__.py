"""ssmbench: deterministic long-range sequence benchmark datasets and an evaluation harness.

The public API is re-exported here explicitly; heavy dependencies (numba, h5py, torch) load lazily.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .api import Field as Field
from .api import Spec as Spec
from .api import Task as Task
from .api import TaskConfig as TaskConfig
from .api import TrainingPolicy as TrainingPolicy
from .errors import ConfigError as ConfigError
from .errors import DatasetError as DatasetError
from .errors import SsmbenchError as SsmbenchError
from .errors import UnknownNameError as UnknownNameError
from .errors import VerificationError as VerificationError
from .registry import get_task as get_task

_LAZY = {"evaluate": ("ssmbench.harness.evaluation", "evaluate"),
         "open_dataset": ("ssmbench.data.hub.open", "open_dataset")}


def __getattr__(name: str):  # heavy entry points load on first use, so `import ssmbench` stays light
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'ssmbench' has no attribute {name!r}")
