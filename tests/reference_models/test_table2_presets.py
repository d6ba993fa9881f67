"""Table 2 (long SHIFT) presets: every row resolves from `--preset paper` or its full name and builds its model."""

from __future__ import annotations

import pytest
import torch

from ssmbench.harness.config.presets import resolve_preset
from ssmbench.harness.models.build import build_model
from ssmbench.registry import get_task

ROWS = {"dlr_paper/long_shift/dlr": ("dlr", 4096), "dlr_paper/long_shift/dss_exp": ("dss_exp", 4096),
        "dlr_paper/long_shift/sgconv": ("sgconv", 4096), "dlr_paper/long_shift/dlr_prod": ("dlr", 4096),
        "dlr_paper/long_shift/dlr_n512": ("dlr", 512), "dlr_paper/long_shift/dlr_real": ("dlr", 4096)}
ATTRS = {"dlr_paper/long_shift/dlr_prod": {"kernel_to_real": "prod"}, "dlr_paper/long_shift/dlr_real": {"variant": "real"},
         "dlr_paper/long_shift/dlr": {"kernel_to_real": "real", "variant": "complex"}}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_row_keys_build_the_model_at_a_table2_length(row: str) -> None:
    model, n = ROWS[row]
    shift, L = get_task("shift"), 256
    p = resolve_preset(row, shift, model, shift.Config(L=L), length=L)
    assert (p.keys["model.d_model"], p.keys["train.batch_size"], p.keys["train.steps"]) == (32, 4, 86400)
    overrides = {k: v for k, v in p.keys.items() if k.startswith("model.")}
    torch.manual_seed(0)
    net = build_model(model, shift.spec(shift.Config(L=L)), overrides)
    mixer = next(m for m in net.modules() if type(m).__name__.lower().replace("_", "") == model.replace("_", ""))
    assert getattr(mixer, "d_state", None) == n or getattr(mixer, "kernel_dim", None) == n
    assert {k: getattr(mixer, k) for k in ATTRS.get(row, {})} == ATTRS.get(row, {})


def test_paper_preset_picks_sgconv_row_at_table2_lengths() -> None:
    shift = get_task("shift")
    for L in (2 ** 14, 2 ** 16, 2 ** 20):
        p = resolve_preset("paper", shift, "sgconv", shift.Config(L=L), length=L)
        assert p.name == "dlr_paper/long_shift/sgconv" and p.keys["task.L"] == L
        assert (p.keys["model.kernel_dim"], p.keys["train.lr"]) == (4096, 1e-5)
