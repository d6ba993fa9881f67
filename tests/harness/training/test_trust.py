"""What keeps a researcher from a wrong table or a wrong impression: options never silently ignored, typed one-line
errors for bad values and plug-ins, a memory check before the first step, per-sample predictions and seeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ssmbench
from ssmbench.errors import ConfigError
from support import run_main

TINY = {"L": 32, "model.d_model": 8, "model.d_state": 32, "train.steps": 4, "train.eval_every": 2,
        "eval.val_samples": 8, "eval.test_samples": 12, "eval.metric_batch_size": 4, "data.workers": 0}
CLI_TINY = [x for k, v in TINY.items() for x in ("-o", f"{k}={v}")] + ["--task", "cumsum", "-q"]


def ssmbench_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ssmbench")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, timeout=900,
                          env={**os.environ, "PYTHONSAFEPATH": "1"})


def one_line(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.mark.parametrize("args, fragment", [
    (["-o", "L=abc"], "L: cannot parse 'abc' as int"),
    (["-o", "task.L=abc"], "L: cannot parse 'abc' as int"),
    (["-o", "model.d_model=abc"], "model.d_model: cannot parse 'abc' as int"),
    (["-o", "model.d_state=abc"], "model.d_state: cannot parse 'abc' as int"),
    (["--size", "128"], "cumsum takes no --size; use --length"),
    (["--model", "json:__doc__"], "is a str, neither an nn.Module subclass"),
    (["--model", "json:dumpz"], "has no attribute 'dumpz'; did you mean 'dump'?"),
])
def test_bad_values_are_one_line_naming_key_value_and_type(tmp_path, args, fragment):
    one_line(run_main("eval", *CLI_TINY, *args, cwd=tmp_path), fragment)


def test_a_plugin_module_in_the_working_folder_is_found_and_a_misspelt_one_named(tmp_path):
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "mixers.py").write_text(
        "import torch\n\nclass CumMean(torch.nn.Module):\n    causal = True\n\n"
        "    def __init__(self, d_model, *, l_max):\n        super().__init__()\n\n"
        "    def forward(self, x, *, mask=None):\n"
        "        return x.cumsum(1) / torch.arange(1, x.shape[1] + 1).view(1, -1, 1)\n")
    no_state = [a for a in CLI_TINY if not a.startswith("model.d_state")]
    no_state = [a for i, a in enumerate(no_state) if not (a == "-o" and no_state[i + 1] == "-o")]
    ok = ssmbench_cli(tmp_path, "eval", "--model", "mypkg.mixers:CumMean", *no_state, "--out", "run")
    assert ok.returncode == 0, ok.stderr
    one_line(ssmbench_cli(tmp_path, "eval", "--model", "mypkg.mixer:CumMean", *CLI_TINY),
             "cannot import 'mypkg.mixer'", "did you mean 'mypkg.mixers'?")


def test_log_samples_writes_predictions_that_reproduce_the_test_r2(tmp_path):
    r = ssmbench.evaluate("dlr", "cumsum", overrides={**TINY, "eval.log_samples": True}, out=tmp_path / "run",
                          quiet=True)
    with np.load(r.run_dir / "predictions" / "test.npz") as z:
        idx, pred, y = z["sample_index"], z["predictions"].astype(np.float64), z["targets"].astype(np.float64)
    assert idx.tolist() == list(range(12)) and pred.shape == y.shape == (12, 32, 1)
    r2 = 1 - ((pred - y) ** 2).mean() / y.var()  # independent recomputation from the saved arrays
    assert abs(r2 - r.metrics["test"]["r2"]) < 1e-6


def test_a_run_that_cannot_fit_is_refused_before_its_folder_exists(tmp_path, monkeypatch):
    from ssmbench.harness.training import memory

    monkeypatch.setattr(memory, "free_bytes", lambda device: 20000)  # the model (~11 KiB) fits, its batch does not
    with pytest.raises(ConfigError, match=r"train.batch_size: this run needs at least .* and 19.5 KiB is free"):
        ssmbench.evaluate("dlr", "cumsum", overrides=TINY, out=tmp_path / "run", quiet=True)
    assert not (tmp_path / "run").exists()
    monkeypatch.setattr(memory, "free_bytes", lambda device: 1000)  # not even the model: no batch size helps
    with pytest.raises(ConfigError, match=r"model: this run needs at least .* and 1000 B is free"):
        ssmbench.evaluate("dlr", "cumsum", overrides=TINY, out=tmp_path / "run", quiet=True)
    assert not (tmp_path / "run").exists()
    forced = ssmbench.evaluate("dlr", "cumsum", overrides=TINY, out=tmp_path / "forced", quiet=True, force=True)
    est = forced.metrics["memory"]
    assert est["estimated_peak_bytes"] == 4 * est["parameter_bytes"] + 16 * est["saved_bytes_per_sample"] > 0


def test_seeds_run_one_folder_each_and_compare_averages_them(tmp_path):
    result = run_main("eval", "--model", "dlr", *CLI_TINY, "--seeds", "0,1,2", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert [Path(r).name for r in out["runs"]] == ["cumsum-seed0", "cumsum-seed1", "cumsum-seed2"]
    seeds = [json.loads((tmp_path / r / "config.json").read_text())["seed"] for r in out["runs"]]
    assert seeds == [0, 1, 2]
    (column,) = out["table"]["columns"]
    assert column["cells"]["cumsum"]["n"] == 3 and column["cells"]["cumsum"]["r2_std"] is not None
