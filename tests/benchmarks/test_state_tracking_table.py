"""benchmarks/paper/state_tracking_table.py on hand-made run folders: per-seed means over the test lengths, the
max and mean ± std over seeds, the by-length means, and a re-scored checkpoint's worst seed."""

from __future__ import annotations

import json

from support import REPO, load_file

table_mod = load_file(REPO / "benchmarks/paper/state_tracking_table.py", "state_tracking_table")


def write_run(folder, seed, test, by_length, rescored=None):
    folder.mkdir(parents=True)
    rows = [{"L": n, "accuracy": a, "scaled_accuracy": 2 * a - 1} for n, a in by_length.items()]
    (folder / "config.json").write_text(json.dumps({"seed": seed}))
    (folder / "metrics.json").write_text(json.dumps({"test": {"accuracy": test}, "lengths": {"rows": rows}}))
    for name, acc in (rescored or {}).items():
        (folder / name).mkdir()
        (folder / name / "metrics.json").write_text(json.dumps({"scored_checkpoint": "x", "test": {"accuracy": acc}}))


def test_rows_summarise_seeds_as_the_papers_do(tmp_path):
    write_run(tmp_path / "parity-lstm/parity_check-seed0", 0, 1.0, {40: 1.0, 80: 1.0}, {"dense": 1.0})
    write_run(tmp_path / "parity-lstm/parity_check-seed1", 1, 1.0, {40: 1.0, 80: 0.5}, {"dense": 0.875})
    (tmp_path / "parity-lstm/suite.json").write_text("{}")
    text = table_mod.table([tmp_path])
    row = next(line for line in text.splitlines() if line.startswith("| parity-lstm"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # seed means over lengths: 1.0 and 0.75 -> max 1.000, mean 0.875, sample std 0.177 (= 0.25 / sqrt 2)
    assert cells[1:4] == ["2", "1.000", "1.000 / 0.875 ± 0.177"]
    assert cells[4] == "1.000 / 0.750 ± 0.354"  # scaled: 2 acc - 1 per length, so 1.0 and 0.5
    assert cells[5] == "40: 1.00, 80: 0.75" and cells[6] == "dense 0.8750" and cells[7] == ""
