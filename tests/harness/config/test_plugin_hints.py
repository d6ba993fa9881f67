"""Plug-in mistakes say how plug-ins are named and what a mixer must declare (issue 37, item 8)."""

from __future__ import annotations

import pytest
import torch

from ssmbench.errors import ConfigError, UnknownNameError
from ssmbench.harness.config.run_config import RunConfig
from ssmbench.harness.models.build import build_model
from ssmbench.registry import models


def test_a_dotted_model_path_suggests_module_colon_object():
    """`--model mymodule.MyMixer` (the Python spelling) said only "unknown model"; a near-miss of a registered
    name keeps its did-you-mean."""
    with pytest.raises(UnknownNameError) as caught:
        models.canonical("mymodule.MyMixer")
    assert str(caught.value) == ("unknown model 'mymodule.MyMixer'; a plug-in is named module:Object, e.g. "
                                 "'mymodule:MyMixer'")
    with pytest.raises(UnknownNameError, match=r"did you mean 'dlr'"):
        models.canonical("dlrr")


class NoCausal(torch.nn.Module):
    """A mixer that forgot `causal`."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(d_model, d_model)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.lin(u)


def test_a_mixer_without_causal_is_a_usage_error_naming_the_contract():
    """It exited 1 with "a mixer must declare `causal: bool`" and no hint: now exit 2, the contract in the line,
    and where it is documented."""
    spec = RunConfig(task="cumsum", task_config={"L": 16}, model="dlr").spec()
    with pytest.raises(ConfigError) as caught:
        build_model(NoCausal, spec, {"model.d_model": 8})
    assert caught.value.exit_code == 2 and "\n" not in str(caught.value)
    assert str(caught.value) == ("--model: 'NoCausal' breaks the mixer contract: it must declare `causal = True` "
                                 "(its output at t reads inputs up to t only) or `causal = False` (got none)")
    assert caught.value.hint == "see docs/models.md, Plugging in your own model: A mixer"
