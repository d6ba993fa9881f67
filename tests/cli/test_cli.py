"""The command line: --help of every command, results on stdout, one-line errors with the right exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ssmbench.cli import cli
from support import REPO


def run(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the installed console script, as a user would."""
    exe = Path(sys.executable).with_name("ssmbench")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from ssmbench.cli import main; main()"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONSAFEPATH": "1", **(env or {})}, timeout=900)


@pytest.mark.parametrize("command", [[], *[[name] for name in cli.commands]])
def test_help_of_every_command(command):
    result = run(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout
    if command:
        assert "Example" in result.stdout or command == ["ls"]


def test_ls_lists_every_task_without_importing_numba_or_torch():
    code = ("import sys; from ssmbench.cli import main\n"
            "try:\n    main(['ls'])\nexcept SystemExit:\n    pass\n"
            "print('HEAVY', sorted(m for m in ('numba', 'torch', 'h5py') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ,
                         "PYTHONSAFEPATH": "1"}).stdout
    assert re.search(r"^context_shift +Shift a sequence by an offset", out, re.M)
    assert "HEAVY []" in out


def test_describe_shows_fields_and_presets():
    result = run("describe", "solve")
    assert result.returncode == 0
    assert "L = 4096" in result.stdout and "4096: L=4096" in result.stdout and "(4096, 3)" in result.stdout
    info = json.loads(run("describe", "solve_fixed", "--json").stdout)
    assert info["fixed"]["A"]["shape"] == [63, 63] and info["version"] == "1"


@pytest.mark.parametrize("args,needle", [
    (["generate", "contex_shift"], "did you mean 'context_shift'"),
    (["describe", "shfit"], "did you mean 'shift'"),
    (["generate", "solve", "--length", "5"], "L=5 is too small for solve: need L >= 8"),
    (["generate", "shift", "--size", "512"], "use --length"),
    (["generate", "shift", "--length", "64", "-o", "num_shift=4"], "did you mean 'num_shifts'"),
    (["generate", "shift", "--length", "64", "--split", "train=0.5"], "fractions must sum to 1"),
    (["generate", "shift", "--length", "64", "--shard-index", "1"], "go together"),
    (["generate", "shift", "--bogus-flag", "3"], "unknown config key"),
])
def test_usage_errors_are_one_line_and_exit_2(args, needle):
    result = run(*args)
    assert result.returncode == 2, result
    assert needle in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_generate_verify_roundtrip_and_errors(tmp_path):
    out = run("generate", "shift", "--length", "64", "--n", "40", "--out", str(tmp_path), "--json", "-q")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)  # stdout holds only the result
    assert info["sizes"] == {"train": 32, "val": 4, "test": 4} and info["finalized"]
    folder = Path(info["path"])
    again = run("generate", "shift", "--length", "64", "--n", "40", "--out", str(tmp_path), "--json", "-q")
    assert json.loads(again.stdout)["shards_written"] == 0
    ok = run("verify", str(folder), "--deep")
    assert ok.returncode == 0 and ok.stdout.startswith("OK")
    clash = run("generate", "shift", "--length", "64", "--n", "40", "--seed", "3", "--out", str(tmp_path))
    assert clash.returncode == 2 and "different build" in clash.stderr and "--overwrite" in clash.stderr
    shard = next(folder.glob("train/*.h5"))
    shard.write_bytes(shard.read_bytes()[:-100])
    bad = run("verify", str(folder))
    assert bad.returncode == 3 and "FAIL" in bad.stdout and "Traceback" not in bad.stderr
    missing = run("verify", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_config_options_as_flags_and_dry_run(tmp_path):
    result = run("generate", "select", "--length", "100", "--M", "4", "--dry-run", "--json", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["dry_run"] and re.fullmatch(r"select-100-[0-9a-f]{8}", info["name"])
    assert not (tmp_path / info["name"]).exists()


def test_readme_quickstart_runs(tmp_path):
    """Every `ssmbench ...` line in the README's quickstart block runs and exits 0."""
    text = (REPO / "README.md").read_text()
    block = text.split("<!-- quickstart -->", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip().startswith("ssmbench ")]
    assert commands, "README quickstart block has no ssmbench commands"
    for command in commands:
        result = run(*command.split()[1:], cwd=tmp_path)
        assert result.returncode == 0, (command, result.stderr)
