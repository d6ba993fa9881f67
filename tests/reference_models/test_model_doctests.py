"""Doctests of every reference model, imported as ssmbench.reference_models.<name> (not --doctest-modules)."""

from __future__ import annotations

import doctest
import importlib

import pytest

from ssmbench.reference_models import BUILTIN

MODULES = [f"ssmbench.reference_models.{name}" for name in BUILTIN] + ["ssmbench.harness.models.build", "ssmbench.harness.models.optim_groups"]


@pytest.mark.parametrize("module_name", MODULES)
def test_doctests(module_name: str) -> None:
    result = doctest.testmod(importlib.import_module(module_name), raise_on_error=False)
    assert result.attempted > 0, f"{module_name} has no doctest example"
    assert result.failed == 0
