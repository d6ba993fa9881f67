"""The `flipflop` and `copying` training presets (presets/paper_flipflop.toml, paper_copying.toml, quick_flipflop.toml,
quick_copying.toml): their rows resolve for every task of the group, the values quoted from the sources are there,
and the preset files merge into `paper` and `quick` without overwriting one another."""

from __future__ import annotations

import pytest

from ssmbench.errors import ConfigError
from ssmbench.harness.config import presets
from ssmbench.harness.config.presets import paper_rows, resolve_preset
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.config.task_groups import expand_tasks
from ssmbench.registry import get_task

COPYING = ["string_copy", "prefix_ngram", "suffix_ngram", "duplicate_ngram"]


def test_groups_hold_the_tasks_in_order():
    assert expand_tasks("copying") == COPYING
    assert expand_tasks("flipflop") == ["flipflop"]


def test_flipflop_paper_rows_are_appendix_b2():
    task = get_task("flipflop")
    attention = resolve_preset("paper", task, "attention")
    assert attention.name == "liu_paper/flipflop/attention"
    keys = attention.keys
    assert (keys["model.n_layers"], keys["model.d_model"], keys["model.n_heads"]) == (6, 512, 8)
    assert (keys["train.batch_size"], keys["train.steps"], keys["train.lr"], keys["train.warmup_steps"]) == (
        16, 10000, 3e-4, 50)
    assert (keys["task.L"], keys["task.p_ignore"]) == (512, 0.8)
    assert [o.value for o in attention.provenance["train.schedule"].others] == ["linear"]
    lstm = resolve_preset("paper", task, "lstm")
    assert (lstm.keys["model.n_layers"], lstm.keys["model.d_model"], lstm.keys["train.steps"]) == (1, 128, 500)


@pytest.mark.parametrize("task", COPYING)
@pytest.mark.parametrize("model", ["attention", "mamba"])
def test_copying_rows_resolve_for_every_task_of_the_group(task, model):
    run = resolve_run(model, task, "paper")
    assert run.preset == f"jelassi_repo/copying/{model}"
    assert run.task_config["max_length"] == 20 and run.task_config["vocab_size"] == 26
    assert run.task_config["min_length"] == (5 if task == "string_copy" else 6)
    assert run.train.steps == 2000 and run.model_overrides["n_layers"] == 12


@pytest.mark.parametrize("task", ["flipflop", *COPYING])
@pytest.mark.parametrize("model", ["attention", "dlr"])
def test_quick_sections_are_cpu_sized(task, model):
    family = resolve_preset("quick", get_task(task), model).family
    assert family == ("flipflop" if task == "flipflop" else "copying")  # their own section, not `generic`
    run = resolve_run(model, task, "quick")
    assert run.preset == "quick" and run.train.steps <= 3000 and run.model_overrides["d_model"] == 64
    assert run.task_config.get("L", 256) == 256 and run.task_config.get("max_length", 20) == 20


def test_every_new_row_carries_sources():
    rows = {name: row for name, row in paper_rows().items() if name.startswith(("liu_paper/", "jelassi_repo/"))}
    assert sorted(rows) == ["jelassi_repo/copying/attention", "jelassi_repo/copying/lstm",
                            "jelassi_repo/copying/mamba", "liu_paper/flipflop/attention", "liu_paper/flipflop/lstm"]
    for name in rows:
        _, prov = presets.paper_presets().resolve(name)
        assert "train.lr" in prov and "train.schedule" in prov, name


def test_a_table_defined_in_two_preset_files_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "presets"
    folder.mkdir()
    (folder / "paper.toml").write_text('[rows."a/b/c"]\nsource = "x"\n')
    (folder / "paper_more.toml").write_text('[rows."a/b/d"]\nsource = "y"\n')
    (folder / "quick.toml").write_text('[preset]\nname = "quick"\n[generic]\nnotes = "g"\n')
    (folder / "quick_extra.toml").write_text('[generic]\nnotes = "again"\n')

    class Files:
        def joinpath(self, name):
            return tmp_path / name

    monkeypatch.setattr(presets.resources, "files", lambda package: Files())
    presets._load.cache_clear()
    try:
        assert sorted(presets._load("paper")["rows"]) == ["a/b/c", "a/b/d"]
        with pytest.raises(ConfigError, match="'generic' is already defined"):
            presets._load("quick")
    finally:
        presets._load.cache_clear()
