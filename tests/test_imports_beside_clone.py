"""A script in the folder that holds the clone (clone in ~/code/ssmbench, script in ~/code): Python takes the
clone's folder for a namespace package `ssmbench` before the editable install's import hook is asked, so
`from ssmbench import open_dataset` fails with "(unknown location)" (issue 37). Nothing of ssmbench runs before that
error, so docs/testing.md ("Scripts beside the clone") names it and the ways around it; this checks that the failure
is the one described there and that each way around it works, without reinstalling anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "from ssmbench import open_dataset\nprint('imported', open_dataset.__module__)\n"


def _run(cwd: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "PYTHONPATH")}
    return subprocess.run([sys.executable, *flags, "script.py"], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture
def code(tmp_path) -> Path:
    """~/code with a clone's top level in ~/code/ssmbench (its folders, no files needed) and the script."""
    code = tmp_path / "code"
    for name in ("ssmbench", "generators", "tests"):
        (code / "ssmbench" / name).mkdir(parents=True)
    (code / "script.py").write_text(SCRIPT)
    return code


def test_the_failure_is_the_one_the_docs_describe(code):
    done = _run(code)
    if done.returncode == 0:
        pytest.skip("ssmbench is installed so that the path finder sees it first (a wheel, or a path .pth)")
    assert "cannot import name 'open_dataset' from 'ssmbench' (unknown location)" in done.stderr, done.stderr
    docs = " ".join((ROOT / "docs" / "testing.md").read_text().split())
    assert "cannot import name 'open_dataset' from 'ssmbench' (unknown location)" in docs
    assert "docs/testing.md#scripts-beside-the-clone" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("way", ["another folder name", "python -P"])
def test_each_way_around_it_works(code, way):
    flags: tuple[str, ...] = ()
    if way == "another folder name":
        (code / "ssmbench").rename(code / "ssmbench-src")
    else:
        flags = ("-P",)
    done = _run(code, *flags)
    assert done.returncode == 0 and "imported ssmbench.data.hub.open" in done.stdout, done.stderr
