"""`compare` over run folders it cannot tabulate, and strict JSON output of results."""

from __future__ import annotations

import json
import logging

from ssmbench.cli.app import emit
from ssmbench.harness.compare import build_table, load_runs, render_text


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


def _config(steps: int, seed: int, lr: float = 1e-3, workers: int = 1) -> dict:
    return {"task": "cumsum", "task_config": {"L": 64}, "model": "dlr", "model_overrides": {"n_layers": 1},
            "train": {"steps": steps, "lr": lr}, "eval": {"batch_size": 64}, "data": {"seed": 0, "workers": workers},
            "hardware": {"device": "cpu"}, "seed": seed, "preset": "quick"}


def _finished(folder, cfg: dict, r2: float, test_only: bool = False):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    val = {} if test_only else {"val": {"r2": r2, "r2_batchavg": r2 - 0.01}}
    (folder / "metrics.json").write_text(json.dumps({"task": cfg["task"], "model": "dlr", "parameters": 10,
                                                     "device": "cpu", "time_per_step_s": 0.1,
                                                     "preset": "quick", **val, "test": {"r2": r2}}))
    return folder


def test_a_short_run_never_replaces_a_long_one_and_seeds_are_averaged(tmp_path):
    """Two configurations (2,000 and 2 steps) and three seeds of the long one: two columns, the long one with the
    mean ± sample std of its seeds and n=3, the smoke test apart; hand-computed values."""
    long = [_finished(tmp_path / f"long{s}", _config(2000, s, workers=s + 1), r2) for s, r2 in
            ((0, 0.99), (1, 0.97), (2, 0.98))]  # data.workers differs: it cannot change a score, same column
    short = _finished(tmp_path / "short", _config(2, 0), -1.037)
    table = build_table(load_runs([*long, short]))
    assert [c["steps"] for c in table["columns"]] == [2000, 2]
    cell = table["columns"][0]["cells"]["cumsum"]
    assert cell["n"] == 3 and abs(cell["r2"] - 0.98) < 1e-12 and abs(cell["r2_std"] - 0.01) < 1e-12
    assert table["columns"][1]["cells"]["cumsum"]["r2"] == -1.037
    text = render_text(table)
    assert "2000 steps" in text and "2 steps" in text and "0.980±0.010" in text and "(n=3)" in text


def test_a_seed_run_twice_counts_once_and_other_settings_get_their_own_column(tmp_path):
    a = _finished(tmp_path / "a", _config(100, 0), 0.5)
    b = _finished(tmp_path / "b", _config(100, 0), 0.6)  # the same seed again: the newest (b) counts
    other_lr = _finished(tmp_path / "c", _config(100, 0, lr=1e-4), 0.7)
    table = build_table(load_runs([a, b, other_lr]))
    assert len(table["columns"]) == 2
    first = table["columns"][0]["cells"]["cumsum"]
    assert first["n"] == 1 and first["r2"] == 0.6
    assert all(" cfg " in c["label"] for c in table["columns"])  # same title otherwise: digests tell them apart


def test_saving_per_sample_predictions_does_not_split_a_column(tmp_path):
    """eval.log_samples absent (a run from before the key), False and True: one configuration, three seeds."""
    runs = []
    for seed, flag in enumerate((None, False, True)):
        cfg = _config(100, seed)
        if flag is not None:
            cfg["eval"]["log_samples"] = flag
        runs.append(_finished(tmp_path / f"s{seed}", cfg, 0.5 + seed / 10))
    table = build_table(load_runs(runs))
    assert len(table["columns"]) == 1 and table["columns"][0]["cells"]["cumsum"]["n"] == 3


def test_a_checkpoint_scored_on_test_only_is_tabulated(tmp_path):
    scored = _finished(tmp_path / "scored", _config(100, 0), 0.4, test_only=True)
    table = build_table(load_runs([scored]))
    assert table["columns"][0]["cells"]["cumsum"]["r2"] == 0.4


def test_json_results_are_strict_json(capsys):
    emit({"val": {"r2": float("nan"), "per_class": [1.0, float("inf")]}, "steps": 3}, True, "unused")
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert out == {"val": {"r2": None, "per_class": [1.0, None]}, "steps": 3}


def test_a_column_names_the_size_range_of_its_runs(tmp_path):
    """One model on two tasks whose input widths differ (37,120 and 37,250 parameters): the header shows the range,
    whichever task ran first; one size alone is shown once."""
    runs = []
    for task, params, t in (("shift", 37_250, 2), ("cumsum", 37_120, 1)):
        folder = _finished(tmp_path / task, {**_config(2000, 0), "task": task}, 0.9)
        metrics = json.loads((folder / "metrics.json").read_text())
        (folder / "metrics.json").write_text(json.dumps({**metrics, "task": task, "parameters": params}))
        runs += load_runs([folder])
        runs[-1]["time"] = t
    assert "(37.1K-37.2K)" in render_text(build_table(runs))
    assert "(37.1K)" in render_text(build_table(runs[1:]))
