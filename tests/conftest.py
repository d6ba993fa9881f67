"""pytest fixtures; the helpers live in support.py (tests/ is on sys.path through pyproject's pythonpath)."""

from __future__ import annotations

import pytest

from ssmbench.registry import tasks


@pytest.fixture(params=sorted(tasks.names()))
def task_name(request) -> str:
    return request.param
