"""`compare` over run folders it cannot tabulate, and strict JSON output of results."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from ssmbench.cli.app import emit
from ssmbench.harness.results.compare import build_table, load_runs, render_text


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


def _config(steps: int, seed: int, lr: float = 1e-3, workers: int = 1, threads: int | None = None) -> dict:
    return {"task": "cumsum", "task_config": {"L": 64}, "model": "dlr", "model_overrides": {"n_layers": 1},
            "train": {"steps": steps, "lr": lr}, "eval": {"batch_size": 64}, "data": {"seed": 0, "workers": workers},
            "hardware": {"device": "cpu", **({"threads": threads} if threads else {})}, "seed": seed,
            "preset": "quick"}


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
    mean ± sample std of its seeds and n=3, the smoke test apart; hand-computed values (a mean, .97, that no single
    seed has; std sqrt((.02² + .01² + .01²) / 2) = sqrt(.0003))."""
    long = [_finished(tmp_path / f"long{s}", _config(2000, s, workers=s + 1, threads=(None, 1, 8)[s]), r2)
            for s, r2 in ((0, 0.99), (1, 0.96), (2, 0.96))]  # data.workers, hardware.threads differ: same column
    short = _finished(tmp_path / "short", _config(2, 0), -1.037)
    table = build_table(load_runs([*long, short]))
    assert [c["steps"] for c in table["columns"]] == [2000, 2]
    cell = table["columns"][0]["cells"]["cumsum"]
    assert cell["n"] == 3 and abs(cell["r2"] - 0.97) < 1e-12 and abs(cell["r2_std"] - 0.0003 ** 0.5) < 1e-12
    assert table["columns"][1]["cells"]["cumsum"]["r2"] == -1.037
    text = render_text(table)
    assert "2000 steps" in text and "2 steps" in text and "0.970±0.017" in text and "(n=3)" in text


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


def test_a_scored_checkpoint_is_a_row_of_its_run_and_never_replaces_its_cell(tmp_path):
    """`eval --checkpoint RUN/checkpoints/best.pt` copies the run's config (same column digest, same seed) and writes
    test scores only; written later, it used to replace the trained run's cell as the newest run of that seed, and the
    cell lost its validation figure ("0.997 / nan"). It is a row `TASK [scored L=N]` of its run's column (issue 37:
    each scoring was a column of its own); a fresh model scored (`score_only`) is a column labelled apart."""
    trained = _finished(tmp_path / "trained", _config(100, 0), 0.9)
    scored = _finished(tmp_path / "scored", _config(100, 0), 0.9, test_only=True)
    untrained = _finished(tmp_path / "untrained", _config(100, 0), -0.2, test_only=True)
    for folder, checkpoint in ((scored, "trained/checkpoints/best.pt"), (untrained, None)):
        m = json.loads((folder / "metrics.json").read_text())
        m["test"]["r2_batchavg"] = m["test"]["r2"] - 0.02
        (folder / "metrics.json").write_text(json.dumps({**m, "scored_checkpoint": checkpoint}))
    os.utime(trained / "metrics.json", (1, 1))  # the trained run is the oldest
    table = build_table(load_runs([trained, scored, untrained]))
    cells = {c["label"]: c["cells"]["cumsum"] for c in table["columns"]}
    assert len(cells) == 2 and table["tasks"] == ["cumsum", "cumsum [scored L=64]"]
    run = next(c for c in table["columns"] if not c["scored"])
    assert run["cells"]["cumsum"]["r2"] == 0.9 and abs(run["cells"]["cumsum"]["r2_batchavg"] - 0.89) < 1e-12
    assert run["cells"]["cumsum [scored L=64]"]["r2_batchavg"] == pytest.approx(0.88)
    assert [c["r2"] for label, c in cells.items() if label.endswith("[untrained]")] == [-0.2]
    assert "nan" not in render_text(table)


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


# --- run folders, suite folders and parents of either; damaged folders skipped (issue 26) --------------------------

