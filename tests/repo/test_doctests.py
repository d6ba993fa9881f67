"""Every worked example in the package runs: the doctests of every module of ssmbench/, generators/, evaluators/ and
reference_models/ that has one (found by scanning the sources, so a new module's examples are never forgotten).

Modules are imported by their installed names (ssmbench.generators.<name>, ...), not collected with
--doctest-modules, which would import the plug-in folders a second time under their bare directory names.
Every task module and every reference model must carry at least one example.
"""

from __future__ import annotations

import doctest
import importlib

import pytest

from ssmbench.generators import BUILTIN as TASKS
from ssmbench.reference_models import BUILTIN as MODELS
from support import REPO

FOLDERS = {"ssmbench": "ssmbench", "generators": "ssmbench.generators", "evaluators": "ssmbench.evaluators",
           "reference_models": "ssmbench.reference_models"}


def modules_with_examples() -> list[str]:
    found = []
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__main__" or ">>>" not in path.read_text():
                continue
            if parts[-1] == "__init__":
                parts.pop()
            found.append(".".join([package, *parts]))
    return found


MODULES = modules_with_examples()
MUST_HAVE_EXAMPLES = ([f"ssmbench.generators.{name}" for name in TASKS]
                      + [f"ssmbench.reference_models.{name}" for name in MODELS])


def test_the_scan_finds_the_known_examples():
    assert {"ssmbench.seeding", "ssmbench.data.make.shards", "ssmbench.generators._listops_dedup",
            "ssmbench.generators._rng", "ssmbench.api", "ssmbench.config"} <= set(MODULES)
    assert not set(MUST_HAVE_EXAMPLES) - set(MODULES), "a task module or reference model has no worked example"


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), raise_on_error=False, verbose=False,
                             optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module} mentions '>>>' but doctest finds no example in it"
    assert result.failed == 0
