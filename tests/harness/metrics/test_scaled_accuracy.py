"""Scaled accuracy (Grazzi et al., ICLR 2025: 0 = chance, 1 = perfect) beside accuracy for the tasks that declare
it: computed by hand on small confusion tables, and wired from a task's Spec to the objective's metrics."""

from __future__ import annotations

import pytest
import torch

from ssmbench.harness.metrics.objectives import objective_for
from ssmbench.harness.metrics.states import ClassificationMetrics
from ssmbench.registry import get_task


def test_scaled_accuracy_by_hand():
    # parity (chance 1/2): 3 of 4 labelled positions right -> accuracy .75, scaled (.75 - .5) / .5 = .5
    m = ClassificationMetrics(2, 4, 4, kind="token", chance=0.5)
    target = torch.tensor([[-100, 1], [-100, 0], [-100, 1], [-100, 0]])
    pred = torch.tensor([[0, 1], [0, 0], [1, 1], [1, 1]])
    m.update(pred, target, torch.arange(4))
    r = m.compute()
    assert r["accuracy"] == 0.75 and r["scaled_accuracy"] == 0.5
    # mod 5 (chance 1/5): 1 of 5 right is chance (0), 0 of 5 is below chance (-1/4), 5 of 5 is 1
    for right, want in ((1, 0.0), (0, -0.25), (5, 1.0)):
        m = ClassificationMetrics(5, 5, 5, kind="token", chance=0.2)
        y = torch.arange(5)[:, None]  # (5, 1): one label a sample
        m.update(torch.where(torch.arange(5)[:, None] < right, y, (y + 1) % 5), y, torch.arange(5))
        assert m.compute()["scaled_accuracy"] == pytest.approx(want, abs=1e-15)


def test_without_chance_there_is_no_scaled_accuracy_and_chance_is_checked():
    m = ClassificationMetrics(2, 1, 1, kind="token")
    m.update(torch.tensor([[1]]), torch.tensor([[1]]), torch.arange(1))
    assert "scaled_accuracy" not in m.compute()
    with pytest.raises(ValueError, match="chance"):
        ClassificationMetrics(2, 1, 1, chance=1.0)


@pytest.mark.parametrize(("task", "chance"), [("parity_check", 1 / 2), ("modular_arithmetic", 1 / 5),
                                               ("cycle_navigation", 1 / 5), ("even_pairs", 1 / 2),
                                               ("word_problem", 1 / 60)])
def test_state_tracking_tasks_report_it_beside_accuracy(task, chance):
    t = get_task(task)
    spec = t.spec(t.presets[t.default_preset])
    obj = objective_for(spec, metric_batch_size=2)
    assert obj.headline[:2] == ("accuracy", "scaled_accuracy")
    m = obj.new_metrics(2)
    assert m.chance == pytest.approx(chance)


def test_a_task_that_does_not_declare_it_keeps_plain_accuracy():
    t = get_task("mqar")
    obj = objective_for(t.spec(t.presets[t.default_preset]), metric_batch_size=2)
    assert "scaled_accuracy" not in obj.headline and obj.new_metrics(2).chance is None
