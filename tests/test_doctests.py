"""Run the worked examples in every task module's docstring (imported as ssmbench.generators.<name>)."""

from __future__ import annotations

import doctest
import importlib

import pytest

from ssmbench.generators import BUILTIN


@pytest.mark.parametrize("module", [f"ssmbench.generators.{name}" for name in BUILTIN] +
                         ["ssmbench.seeding", "ssmbench.data.shards", "ssmbench.data.streaming", "ssmbench.generators._rng"])
def test_docstring_examples(module):
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, raise_on_error=False, verbose=False)
    assert result.failed == 0
    if module.startswith("ssmbench.generators.") and not module.endswith("_rng"):
        assert result.attempted > 0, f"{module} has no worked example"
