"""The `zoology` group's training presets: `quick` sections and the `paper` rows of Zoology's Figure 2 (one family per
sequence length) and of the Mamba paper's induction heads."""

from __future__ import annotations

import pytest

from ssmbench.errors import ConfigError
from ssmbench.generators.mqar import FIGURE2, MqarConfig
from ssmbench.harness.config.presets import paper_rows, resolve_preset
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.registry import get_task


@pytest.mark.parametrize("L", sorted(FIGURE2))
@pytest.mark.parametrize("model", ["attention", "mamba"])
def test_paper_picks_the_figure2_row_of_the_task_length(L, model):
    task = get_task("mqar")
    p = resolve_preset("paper", task, model, MqarConfig(L=L, num_kv_pairs=FIGURE2[L]))
    assert p.name == f"zoology_paper/mqar{L}/{model}"
    assert (p.keys["task.L"], p.keys["task.num_kv_pairs"], p.keys["task.vocab_size"]) == (L, FIGURE2[L], 8192)
    # 64 epochs of 100,000 samples at Figure 2's batch size for L
    batch = {64: 512, 128: 512, 256: 256, 512: 128}[L]
    assert p.keys["train.batch_size"] == batch and p.keys["train.steps"] == 64 * -(-100_000 // batch)
    assert "train.lr" in p.provenance and p.provenance["train.lr"].others


def test_paper_at_a_length_zoology_did_not_run_names_the_rows_it_did():
    with pytest.raises(ConfigError, match="zoology_paper/mqar64"):
        resolve_preset("paper", get_task("mqar"), "attention", MqarConfig(L=1024, num_kv_pairs=64))


def test_every_zoology_and_mamba_row_resolves_to_a_run_config():
    for name in paper_rows():
        if name.startswith(("zoology_paper/", "mamba_paper/")):
            family, model = name.split("/")[1:]
            task = "mqar" if family.startswith("mqar") else family
            run = resolve_run(model, task, name)
            assert run.task_config["L"] in (int(family[4:]) if task == "mqar" else 256,)


@pytest.mark.parametrize("task", ["mqar", "induction_heads"])
@pytest.mark.parametrize("model", ["attention", "dlr"])
def test_quick_sections_are_cpu_sized(task, model):
    run = resolve_run(model, task, "quick")
    assert run.preset == "quick" and run.train.steps <= 3000 and run.model_overrides["n_layers"] == 2
    assert run.task_config["L"] <= 256 and run.task_config["vocab_size"] <= 256
    if model == "attention":
        assert run.model_overrides["n_heads"] == 1
