"""The fp16 update: a step the gradient scaler skips still advances the schedule, without PyTorch's warning."""

from __future__ import annotations

import torch

from ssmbench.harness.runtime.precision import step_and_schedule


def _setup():
    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([w], lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    return w, opt, sched


def test_overflowed_step_is_skipped_and_the_schedule_advances_silently():
    """pytest turns warnings into errors here (pyproject filterwarnings), so the warning would fail the test."""
    w, opt, sched = _setup()
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale((w * float("inf")).sum()).backward()  # inf gradients: the scaler skips this update
    step_and_schedule(opt, scaler, sched)
    assert torch.equal(w.detach(), torch.ones(3))
    assert sched.last_epoch == 1 and opt.param_groups[0]["lr"] == 0.05
    assert scaler.get_scale() < 2.0 ** 16  # it lowered its scale


def test_finite_step_updates_with_and_without_a_scaler():
    for scaler in (None, torch.amp.GradScaler("cpu")):
        w, opt, sched = _setup()
        loss = w.sum()
        (scaler.scale(loss) if scaler else loss).backward()
        step_and_schedule(opt, scaler, sched)
        torch.testing.assert_close(w.detach(), torch.full((3,), 0.9))
        assert sched.last_epoch == 1
