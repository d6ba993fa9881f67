"""The presets of Grazzi et al. 2025 (presets/paper_negeig.toml): the paper rows follow the authors' run configs in
ssmbench's length units, every value of theirs carries its source, ssmbench's additions say so, the quick rows are
CPU-sized, and every row resolves to a run whose model builds."""

from __future__ import annotations

import pytest

from ssmbench.harness.config.presets import paper_presets, paper_rows, resolve_preset
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.models.build import build_model
from ssmbench.harness.runtime.lengths import parse_lengths
from ssmbench.registry import get_task

TASKS = {"parity": "parity_check", "mod_arithmetic": "modular_arithmetic"}
ROWS = sorted(n for n in paper_rows() if n.startswith(("negeig_paper/", "negeig_quick/")))


def model_of(row: str) -> str:
    return row.rsplit("/", 1)[1].removesuffix("_neg")


def test_the_rows_cover_every_variant_of_both_tasks_at_both_sizes():
    variants = {"attention", "mamba", "mamba_neg", "deltanet", "deltanet_neg", "lstm", "dlr", "s4d", "lru"}
    for prefix in ("negeig_paper", "negeig_quick"):
        for family in TASKS:
            assert {r.rsplit("/", 1)[1] for r in ROWS if r.startswith(f"{prefix}/{family}/")} == variants


@pytest.mark.parametrize(("family", "lengths", "steps", "warmup", "wd"),
                         [("parity", (2, 39, "39-255"), 20000, 2000, 0.0),
                          ("mod_arithmetic", (1, 37, "39-253"), 100000, 10000, 0.1)])
def test_paper_rows_follow_the_authors_configs_in_ssmbench_units(family, lengths, steps, warmup, wd):
    task = get_task(TASKS[family])
    p = resolve_preset(f"negeig_paper/{family}/mamba_neg", task, "mamba")
    k = p.keys
    assert (k["train.length_min"], k["train.length_max"], k["eval.test_lengths"]) == lengths
    assert k["task.L"] == lengths[1]
    assert (k["model.d_model"], k["model.n_layers"], k["train.batch_size"], k["train.lr"]) == (128, 2, 256, 1e-3)
    assert (k["train.steps"], k["train.warmup_steps"], k["train.weight_decay"], k["model.eig_range"]) == \
        (steps, warmup, wd, "-1_1")
    assert all("dd420c5" in p.provenance[key].source for key in
               ("task.L", "train.lr", "train.steps", "train.weight_decay", "model.eig_range", "eval.test_lengths"))
    # the authors' sequence length n is ssmbench's L + 1 (parity) / L + 2 (modular arithmetic): their 40..256
    extra = 1 if family == "parity" else 2
    test = parse_lengths(k["eval.test_lengths"])
    assert min(test) + extra in (40, 41) and max(test) + extra in (255, 256)


def test_eigenvalue_variants_differ_only_in_their_range():
    parity = get_task("parity_check")
    for model, key, pos, neg in (("mamba", "model.eig_range", "0_1", "-1_1"),
                                 ("deltanet", "model.beta_range", "0_1", "0_2")):
        a = resolve_preset(f"negeig_paper/parity/{model}", parity, model).keys
        b = resolve_preset(f"negeig_paper/parity/{model}_neg", parity, model).keys
        assert (a[key], b[key]) == (pos, neg)
        assert {k: v for k, v in a.items() if k != key} == {k: v for k, v in b.items() if k != key}


def test_ssmbench_additions_are_marked_and_every_paper_value_has_a_source():
    presets = paper_presets()
    for row in ROWS:
        if not row.startswith("negeig_paper/"):
            continue
        keys, prov = presets.resolve(row)
        assert set(keys) == set(prov), f"{row}: keys without a source: {sorted(set(keys) - set(prov))}"
        if model_of(row) in ("lstm", "dlr", "s4d", "lru"):
            assert "ssmbench addition" in presets.rows[row].source and presets.rows[row].notes


@pytest.mark.parametrize("row", ROWS)
def test_every_row_resolves_and_builds_its_model(row):
    family = row.split("/")[1]
    cfg = resolve_run(model_of(row), TASKS[family], row)
    assert cfg.train.length_min is not None and cfg.eval.test_lengths
    if row.startswith("negeig_quick/"):
        assert cfg.train.steps <= 2000 and cfg.train.batch_size <= 64 and cfg.model_overrides["d_model"] <= 64
        assert max(parse_lengths(cfg.eval.test_lengths)) >= 8 * cfg.train.length_max - 8
    build_model(cfg.model, cfg.spec(), dict(cfg.model_overrides), allow_noncausal=cfg.allow_noncausal)
