"""MAD compression's autoencoder readout (`pool="bottleneck"`, ssmbench/harness/models/bottleneck.py): every output row is
decoded from the last position's features alone, the task declares it (`TrainingPolicy.model_keys`), and a run
records it."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ssmbench.errors import ConfigError
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.models.bottleneck import sincos_positions
from ssmbench.harness.models.build import build_model, check_causality
from ssmbench.registry import get_task
from ssmbench.training_policy import TrainingPolicy


class NoMixing(nn.Module):
    """Passes nothing between positions: features at t are a function of the token at t only."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, *, mask=None):
        return self.proj(x)


class PeekNext(NoMixing):
    causal = False  # declared honestly, so that build_model lets it through with allow_noncausal

    def forward(self, x, *, mask=None):
        return self.proj(torch.roll(x, -1, dims=1))  # position t reads t + 1


def compression_spec(seq_len=12, vocab=6):
    task = get_task("mad_compression")
    return task.spec(task.Config(seq_len=seq_len, vocab_size=vocab))


def test_position_embedding_values_by_hand():
    pos = sincos_positions(3, 6)  # half = 3, frequencies 1, 1e-2, 1e-4
    expect = torch.tensor([[math.sin(p * w) for w in (1, 1e-2, 1e-4)] + [math.cos(p * w) for w in (1, 1e-2, 1e-4)]
                           for p in range(3)])
    torch.testing.assert_close(pos, expect.float())


def test_every_row_is_decoded_from_the_last_position_only():
    torch.manual_seed(0)
    spec = compression_spec()
    model = build_model(NoMixing, spec, {"pool": "bottleneck", "d_model": 8}).eval()
    a = torch.randint(0, 5, (4, 12))
    b = torch.randint(0, 5, (4, 12))
    b[:, -1] = a[:, -1]  # same last token, different everything else
    with torch.no_grad():
        ya, yb = model(a), model(b)
        assert ya.shape == (4, 12, spec.d_output)
        torch.testing.assert_close(ya, yb)  # a per-position head would copy each token; this one cannot
        h = model.features(a)  # the slow obvious path: last features + position embedding, then the MLP
        expect = model.decoder.mlp(h[:, -1:, :] + sincos_positions(12, 8)[None])
        torch.testing.assert_close(ya, expect)
    last = build_model(NoMixing, spec, {"pool": "last", "d_model": 8}).eval()
    with torch.no_grad():
        assert not torch.allclose(last(a), last(b))


def test_the_causality_check_still_sees_the_mixers():
    spec = compression_spec()
    x = torch.randint(0, 5, (3, 12))
    assert check_causality(build_model(NoMixing, spec, {"pool": "bottleneck", "d_model": 8}), x).passed
    leaky = build_model(PeekNext, spec, {"pool": "bottleneck", "d_model": 8}, allow_noncausal=True)
    report = check_causality(leaky, x)
    assert not report.passed and report.lookahead == 1


def test_compression_declares_the_readout_and_a_run_config_records_it():
    cfg = resolve_run("attention", "mad_compression", "quick")
    assert cfg.model_overrides["pool"] == "bottleneck"
    assert cfg.to_json()["model_overrides"]["pool"] == "bottleneck"  # config.json: the run is reproducible
    assert resolve_run("attention", "mad_compression", "quick",
                             overrides={"model.pool": "last"}).model_overrides["pool"] == "last"
    assert "pool" not in resolve_run("attention", "mad_in_context_recall", "quick").model_overrides
    assert resolve_run("attention", "mad_compression", "paper").model_overrides["pool"] == "bottleneck"


def test_policy_model_keys_hold_model_keys_only():
    with pytest.raises(ConfigError, match="model_keys"):
        TrainingPolicy(model_keys={"train.steps": 3})
    assert dict(TrainingPolicy(model_keys={"model.pool": "bottleneck"}).model_keys) == {"model.pool": "bottleneck"}
