"""`ssmbench.data.make.replay`: a recorded `generate` command built in this process (what `ssmbench get` does to
rebuild a catalogue entry) writes the folder `ssmbench generate` writes, and records the command as the CLI does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ssmbench import ConfigError
from ssmbench.data.make.replay import generate_from_argv, parse_generate_argv


def test_a_replayed_command_builds_and_records_what_the_cli_does(tmp_path):
    """Against the `ssmbench` console script (what `get` ran before; `python -m ssmbench` records a shorter argv)."""
    exe = Path(sys.executable).with_name("ssmbench")
    if not exe.exists():
        pytest.skip("no ssmbench console script beside this interpreter")
    argv = ["generate", "shift", "--length", "64", "--n", "16", "-o", "num_shifts=4", "--samples-per-shard", "8"]
    cli = subprocess.run([str(exe), *argv, "--out", str(tmp_path / "cli"), "--json", "-q"],
                         capture_output=True, text=True, check=True)
    by_cli = json.loads((tmp_path / "cli" / json.loads(cli.stdout)["name"] / "manifest.json").read_text())
    result = generate_from_argv([*argv, "--out", str(tmp_path / "here"), "--json", "-q"])
    here = json.loads((result.path / "manifest.json").read_text())
    assert result.path.parent == tmp_path / "here" and result.finalized
    assert {k for k in by_cli if by_cli[k] != here[k]} <= {"created_utc"}  # the same second: equal there too
    assert set(by_cli) == set(here)
    assert here["command"]["explicit"] == ["length", "n", "overrides", "samples_per_shard", "out", "as_json",
                                           "quiet", "task"]


def test_extra_task_options_are_config_keys_and_the_last_option_wins():
    options, explicit, extra = parse_generate_argv(["generate", "select", "--length=128", "--workers", "1",
                                                    "--num-tokens", "5", "--workers=3", "-q"])
    assert (options["task"], options["length"], options["workers"], options["quiet"]) == ("select", 128, 3, True)
    assert extra == ["--num-tokens", "5"] and explicit == ["length", "workers", "quiet", "task"]


@pytest.mark.parametrize("argv, says", [
    (["generate", "--length", "64"], "no task"),
    (["generate", "shift", "--length"], "expects a value"),
    (["generate", "shift", "--length", "x"], "expects int"),
])
def test_a_broken_command_is_a_config_error(argv, says):
    with pytest.raises(ConfigError, match=says):
        parse_generate_argv(argv)


def test_a_dry_run_or_an_array_job_is_not_replayed(tmp_path):
    with pytest.raises(ConfigError, match="dry run or one job"):
        generate_from_argv(["generate", "shift", "--length", "64", "--shard-index", "0", "--num-shards", "2"])
