"""Parameter groups from `_optim` hints and `param_groups()` implementations."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ssmbench.errors import SsmbenchError
from ssmbench.harness.models.optim_groups import describe, param_groups
from ssmbench.reference_models.dlr import DLR
from ssmbench.reference_models.lru import LRU
from ssmbench.reference_models.s4d import S4D


def by_label(groups: list[dict]) -> dict[str, dict]:
    return {g["group"]: g for g in groups}


def test_ssm_hints_become_groups_without_weight_decay() -> None:
    model = nn.Sequential(DLR(4, l_max=8, d_state=4), nn.Linear(4, 4))
    groups = param_groups(model, lr=1e-3, weight_decay=0.01)
    default = by_label(groups)["default"]
    ssm = [g for g in groups if g["group"] != "default"]
    assert len(ssm) == 1 and ssm[0]["lr"] == 1e-3 and ssm[0]["weight_decay"] == 0.0
    assert {id(p) for p in ssm[0]["params"]} == {id(model[0].a), id(model[0].b), id(model[0].W)}
    assert default["weight_decay"] == 0.01 and len(default["params"]) == 3  # D, weight, bias
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    torch.optim.AdamW(groups)  # accepted as is


def test_lr_ssm_scale_and_cap() -> None:
    model = nn.ModuleList([DLR(4, l_max=8, d_state=4), LRU(4, l_max=8, d_state=4, lr_factor=0.25),
                           S4D(4, l_max=8, d_state=4), DLR(4, l_max=8, d_state=4, lr_ssm=7e-5)])
    groups = param_groups(model, lr=4e-3, weight_decay=0.05, lr_ssm=2e-3)
    lrs = {g["group"]: g["lr"] for g in groups}
    assert lrs['{"weight_decay": 0.0}'] == 2e-3  # lr_ssm
    assert lrs['{"lr_scale": 0.25, "weight_decay": 0.0}'] == pytest.approx(5e-4)  # lr_ssm * lr_factor
    assert lrs['{"lr_max": 0.001, "weight_decay": 0.0}'] == 1e-3  # min(1e-3, lr)
    assert lrs['{"lr": 7e-05, "weight_decay": 0.0}'] == 7e-5  # an absolute rate wins
    assert lrs["default"] == 4e-3
    assert all("lr_scale" not in g and "lr_max" not in g for g in groups)


def test_shared_parameters_appear_once() -> None:
    lin = nn.Linear(3, 3)
    groups = param_groups(nn.Sequential(lin, lin), lr=1e-3, weight_decay=0.0)
    assert sum(len(g["params"]) for g in groups) == 2


class Custom(nn.Module):
    def __init__(self, leave_out: bool = False) -> None:
        super().__init__()
        self.x, self.y = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(3))
        self.leave_out = leave_out

    def param_groups(self, base_lr: float, base_wd: float) -> list[dict]:
        groups = [{"params": [self.x], "lr": base_lr * 10}]
        return groups if self.leave_out else groups + [{"params": [self.y], "weight_decay": 0.0}]


def test_module_param_groups_are_used_and_validated() -> None:
    model = nn.Sequential(Custom(), nn.Linear(2, 2))
    groups = param_groups(model, lr=1e-3, weight_decay=0.1)
    custom = [g for g in groups if g["group"] == "Custom.param_groups"]
    assert custom[0]["lr"] == pytest.approx(1e-2) and custom[0]["weight_decay"] == 0.1
    assert custom[1]["lr"] == 1e-3 and custom[1]["weight_decay"] == 0.0
    assert len(by_label(groups)["default"]["params"]) == 2
    with pytest.raises(SsmbenchError, match="leaves 1 of its parameters out"):
        param_groups(nn.Sequential(Custom(leave_out=True)), lr=1e-3, weight_decay=0.0)


def test_describe_is_json_ready() -> None:
    import json

    model = nn.Sequential(DLR(4, l_max=8, d_state=4))
    info = describe(model, param_groups(model, lr=1e-3, weight_decay=0.0))
    json.dumps(info)
    assert sorted(n for g in info for n in g["names"]) == sorted(n for n, _ in model.named_parameters())
