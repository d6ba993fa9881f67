"""A script in the folder that holds the clone (clone in ~/code/ssmbench, script in ~/code): Python took the clone's
folder for a namespace package `ssmbench` before setuptools' editable import hook was asked, so `from ssmbench import
open_dataset` failed with "(unknown location)" (issue 37). The build backend (.ci/ssmbench_build.py) adds a guard to
editable wheels; these tests check the wheel it writes and the guard's effect without reinstalling anything (the
guard is loaded beside the installed hook, as the wheel's .pth does), and the ways around it for older installs."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support import REPO

SCRIPT = "from ssmbench import open_dataset\nprint('imported', open_dataset.__module__)\n"


def _backend():
    spec = importlib.util.spec_from_file_location("ssmbench_build", REPO / ".ci" / "ssmbench_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "PYTHONPATH")}
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def code(tmp_path) -> Path:
    """~/code with a clone's top level in ~/code/ssmbench (its folders, no files needed) and the script."""
    code = tmp_path / "code"
    for name in ("ssmbench", "generators", "tests"):
        (code / "ssmbench" / name).mkdir(parents=True)
    (code / "script.py").write_text(SCRIPT)
    return code


def _installed_hook() -> str:
    """The module name of setuptools' editable hook of this installation; skip where ssmbench is installed
    otherwise (a wheel, a path .pth)."""
    hooks = [getattr(f, "__module__", "") for f in sys.meta_path]
    found = [h for h in hooks if h.startswith("__editable___ssmbench")]
    if not found:
        pytest.skip("ssmbench is not installed with setuptools' editable import hook here")
    return found[0]


def _guard_installed() -> bool:
    return any(getattr(f, "__name__", "") == "SsmbenchNamespaceGuard" for f in sys.meta_path)


WITHOUT_GUARD = ("import sys, runpy; sys.meta_path[:] = [f for f in sys.meta_path "
                 "if getattr(f, '__name__', '') != 'SsmbenchNamespaceGuard']; "
                 "runpy.run_path('script.py', run_name='__main__')")


def test_the_guard_lets_a_script_beside_the_clone_import_ssmbench(code, tmp_path):
    """Without the guard (an install made before it, simulated by taking the guard out of sys.meta_path where this
    install has it): the error docs/testing.md names; with it, the import works -- through the installed .pth where
    this install was made by the current backend, else by loading the guard beside the installed hook."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "_ssmbench_editable_guard.py").write_text(_backend().GUARD_SOURCE.replace("{finder}", _installed_hook()))
    plain = _run(code, "-c", WITHOUT_GUARD)
    assert plain.returncode != 0, plain.stdout  # the clone's folder shadows the installed package
    assert "cannot import name 'open_dataset' from 'ssmbench' (unknown location)" in plain.stderr, plain.stderr
    assert "cannot import name 'open_dataset' from 'ssmbench' (unknown location)" in " ".join(
        (REPO / "docs" / "testing.md").read_text().split())
    boot = (f"import sys; sys.path.append({str(site)!r}); import _ssmbench_editable_guard, runpy; "
            "runpy.run_path('script.py', run_name='__main__')")
    guarded = _run(code, "script.py") if _guard_installed() else _run(code, "-c", boot)
    assert guarded.returncode == 0 and "imported ssmbench.data.hub.open" in guarded.stdout, guarded.stderr
    other = tmp_path / "other"
    (other / "ssmbench").mkdir(parents=True)
    (other / "ssmbench" / "__init__.py").write_text("WHO = 'a checkout on sys.path'\n")
    mine = _run(other, "-c", boot.replace("runpy.run_path('script.py', run_name='__main__')",
                                          "import ssmbench; print(ssmbench.WHO)"))
    assert mine.stdout.strip() == "a checkout on sys.path", mine.stderr  # a real package first on sys.path wins


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_the_backend_adds_the_guard_to_editable_wheels_only(tmp_path):
    backend = _backend()
    pth = b"import __editable___ssmbench_0_1_0_finder; __editable___ssmbench_0_1_0_finder.install()"
    wheel = tmp_path / "ssmbench-0.1.0-0.editable-py3-none-any.whl"
    finder = b"MAPPING = {}\n"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("__editable___ssmbench_0_1_0_finder.py", finder)
        z.writestr("__editable__.ssmbench-0.1.0.pth", pth)
        z.writestr("ssmbench-0.1.0.dist-info/RECORD", "".join(
            f"{name},sha256={_b64(data)},{len(data)}\n" for name, data in
            (("__editable___ssmbench_0_1_0_finder.py", finder), ("__editable__.ssmbench-0.1.0.pth", pth)))
            + "ssmbench-0.1.0.dist-info/RECORD,,\n")
    assert backend.add_guard(wheel)
    with zipfile.ZipFile(wheel) as z:
        files = {n: z.read(n) for n in z.namelist()}
    assert files["__editable__.ssmbench-0.1.0.pth"].splitlines() == [pth, b"import _ssmbench_editable_guard"]
    assert b"import __editable___ssmbench_0_1_0_finder as _editable" in files["_ssmbench_editable_guard.py"]
    record = [line.split(",") for line in files["ssmbench-0.1.0.dist-info/RECORD"].decode().splitlines()]
    assert record[-1] == ["ssmbench-0.1.0.dist-info/RECORD", "", ""]
    for path, digest, size in record[:-1]:  # every file listed once, with its own hash and size
        assert digest == f"sha256={_b64(files[path])}" and int(size) == len(files[path]), path
    assert sorted(r[0] for r in record) == sorted(files)
    static = tmp_path / "static.whl"
    with zipfile.ZipFile(static, "w") as z:
        z.writestr("__editable__.ssmbench-0.1.0.pth", "/home/me/code/ssmbench\n")
        z.writestr("ssmbench-0.1.0.dist-info/RECORD", "")
    before = static.read_bytes()
    assert not backend.add_guard(static) and static.read_bytes() == before


@pytest.mark.parametrize("way", ["another folder name", "python -P"])
def test_each_way_around_it_for_an_older_install_works(code, way):
    flags: tuple[str, ...] = ()
    if way == "another folder name":
        (code / "ssmbench").rename(code / "ssmbench-src")
    else:
        flags = ("-P",)
    done = _run(code, *flags, "script.py")
    assert done.returncode == 0 and "imported ssmbench.data.hub.open" in done.stdout, done.stderr
