"""The state-tracking tasks' training presets (presets/paper_state_tracking.toml, quick_state_tracking.toml): the
paper rows each task picks, their sources, the quick sections' CPU sizes, and the merge of extra preset files."""

from __future__ import annotations

import pytest

from ssmbench.errors import ConfigError
from ssmbench.harness.config.presets import merge_tables, paper_rows, resolve_preset
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.config.task_groups import task_groups
from ssmbench.registry import get_task

CHOMSKY = task_groups()["chomsky"]  # regular, DCF and CS: one paper setting for every task of the family


@pytest.mark.parametrize("task", CHOMSKY)
def test_chomsky_tasks_pick_the_papers_rows_with_the_repositorys_settings(task):
    p = resolve_preset("paper", get_task(task), "attention")
    assert p.name == "chomsky_paper/chomsky/attention"
    assert (p.keys["task.L"], p.keys["train.batch_size"], p.keys["train.lr"], p.keys["train.grad_clip"]) == \
        (40, 128, 1e-3, 1.0)
    assert (p.keys["model.d_model"], p.keys["model.n_layers"], p.keys["model.n_heads"]) == (64, 5, 8)
    assert all("2b8eb4b" in p.provenance[k].source for k in ("train.lr", "model.d_model", "task.L"))


def test_word_problem_rows_follow_the_repositorys_train_functions():
    p = resolve_preset("paper", get_task("word_problem"), "mamba")
    assert p.name == "illusion_paper/word_problem/mamba"
    assert (p.keys["train.batch_size"], p.keys["train.lr"], p.keys["train.weight_decay"], p.keys["model.d_model"],
            p.keys["model.n_layers"]) == (32, 1e-4, 0.01, 512, 1)
    assert "8f910f9" in p.provenance["train.lr"].source
    assert p.provenance["train.steps"].source.startswith("ssmbench choice")


def test_every_new_row_resolves_to_a_run_config_with_an_existing_model():
    names = [n for n in paper_rows() if n.startswith(("chomsky_paper/", "illusion_paper/"))]
    assert len(names) == 5
    for name in names:
        model = name.split("/")[-1]
        if model == "lstm":  # the LSTM reference model comes with issue 40's models
            continue
        task = "word_problem" if "word_problem" in name else "parity_check"
        run = resolve_run(model, task, name)
        assert run.task_config["L"] in (20, 40)


@pytest.mark.parametrize("task", [*CHOMSKY, "word_problem"])
@pytest.mark.parametrize("model", ["attention", "dlr"])
def test_quick_sections_are_cpu_sized(task, model):
    run = resolve_run(model, task, "quick")
    assert run.preset == "quick" and run.train.steps <= 2000 and run.train.batch_size <= 64
    assert run.model_overrides["d_model"] == 64 and run.task_config["L"] <= 40


def test_a_table_defined_in_two_preset_files_is_refused():
    data = {"rows": {"a/x/m": {"source": "s"}}, "chomsky": {}}
    with pytest.raises(ConfigError, match="already defined"):
        merge_tables(data, {"rows": {"a/x/m": {"source": "t"}}}, "presets/paper_b.toml")
    with pytest.raises(ConfigError) as err:
        merge_tables(data, {"chomsky": {"keys": {}}}, "presets/quick_b.toml")
    assert err.value.field == "presets/quick_b.toml"
