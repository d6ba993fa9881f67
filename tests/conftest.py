"""pytest fixtures; the helpers live in support.py (tests/ is on sys.path through pyproject's pythonpath)."""

from __future__ import annotations

import os

import pytest

# Before any test module imports Numba (some do, before the first task loads, where ssmbench itself would turn it
# off): no Intel SVML, whose exp/log/sin change the last bits of the golden bytes where `icc_rt` is installed.
os.environ.setdefault("NUMBA_DISABLE_INTEL_SVML", "1")

from ssmbench.registry import tasks  # noqa: E402


@pytest.fixture(params=sorted(tasks.names()))
def task_name(request) -> str:
    return request.param