def _ssmbench(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSMBENCH_")}
    return subprocess.run([sys.executable, "-m", "ssmbench", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**env, "PYTHONSAFEPATH": "1"})


def _runs_root(tmp_path):
    """runs/ as `eval` leaves it: a run folder and a suite folder (suite.json, a run per seed)."""
    runs = tmp_path / "runs"
    _finished(runs / "cumsum-dlr-1", _config(100, 0), 0.5)
    suite = runs / "table1-dlr-0dd120da"
    suite.mkdir(parents=True)
    (suite / "suite.json").write_text(json.dumps({"model": "dlr", "tasks": ["shift"], "seeds": [0, 1]}))
    for seed, r2 in ((0, 0.7), (1, 0.8)):
        _finished(suite / f"shift-seed{seed}", {**_config(100, seed), "task": "shift"}, r2)
    return runs, suite


def test_compare_takes_run_folders_suite_folders_and_their_parents(tmp_path):
    """`runs/*` with a suite folder among the runs, the suite folder alone, `runs/*/*` (which lists suite.json and
    the files inside run folders) and `runs` itself: every form tabulates, without a note for what globs list."""
    runs, suite = _runs_root(tmp_path)
    (runs / "cumsum-dlr-1" / "checkpoints").mkdir()
    star = sorted(str(p.relative_to(tmp_path)) for p in runs.glob("*"))
    star_star = sorted(str(p.relative_to(tmp_path)) for p in runs.glob("*/*"))
    assert "runs/table1-dlr-0dd120da/suite.json" in star_star and "runs/cumsum-dlr-1/config.json" in star_star
    for args, cells in ((star, {"cumsum", "shift"}), ([str(suite)], {"shift"}), (star_star, {"shift"}),
                        (["runs"], {"cumsum", "shift"})):
        done = _ssmbench("compare", *args, "--json", cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stderr == "", (args, done.stderr)
        table = json.loads(done.stdout)
        assert set(table["tasks"]) == cells, args
        shift = next(c["cells"]["shift"] for c in table["columns"] if "shift" in c["cells"])
        assert shift["n"] == 2 and abs(shift["r2"] - 0.75) < 1e-12
    assert len(load_runs([runs, suite, *runs.glob("*")])) == 3  # each run once, however often it is named


def test_a_folder_without_config_json_is_skipped_with_a_note_not_the_whole_table(tmp_path, caplog):
    runs, _ = _runs_root(tmp_path)
    broken = _finished(runs / "broken", _config(100, 0), 0.1)
    (broken / "config.json").unlink()
    empty = runs / "empty"
    empty.mkdir()
    with caplog.at_level(logging.WARNING):
        loaded = load_runs(sorted(runs.glob("*")))
    assert sorted(r["task"] for r in loaded) == ["cumsum", "shift", "shift"]
    notes = [r.getMessage() for r in caplog.records]
    assert any(n.startswith(f"skipped {broken}: no config.json") for n in notes), notes
    assert any(n.startswith(f"skipped {empty}: no run folder in it") for n in notes), notes
    assert len(notes) == 2


@pytest.mark.parametrize("damage", ["truncated metrics", "empty metrics", "truncated config", "metrics is a list"])
def test_damaged_json_is_a_note_and_the_rest_is_tabulated(tmp_path, damage):
    """A truncated or empty metrics.json, a truncated config.json: one note naming the folder and the file, the
    other runs tabulated (exit 0); nothing else left: exit 2 in one error line; never a traceback."""
    runs, _ = _runs_root(tmp_path)
    bad = _finished(runs / "bad", _config(100, 3), 0.9)
    name = "config.json" if "config" in damage else "metrics.json"
    text = (bad / name).read_text()
    (bad / name).write_text({"truncated metrics": text[:len(text) // 2], "empty metrics": "",
                             "truncated config": text[:len(text) // 2], "metrics is a list": "[1, 2]"}[damage])
    done = _ssmbench("compare", "runs/bad", "runs/cumsum-dlr-1", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    note = done.stderr.strip()
    assert "\n" not in note and note.startswith("WARNING: skipped runs/bad: ") and name in note, note
    assert "0.500" in done.stdout and "0.900" not in done.stdout
    alone = _ssmbench("compare", "runs/bad", cwd=tmp_path)
    assert alone.returncode == 2 and "Traceback" not in alone.stderr, alone.stderr
    assert alone.stderr.strip().splitlines()[-1] == ("Error: none of the given folders holds a finished run with "
                                                     "test scores (see the notes above)")


def test_a_task_variant_gets_its_own_row_and_never_replaces_the_default(tmp_path):
    """SELECT-FIXED with values=zeros is a dataset of its own: same column (same settings), its own row, run after
    the default and yet not replacing its cell; the default's identity holds no `values` key (added_defaults)."""
    default = {**_config(2000, 0), "task": "select_fixed", "task_config": {"L": 64, "M": 8}}
    zeros = {**default, "task_config": {"L": 64, "M": 8, "values": "zeros"}}
    runs = load_runs([_finished(tmp_path / "noise", default, 0.97), _finished(tmp_path / "zeros", zeros, 0.99)])
    runs[1]["time"] = runs[0]["time"] + 1  # the variant is the newer run
    table = build_table(runs)
    assert table["tasks"] == ["select_fixed", "select_fixed (values=zeros)"] and len(table["columns"]) == 1
    cells = table["columns"][0]["cells"]
    assert cells["select_fixed"]["r2"] == 0.97 and cells["select_fixed (values=zeros)"]["r2"] == 0.99


def test_one_suite_is_one_column_even_where_its_preset_gives_tasks_their_own_steps(tmp_path):
    """`eval --task zoology` trains MQAR for 1,500 steps and induction heads for 3,000 (one quick section each): its
    two runs are one column, titled with the range; the same two runs outside a suite folder are two columns."""
    def runs_in(root, model, r2s):
        root.mkdir(parents=True)
        for task, steps, r2 in (("shift", 1500, r2s[0]), ("cumsum", 3000, r2s[1])):
            cfg = {**_config(steps, 0), "task": task, "model": model}
            _finished(root / task, cfg, r2)
        return root

    for model, r2s in (("dlr", (0.9, 0.8)), ("s4d", (0.7, 0.6))):
        suite = runs_in(tmp_path / f"suite-{model}", model, r2s)
        (suite / "suite.json").write_text(json.dumps({"model": model, "tasks": ["shift", "cumsum"]}))
    table = build_table(load_runs([tmp_path / "suite-dlr", tmp_path / "suite-s4d"]))
    assert len(table["columns"]) == 2
    assert [c["steps"] for c in table["columns"]] == ["1500-3000", "1500-3000"]
    assert {t: c["r2"] for t, c in table["columns"][0]["cells"].items()} == {"shift": 0.9, "cumsum": 0.8}
    assert "1500-3000 steps" in render_text(table)
    loose = runs_in(tmp_path / "loose", "dlr", (0.9, 0.8))  # no suite.json: each run's own configuration
    assert len(build_table(load_runs([loose / "shift", loose / "cumsum"]))["columns"]) == 2


# --- what a new user found confusing (issue 37) -------------------------------------------------------------------

def _with(folder, **metrics):
    m = json.loads((folder / "metrics.json").read_text())
    (folder / "metrics.json").write_text(json.dumps({**m, **metrics}))
    return folder


def test_a_run_and_a_suite_of_one_config_get_unique_labels_and_no_self_ratio(tmp_path):
    """The same DLR config as a loose run and inside a suite: two columns that used to share a label (the digest was
    the same too) and a 'time/step vs DLR 1.41x' of DLR against itself. Now: unique labels, `base` on the first DLR
    column, no ratio on the other DLR column alike, a ratio for another model."""
    runs, suite = _runs_root(tmp_path)
    loose = _with(_finished(tmp_path / "loose", {**_config(100, 0), "task": "shift"}, 0.6), time_per_step_s=0.3)
    s4d = _finished(tmp_path / "s4d", {**_config(100, 0), "task": "shift", "model": "s4d"}, 0.5)
    _with(s4d, model="s4d", time_per_step_s=0.2)
    table = build_table(load_runs([suite, loose, s4d]))
    labels = [c["label"] for c in table["columns"]]
    assert len(set(labels)) == len(labels) == 3, labels
    assert any(f"suite {suite.name}" in label for label in labels), labels
    dlr = [c for c in table["columns"] if c["model"] == "dlr"]
    assert sorted((c["time_base"], c["time_ratio"]) for c in dlr) == [(False, None), (True, 1.0)]
    other = next(c for c in table["columns"] if c["model"] == "s4d")
    assert other["time_ratio"] == pytest.approx(2.0)
    last = render_text(table).split("\n\n")[0].splitlines()[-1].split()
    assert last[-3:] == ["base", "-", "2.00x"] or sorted(last[-3:]) == ["-", "2.00x", "base"], last


def test_the_plain_table_explains_its_cells(tmp_path):
    run = _finished(tmp_path / "r", _config(100, 0), 0.5)
    text = render_text(build_table(load_runs([run])))
    legend = " ".join(text.split("\n\n", 1)[1].split())
    assert legend.startswith("Cells: exact test R² / the paper's per-batch-averaged validation R²"), text
    assert max(len(line) for line in text.splitlines()) <= 110


def test_scorings_fold_into_their_run_and_an_orphan_keeps_one_column(tmp_path):
    """`--lengths 64,128` of two seeds and `--checkpoint` of a run not in the table: one row per scored length in
    the column of the runs that trained them (seeds averaged), one `[scored]` column for the orphan; the table no
    wider than its trained columns plus one."""
    trained = [_finished(tmp_path / f"seed{s}", _config(100, s), 0.9) for s in (0, 1)]
    scorings = []
    for s in (0, 1):
        for L in (64, 128):
            cfg = {**_config(100, s), "task_config": {"L": L}, "eval": {"batch_size": 8, "test_samples": 640}}
            folder = _finished(tmp_path / f"s{s}L{L}", cfg, 0.8 - L / 1000 + s / 100, test_only=True)
            scorings.append(_with(folder, scored_checkpoint=f"seed{s}/checkpoints/best.pt"))
    orphan = _finished(tmp_path / "orphan", _config(100, 0, lr=0.5), 0.1, test_only=True)
    _with(orphan, scored_checkpoint="elsewhere/checkpoints/best.pt")
    table = build_table(load_runs([*trained, *scorings, orphan]))
    assert len(table["columns"]) == 2
    run, alone = table["columns"]
    assert run["scored"] is None and alone["scored"] == "scored" and alone["label"].endswith("[scored]")
    assert table["tasks"] == ["cumsum", "cumsum [scored L=128]", "cumsum [scored L=64]"]
    assert run["cells"]["cumsum [scored L=64]"]["n"] == 2
    assert run["cells"]["cumsum [scored L=64]"]["r2"] == pytest.approx(0.741)
    assert run["cells"]["cumsum"]["r2"] == 0.9 and set(alone["cells"]) == {"cumsum [scored L=64]"}
    assert "[scored L=N]" in render_text(table)


def test_a_partial_test_set_is_marked(tmp_path):
    """20 test images of a 2,000-image test split (read from the dataset's manifest), and a streamed task scored on
    16 of its preset's 640 test samples: each cell says so; a full test set has no mark."""
    data = tmp_path / "data" / "pathfinder-128"
    data.mkdir(parents=True)
    (data / "manifest.json").write_text(json.dumps({"task": "pathfinder", "splits": {"test": {"num_samples": 2000}}}))
    pf_cfg = {**_config(100, 0), "task": "pathfinder", "task_config": {"size": 128}, "data": {"path": str(data)}}
    pf = _finished(tmp_path / "pf", pf_cfg, 0.5)
    (pf / "metrics.json").write_text(json.dumps({"task": "pathfinder", "model": "dlr", "parameters": 10,
                                                 "test": {"macro_f1": 0.5, "macro_accuracy": 0.6, "n": 20,
                                                          "macro_f1_batchavg": 0.5}}))
    small = _with(_finished(tmp_path / "small", _config(100, 0), 0.5), test={"r2": 0.5, "n": 16})
    full = _with(_finished(tmp_path / "full", _config(200, 0), 0.5), test={"r2": 0.5, "n": 640})
    table = build_table(load_runs([pf, small, full]))
    cells = {(t, c["steps"]): cell for c in table["columns"] for t, cell in c["cells"].items()}
    assert cells["pathfinder", 100]["partial"] == "20/2000" and cells["cumsum", 100]["partial"] == "16/640"
    assert "partial" not in cells["cumsum", 200]
    text = render_text(table)
    assert "(test 20/2000)" in text and "(test 16/640)" in text and "of the N test samples" in " ".join(text.split())
    (data / "manifest.json").unlink()  # the dataset is not on this machine: its split's size is unknown, no mark
    assert "partial" not in build_table(load_runs([pf]))["columns"][0]["cells"]["pathfinder"]
