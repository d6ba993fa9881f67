"""`compare` over run folders it cannot tabulate, and strict JSON output of results."""

from __future__ import annotations

import json
import logging

from ssmbench.cli.app import emit
from ssmbench.harness.compare import build_table, load_runs


def _run(folder, metrics):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_overrides": {"n_layers": 1}, "task_config": {"L": 64}}))
    if metrics is not None:
        (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def test_folders_without_test_scores_are_skipped_with_a_note(tmp_path, caplog):
    base = {"task": "cumsum", "model": "dlr", "parameters": 10, "device": "cpu", "time_per_step_s": 0.1}
    good = _run(tmp_path / "good", {**base, "val": {"r2": 0.5, "r2_batchavg": 0.4}, "test": {"r2": 0.6}})
    scored_on_val = _run(tmp_path / "val_only", {**base, "val": {"r2": 0.5}})
    unfinished = _run(tmp_path / "unfinished", None)
    with caplog.at_level(logging.WARNING):
        runs = load_runs([good, scored_on_val, unfinished])
    assert [r["run"] for r in runs] == [str(good)]
    notes = " | ".join(r.getMessage() for r in caplog.records)
    assert "val_only: no test scores" in notes and "unfinished: not finished" in notes


def test_a_second_run_of_the_same_column_and_task_is_named(tmp_path, caplog):
    run = {"task": "cumsum", "model": "dlr", "layers": 1, "L": 64, "params": 10, "device": "cpu",
           "time_per_step_s": 0.1, "cells": {"r2": 0.5, "r2_batchavg": 0.5}}
    with caplog.at_level(logging.WARNING):
        build_table([{**run, "run": "runs/a"}, {**run, "run": "runs/b"}])
    assert any("runs/b replaces an earlier run of cumsum" in r.getMessage() for r in caplog.records)


def test_json_results_are_strict_json(capsys):
    emit({"val": {"r2": float("nan"), "per_class": [1.0, float("inf")]}, "steps": 3}, True, "unused")
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert out == {"val": {"r2": None, "per_class": [1.0, None]}, "steps": 3}
