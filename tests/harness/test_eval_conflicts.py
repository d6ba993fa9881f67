"""`eval` options that contradict each other or aim a run at a dataset folder: one line, exit 2, nothing written
(issue 37: `--seed 3 --seeds 0,1` ran seeds 0 and 1 and recorded seed 3; `--out data/shift-512` wrote a run into
the dataset folder)."""

from __future__ import annotations

import json

import pytest

from ssmbench.cli import main


def cli(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as end:
        main(list(args))
    return end.value.code, capsys.readouterr().err


def one_line(code: int, err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err, err
    assert lines[0].startswith("invalid option:") and len(lines) <= 2, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_seed_and_seeds_together_are_a_usage_error(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = cli(capsys, "eval", "--model", "dlr", "--task", "shift", "--seed", "3", "--seeds", "0,1")
    one_line(code, err, "--seed: conflicts with --seeds 0,1", "--seeds 0,1, or --seed 3 alone")
    monkeypatch.setenv("SSMBENCH_EVAL_SEED", "3")  # click's environment variable counts as given too
    code, err = cli(capsys, "eval", "--model", "dlr", "--task", "shift", "--seeds", "0,1")
    one_line(code, err, "--seed: conflicts with --seeds")
    assert not (tmp_path / "runs").exists()


def _dataset(folder):
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"task": "shift", "splits": {}}))
    return folder


@pytest.mark.parametrize("where", ["the folder", "inside it", "runs root"])
def test_a_run_folder_in_a_dataset_folder_is_a_usage_error(capsys, tmp_path, where):
    data = _dataset(tmp_path / "data" / "shift-512")
    option, value = {"the folder": ("--out", data), "inside it": ("--out", data / "runs" / "r1"),
                     "runs root": ("--runs-root", data / "runs")}[where]
    code, err = cli(capsys, "eval", "--model", "dlr", "--task", "shift", option, str(value))
    one_line(code, err, f"{option}: {value} is", "a run there would be mixed into the dataset's files")
    assert sorted(p.name for p in data.iterdir()) == ["manifest.json"]


def test_a_folder_beside_a_dataset_or_with_another_manifest_is_no_dataset(tmp_path):
    from ssmbench.cli.eval_commands import dataset_folder_at

    data = _dataset(tmp_path / "data" / "shift-512")
    assert dataset_folder_at(data / "x") == str(data)
    assert dataset_folder_at(tmp_path / "data" / "runs") is None
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "manifest.json").write_text('{"name": "an app manifest"}')
    assert dataset_folder_at(tmp_path / "web" / "runs") is None


def test_eval_help_lists_the_groups_the_tasks_declare(monkeypatch):
    """The groups come from the registry when the help is shown (zoology and mad were missing from a written list);
    a group a plug-in declares appears too."""
    from click.testing import CliRunner

    from ssmbench.cli import cli as group
    from ssmbench.harness.config import task_groups

    text = " ".join(CliRunner().invoke(group, ["eval", "--help"]).output.split())
    assert all(name in text for name in ("atomic", "table1", "higher_order", "zoology", "mad")), text
    monkeypatch.setattr(task_groups, "task_groups", lambda: {"all": [], "atomic": [], "my_plugin_group": []})
    text = " ".join(CliRunner().invoke(group, ["eval", "--help"]).output.split())
    assert "a group (atomic, my_plugin_group, all)" in text, text
