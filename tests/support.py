"""Test helpers: tiny configs for every registered task, the reference fixtures, drawing samples by key."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from ssmbench.registry import get_task
from ssmbench.seeding import keys_for

# The reference implementations' samples live outside the repository, in shared/ beside the checkout (CI clones it
# there); SSMBENCH_REFERENCE_FIXTURES points elsewhere.
REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"


def load_file(path: Path, name: str | None = None):
    """The module in a repository file that is not importable as a package (benchmarks/, tests/golden/): CI runs
    with PYTHONSAFEPATH=1, so the checkout is not on sys.path. Registered in sys.modules under `name` (default: the
    file's stem), which dataclasses and pickling inside the module need."""
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


REFERENCE = Path(os.environ.get("SSMBENCH_REFERENCE_FIXTURES")
                 or Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "reference")


def in_ci() -> bool:
    """CI=true (or 1/yes) in the environment, as CI services set it."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_reference(path: Path) -> Path:
    """`path` if it exists; else skip the test locally, and fail it under CI=true (where the fixtures must be)."""
    if not path.exists():
        message = f"reference fixtures not found at {path}"
        if in_ci():
            pytest.fail(f"{message}; CI=true needs them: put shared/fixtures/reference beside the checkout "
                        f"or set SSMBENCH_REFERENCE_FIXTURES")
        pytest.skip(message)
    return path

# Small but non-trivial configs for the contract suite (fields not named keep the task's default preset).
TINY: dict[str, dict] = {
    "shift": {"L": 64}, "cumsum": {"L": 64}, "cummax": {"L": 64}, "reverse": {"L": 64}, "sort": {"L": 64},
    "select": {"L": 64, "M": 8}, "select_fixed": {"L": 64, "M": 8}, "solve": {"L": 64},
    "solve_fixed": {"L": 64}, "context_shift": {"L": 64}, "mips": {"L": 64},
    "listops_subtrees": {"min_length": 40, "max_length": 120, "max_depth": 6, "max_args": 5, "pad_to": 128},
    "listops": {"min_length": 40, "max_length": 120, "max_depth": 6, "max_args": 5, "pad_to": 128},
    "pathfinder": {"size": 32, "seed_distance": 6, "marker_radius": 1.5, "contour_length": 4, "dash_length": 4.0,
                   "dash_thickness": 1.5, "margin_list": (1,), "distractor_length": 2, "num_distractors": 2},
    "pathfinder_lra": {"contour_length": 6, "distractor_length": 2, "num_distractors": 3},
    "mad_in_context_recall": {"seq_len": 32}, "mad_noisy_recall": {"seq_len": 32},
    "mad_fuzzy_recall": {"seq_len": 48}, "mad_selective_copying": {"seq_len": 40, "num_tokens_to_copy": 8},
    "mad_compression": {"seq_len": 16}, "mad_memorization": {"seq_len": 16, "vocab_size": 64},
    "mqar": {"L": 64, "num_kv_pairs": 8, "vocab_size": 128, "random_non_queries": True},
    "induction_heads": {"L": 64},
    "parity_check": {"L": 24}, "even_pairs": {"L": 24}, "cycle_navigation": {"L": 24},
    "modular_arithmetic": {"L": 24}, "word_problem": {"group": "A5", "L": 24},
    "flipflop": {"L": 64}, "string_copy": {"max_length": 12}, "prefix_ngram": {"max_length": 12},
    "suffix_ngram": {"max_length": 12}, "duplicate_ngram": {"max_length": 12},
}
ATOMIC = ["shift", "cumsum", "cummax", "reverse", "sort", "select", "select_fixed", "solve", "solve_fixed",
          "context_shift", "mips"]


def tiny_config(name: str):
    task = get_task(name)
    base = task.presets[task.default_preset]
    return dataclasses.replace(base, **TINY.get(name, {}))


def draw(name: str, config, split: str = "train", start: int = 0, stop: int = 4, seed: int = 0) -> dict:
    task = get_task(name)
    return task.generate(config, keys_for(task.name, task.version, config.to_dict(), seed, split, start, stop,
                                          task.stream_exempt))


def rows(block: dict) -> list[dict]:
    n = len(next(iter(block.values())))
    return [{k: v[i] for k, v in block.items()} for i in range(n)]


def all_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


PROCESS_CEILING = 600
"""Seconds a test waits for another process's file or exit: generous (a busy machine), never a fixed sleep."""


def wait_for(path: Path, proc: subprocess.Popen | None = None) -> None:
    """Return once `path` exists; fail when `proc` ends first or PROCESS_CEILING passes."""
    deadline = time.monotonic() + PROCESS_CEILING
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended ({proc.returncode}) before {path} appeared: "
                                 f"{proc.stderr.read() if proc.stderr else ''}")
        assert time.monotonic() < deadline, f"{path} did not appear within {PROCESS_CEILING} s"
        time.sleep(0.02)


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def cli(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m ssmbench ARGS` in a fresh process (PYTHONSAFEPATH=1, as CI runs it), output captured."""
    return subprocess.run([sys.executable, "-m", "ssmbench", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "PYTHONSAFEPATH": "1"})


def refused(result: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    """The first stderr line of a refusal with exit status `code` (at most a hint line after it)."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and 1 <= len(lines) <= 2, result.stderr
    assert len(lines) == 1 or lines[1].startswith("hint: "), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)
    return lines[0]


def run_main(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`ssmbench ARGS` in this process, through `ssmbench.cli.app.main`, for tests that check what a command says
    and does, not the process boundary (signals, exit of a real process, a second process holding a lock: `cli`).
    The exit code, stdout and stderr (with the warnings the CLI logs, formatted as it does) come back in a
    CompletedProcess, like `cli`'s; `cwd` (default: the temporary folder, so that a default run folder never lands in
    the checkout) and `env` (added to os.environ) hold for the call only. It saves the 2-3 s a fresh interpreter
    spends importing torch, and the Numba compilations it would repeat."""
    from ssmbench.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    code: int | str | None = 0
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, env or {}))
        stack.enter_context(contextlib.chdir(cwd or tempfile.gettempdir()))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        root.addHandler(handler)
        stack.callback(root.removeHandler, handler)
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(["ssmbench", *args], returncode, out.getvalue(), err.getvalue())
