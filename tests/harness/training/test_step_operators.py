"""A training step of the harness dispatches the bare loop's operators plus a fixed few: on a GPU, where a small
model's step is bound by the host launching ~1,000 operators, anything added to every step (a metric, a
synchronisation, clipping that was not asked for) would show in full (`benchmarks/harness/step_ops.py`, issue 25)."""

from __future__ import annotations

import pytest

from support import REPO, load_file

ADDED = {  # operator: times per step, and why
    "aten::select": 2, "aten::as_strided": 2,  # the step's inputs and targets, views of the workers' message
    "aten::to": 3, "aten::_to_copy": 1, "aten::copy_": 1, "aten::empty_strided": 1,  # x, y to the device; loss
    "aten::detach": 1, "detach": 1, "aten::add_": 1,  # the loss summed on the device for the next log line
}


# Slow (25 s on 2 cores): the torch profiler records four whole runs (start-up, scoring and plots included) and two
# bare loops. It guards the per-step cost on a GPU, which no CPU test would notice; CI runs it (`pytest -m slow`).
@pytest.mark.slow
@pytest.mark.parametrize("model", ["dlr"])
def test_the_harness_adds_only_the_batch_hand_over_and_the_loss_sum_to_a_step(model):
    harness, bare = load_file(REPO / "benchmarks" / "harness" / "step_ops.py").step_operators(model, length=32)
    added = {k: harness.get(k, 0) - bare.get(k, 0) for k in set(harness) | set(bare)}
    added = {k: v for k, v in added.items() if abs(v) >= 0.5}
    assert added == ADDED
    assert sum(v for k, v in bare.items() if k.startswith("aten::")) > 200  # the counts are of real steps
