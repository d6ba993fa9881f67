"""The import paths users write keep working after the harness was split into sub-packages (issue 38): the
top-level `ssmbench.evaluate`, and the names docs/models.md gives plug-in authors."""

from __future__ import annotations

import importlib

import pytest

import ssmbench


def test_the_lazy_entry_points_resolve():
    from ssmbench.harness.evaluation import evaluate

    assert ssmbench.evaluate is evaluate
    assert callable(ssmbench.open_dataset)


@pytest.mark.parametrize("path,name,home", [
    ("ssmbench.harness.models", "build_model", "ssmbench.harness.models.build"),
    ("ssmbench.harness.models", "causality_checks", "ssmbench.harness.models.build"),
    ("ssmbench.harness.models", "check_causality", "ssmbench.harness.models.build"),
    ("ssmbench.harness.models", "SequenceModel", "ssmbench.harness.models.backbone"),
    ("ssmbench.harness.models", "param_groups", "ssmbench.harness.models.optim_groups"),
    ("ssmbench.harness.backbone", "SequenceModel", "ssmbench.harness.models.backbone"),
    ("ssmbench.harness.optim_groups", "param_groups", "ssmbench.harness.models.optim_groups"),
    ("ssmbench.harness.evaluation", "train_and_score", "ssmbench.harness.training.protocol"),
    ("ssmbench.harness.scoring", "score", "ssmbench.harness.scoring"),
])
def test_a_documented_name_is_where_the_docs_say(path, name, home):
    assert getattr(importlib.import_module(path), name) is getattr(importlib.import_module(home), name)
