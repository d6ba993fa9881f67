"""`--config FILE` is read once a command: where the settings are made (the CLI's early checks, `evaluate()`,
`resolve_run`), then carried (`RunSettings.config_read`) to the resolver and a suite's identity."""

from __future__ import annotations

import json

import pytest

from ssmbench import config as config_module
from ssmbench.harness.config.resolver import resolve_run

KEYS = {"train.steps": 2, "train.eval_every": 2, "model.d_model": 4, "model.n_layers": 1, "eval.val_samples": 4,
        "eval.test_samples": 4, "eval.metric_batch_size": 2, "data.workers": 0, "L": 32}


@pytest.fixture
def reads(monkeypatch):
    seen: list[str] = []
    real = config_module.read_config_file
    monkeypatch.setattr(config_module, "read_config_file", lambda path: seen.append(str(path)) or real(path))
    return seen


def test_the_resolver_uses_the_file_as_read(tmp_path, reads):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(KEYS))
    cfg = resolve_run("dlr", "cumsum", config_file=path)
    assert cfg.train.steps == 2 and cfg.task_config["L"] == 32
    assert reads == [str(path)]


def test_an_eval_command_reads_it_once(tmp_path, reads):
    from ssmbench.cli.app import main

    path = tmp_path / "run.json"
    path.write_text(json.dumps(KEYS))
    with pytest.raises(SystemExit) as done:
        main(["eval", "--model", "dlr", "--task", "cumsum", "--config", str(path), "--out", str(tmp_path / "run"),
              "-q"])
    assert done.value.code in (0, None)
    assert (tmp_path / "run" / "metrics.json").is_file()
    assert reads == [str(path)]
