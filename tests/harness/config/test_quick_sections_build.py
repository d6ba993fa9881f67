"""The models the recall tasks' `quick` sections give keys of their own (the state size `${T}`), and attention, build
from the preset on every task of the zoology and mad groups: a row a model rejects (an odd S4D state size from
`${T}` = 127, found by a MAD suite run) fails here, not an hour into a suite. (Every registered model on every
recall task takes about 70 s on 2 busy cores: the check was run once by hand, all building.)"""

from __future__ import annotations

import pytest

from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.config.task_groups import task_groups
from ssmbench.harness.models.build import build_model

RECALL_TASKS = sorted({task for group in ("zoology", "mad") for task in task_groups()[group]})
MODELS = ("attention", "dlr", "dss_exp", "s4d")


@pytest.mark.parametrize("task", RECALL_TASKS)
def test_every_model_builds_from_the_quick_preset(task):
    failed = []
    for model in MODELS:
        cfg = resolve_run(model, task, "quick")
        try:
            build_model(cfg.model, cfg.spec(), dict(cfg.model_overrides), allow_noncausal=cfg.allow_noncausal)
        except Exception as exc:  # noqa: BLE001 - every model's refusal is collected and named
            failed.append(f"{model}: {exc}")
    assert failed == [], "\n".join(failed)
