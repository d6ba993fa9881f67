"""Where and when a dataset was built: library versions for shard attributes and manifest.json, and a UTC stamp.

Kept apart from `build` and `manifest` so that both can record it without importing each other.

>>> sorted(environment())
['h5py', 'hdf5', 'numba', 'numpy', 'platform', 'python']
>>> len(created_utc()), created_utc().endswith("Z")
(20, True)
"""

from __future__ import annotations

import platform
from datetime import datetime, timezone

import numpy as np


def environment() -> dict[str, str]:
    """Versions of Python, NumPy, Numba, h5py and HDF5, and the machine architecture."""
    import h5py
    import numba

    return {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
            "h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version, "platform": platform.machine()}


def created_utc() -> str:
    """The current UTC time as "YYYY-MM-DDTHH:MM:SSZ"."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
