"""What the benchmark scripts share: the checkout's paths and the test helpers some scripts reuse.

Every script is run as a file from the repository root, `PYTHONSAFEPATH=1 python benchmarks/<kind>/<script>.py`
(PYTHONSAFEPATH keeps the script's folder off sys.path, so the installed `ssmbench` is the one imported). A script
that needs this module or another script's code starts, after its own imports, with the one bootstrap line

    sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)

and then imports `benchmarks.common` or `benchmarks.<kind>.<script>` like any package; nothing is loaded by file
path. The checkout is appended, not put first, so an installed `ssmbench` still wins over the checkout's folder.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
"""The repository root."""
RESULTS = REPO / "benchmarks" / "results"
"""Committed results: benchmarks/results/ (their paths are cited in docs/)."""


def load_test_helper(name: str) -> ModuleType:
    """The test suite's helper module `tests/generators/NAME.py` (e.g. `listops_oracle`, an independent oracle),
    registered under the bare name the tests import it by, so a benchmark and the tests share one copy."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "tests" / "generators" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses inside the module look themselves up here
    spec.loader.exec_module(module)
    return module
