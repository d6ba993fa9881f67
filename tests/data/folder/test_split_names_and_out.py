"""One set of split names everywhere (`validation` means val in open_dataset, preview and download), and an
unwritable --out refused as such (a virtual file system reports 0 B free, which read as a full disk)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssmbench import open_dataset
from ssmbench.errors import ConfigError


def test_validation_means_val(tiny_shift):
    assert len(open_dataset(tiny_shift, "validation")) == len(open_dataset(tiny_shift, "val")) > 0
    with pytest.raises(ConfigError, match="unknown split 'tset'; did you mean 'test'"):
        open_dataset(tiny_shift, "tset")


def test_an_unwritable_out_is_named_as_such(tmp_path):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o555)
    target = "/proc/ssmbench-test" if os.geteuid() == 0 else str(read_only)  # root writes anywhere but /proc
    exe = Path(sys.executable).with_name("ssmbench")
    result = subprocess.run([str(exe), "generate", "shift", "--length", "64", "--n", "8", "--out", target, "-q"],
                            capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONSAFEPATH": "1"})
    assert result.returncode == 2, result.stderr
    assert "--out: cannot write into" in result.stderr and "free space" not in result.stderr
