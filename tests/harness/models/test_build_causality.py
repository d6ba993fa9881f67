"""`build_model` runs the causality check on a mixer that declares `causal = True` for a causal task."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from ssmbench.api import Spec
from ssmbench.errors import ConfigError
from ssmbench.harness.models.backbone import SequenceModel
from ssmbench.harness.models.build import build_model


class PeekAhead(nn.Module):
    """Claims causality but output i reads input i + 3: a leak the check must catch at build time."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        ahead = torch.cat([x[:, 3:], torch.zeros_like(x[:, :3])], dim=1)  # (B, L, D): row i holds x[i + 3]
        return self.proj(x + ahead)


class RunningSum(nn.Module):
    """Honestly causal: prefix sums."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.proj(x.cumsum(1))


def spec(causal: bool = True) -> Spec:
    return Spec(fields={}, input_kind="real", d_input=3, seq_len=64, target_kind="regress", d_output=1, l_output=64,
                ignore_index=None, causal=causal, input_scale=None, metrics=("r2",))


def test_a_leaking_mixer_that_claims_causality_is_refused_with_one_line_naming_it():
    with pytest.raises(ConfigError) as err:
        build_model(PeekAhead, spec(), {"d_model": 8})
    message = err.value.message
    assert "PeekAhead" in message and "fails the causality check" in message and "\n" not in message
    assert "3 position(s) ahead" in message  # the reach of the leak: i + 3
    assert "declare causal = False" in err.value.hint


def test_allow_noncausal_builds_it_marked_noncompliant(caplog):
    with caplog.at_level(logging.WARNING, logger="ssmbench.harness.models.build"):
        model = build_model(PeekAhead, spec(), {"d_model": 8}, allow_noncausal=True)
    assert model.noncompliant and "fails the causality check" in caplog.text


def test_causal_mixers_pass_and_the_check_leaves_the_global_rng_alone():
    """The check draws its input from its own generator: the weights and every later draw stay as without it."""
    torch.manual_seed(5)
    model = build_model(RunningSum, spec(), {"d_model": 8})
    after_build = torch.get_rng_state()
    torch.manual_seed(5)
    plain = SequenceModel(spec(), RunningSum, bidirectional=False, mixer_kwargs={}, name="plain", d_model=8)
    assert torch.equal(after_build, torch.get_rng_state()) and not model.noncompliant
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), plain.state_dict().values(),
                                                 strict=True))


def test_no_check_on_a_noncausal_task():
    assert not build_model(PeekAhead, spec(causal=False), {"d_model": 8, "bidirectional": False}).noncompliant
