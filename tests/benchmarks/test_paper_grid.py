"""The paper-protocol grid script and the results table made from its committed runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, load_file

paper_table = load_file(REPO / "benchmarks" / "paper" / "paper_table.py", "paper_table")
GRID = REPO / "benchmarks" / "paper" / "paper_grid.py"


def test_results_page_shows_exactly_the_committed_paper_runs():
    """docs/results.md's paper table is what benchmarks/paper/paper_table.py makes from benchmarks/results/paper/."""
    page = paper_table.PAGE.read_text()
    section = page.split(paper_table.START, 1)[1].split(paper_table.END, 1)[0]
    assert section.strip() == paper_table.table().strip(), "run: python benchmarks/paper/paper_table.py --write"


def test_every_committed_cell_is_a_finished_full_protocol_run():
    for folder in sorted((REPO / "benchmarks" / "results" / "paper").glob("*/")):
        metrics = json.loads((folder / "metrics.json").read_text())
        config = json.loads((folder / "config.json").read_text())
        assert metrics["steps"] == config["train"]["steps"] == 43200, folder.name
        assert metrics["preset"].startswith("dlr_paper/") and metrics["device"] == "cuda", folder.name
        assert "# commit: " in (folder / "command.txt").read_text()


def test_curves_are_each_committed_runs_validation_scores_and_plot_one_panel_a_task(tmp_path):
    """The figure's data: per (model, task), each finished run's 12 validation R² (exact) at 3,600-step intervals,
    the one at the best step equal to the validation R² in its metrics.json."""
    from PIL import Image

    curves = paper_table.curves()
    runs = sorted((REPO / "benchmarks" / "results" / "paper").glob("*/"))
    assert sum(len(lines) for lines in curves.values()) == len(runs)
    for folder in runs:
        metrics, config = (json.loads((folder / f).read_text()) for f in ("metrics.json", "config.json"))
        points = curves[config["model"], config["task"]][
            f"{paper_table._reading(config)}, seed {metrics['seeds']['train']}"]
        assert dict(points)[metrics["best_step"]] == metrics["val"]["r2"], folder.name
    for lines in curves.values():
        for label, points in lines.items():
            assert [s for s, _ in points] == list(range(3600, 43201, 3600)), label
            assert all(-1 < r2 <= 1 for _, r2 in points), label
    assert ("dlr", "select_fixed") in curves and "LR 5e-05 (default data), seed 0" in curves["dlr", "select_fixed"]
    png = paper_table.plot(tmp_path / "curves.png")
    with Image.open(png) as image:
        width, height = image.size
    assert width > len(curves) * 400 and height > 300  # one panel a (model, task)


def test_table_marks_unrun_cells_and_averages_seeds(tmp_path):
    grid = load_file(GRID, "paper_grid")
    cell = grid.CELLS[0]
    for seed, (r2, batch) in enumerate([(0.90, 0.91), (0.96, 0.95)]):
        folder = tmp_path / cell.name.replace("-s0", f"-s{seed}")
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(
            {"task_config": {"values": "noise"}, "train": {"lr": 5e-5, "steps": 43200}}))
        (folder / "metrics.json").write_text(json.dumps(
            {"test": {"r2": r2, "r2_batchavg": batch}, "seeds": {"train": seed}, "steps": 43200}))
        (folder / "command.txt").write_text("ssmbench eval ...\n# device: GPU X\n# commit: abcdef123\n")
    rows = paper_table.table(tmp_path).splitlines()
    first = next(r for r in rows if cell.task in r and "values=noise" in r and "5e-05" in r)
    assert "0.9300 ± 0.0283" in first and "0.9300 ± 0.0424" in first and "2 (seed 0,1)" in first
    assert "GPU X" in first and "abcdef1" in first
    assert sum("not run" in r for r in rows) == len({c.name.rsplit("-s", 1)[0] for c in grid.CELLS}) - 1


# Slow (15 s): the grid script runs three times, training two tiny cells in processes of their own. It guards the
# order, the skipping of committed cells and the refusal of --tiny results; CI runs it (`pytest -m slow`).
@pytest.mark.slow
def test_grid_runs_in_order_skips_finished_cells_and_refuses_tiny_runs_in_the_results(tmp_path):
    results, runs = tmp_path / "results", tmp_path / "runs"
    base = [sys.executable, str(GRID), "--device", "cpu", "--workers", "0", "--tiny", "--only", "1",
            "--results", str(results), "--runs", str(runs), "--budget", "900"]
    first = subprocess.run(base, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    grid = load_file(GRID, "paper_grid")
    done = results / grid.CELLS[0].name
    assert {p.name for p in done.iterdir()} == {"config.json", "metrics.json", "metrics.jsonl", "command.txt"}
    assert "values" not in json.loads((done / "config.json").read_text())["task_config"]  # the default's identity
    shutil.rmtree(runs)  # a fresh GPU machine: only the committed results say the cell is done
    second = subprocess.run(base, capture_output=True, text=True, timeout=900)
    assert f"start {grid.CELLS[1].name}" in second.stdout and grid.CELLS[0].name not in second.stdout
    refused = subprocess.run([sys.executable, str(GRID), "--tiny", "--device", "cpu"], capture_output=True,
                             text=True, timeout=300)
    assert refused.returncode == 2 and "--tiny results are not paper results" in refused.stderr


def test_packed_mode_runs_each_models_preset_cells_as_one_suite_of_tasks_by_seeds():
    grid = load_file(GRID, "paper_grid_packed")
    cells = [grid.Cell("dlr", "shift", 0), grid.Cell("dlr", "cumsum", 1), grid.Cell("dlr", "shift", 1),
             grid.Cell("dlr", "cummax", 0, {"train.lr": 5e-5}), grid.Cell("attention", "mips", 0)]
    suites = grid.packed_suites(cells)
    assert [(model, [c.name for c in members]) for model, members in suites] == \
        [("dlr", ["dlr-shift-s0", "dlr-cumsum-s1", "dlr-shift-s1"]), ("attention", ["attention-mips-s0"])]
    argv = grid.suite_command("dlr", suites[0][1], "cuda", 2, Path("runs/suite-dlr"), None)
    assert argv[argv.index("--task") + 1] == "shift,cumsum" and argv[argv.index("--seeds") + 1] == "0,1"
    assert "--pack" not in argv and argv[argv.index("--preset") + 1] == "paper"
