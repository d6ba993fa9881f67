"""Model resolution (name, module:Class, entry point, class, factory), hyperparameter routing, causality checks."""

from __future__ import annotations

import textwrap
from importlib.metadata import EntryPoint

import pytest
import torch
from torch import nn

from ssmbench import registry
from ssmbench.api import Spec
from ssmbench.errors import ConfigError, SsmbenchError
from ssmbench.harness.models.backbone import SequenceModel
from ssmbench.harness.models.build import build_model, causality_checks, check_causality
from ssmbench.reference_models.dlr import DLR

PLUGIN = textwrap.dedent('''
    """A user's plug-in module for the tests."""
    import torch
    from torch import nn

    class Shift(nn.Module):
        """Output i = input i - lag (causal) or input i + lag (look-ahead, declared non-causal)."""

        def __init__(self, d_model, *, l_max, dropout=0.0, layer_idx=0, lag: int = 1, **hparams):
            super().__init__()
            self.lag = lag
            self.causal = lag >= 0
            self.scale = nn.Parameter(torch.ones(d_model))

        def forward(self, x, *, mask=None):
            return self.scale * torch.roll(x, self.lag, dims=1)  # wraps around: leaks when lag >= 0 too

    class Prefix(nn.Module):
        """Causal: cumulative mean."""

        causal = True

        def __init__(self, d_model, *, l_max, bidirectional=False, dropout=0.0, layer_idx=0):
            super().__init__()
            if bidirectional:
                raise ValueError("Prefix is causal only")

        def forward(self, x, *, mask=None):
            n = torch.arange(1, x.shape[1] + 1, dtype=x.dtype)[:, None]
            return x.cumsum(1) / n

    def build(spec, width: int = 4, wrong: bool = False):
        lin = nn.Linear(spec.d_input, spec.d_output)
        class Whole(nn.Module):
            def forward(self, x):
                y = lin(x.cumsum(1))[:, x.shape[1] - spec.l_output:]
                return y[:, 1:] if wrong else y
        model = Whole()
        model.lin = lin
        return model
''')


@pytest.fixture()
def plugin(tmp_path, monkeypatch):
    (tmp_path / "user_plugin_mod.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "user_plugin_mod"


def spec(causal: bool = True, **kw: object) -> Spec:
    base = dict(fields={}, input_kind="real", d_input=3, seq_len=32, target_kind="regress", d_output=1,
                l_output=8, ignore_index=None, causal=causal, input_scale=None, metrics=("r2",))
    return Spec(**{**base, **kw})


def test_builtin_name_with_cli_strings() -> None:
    model = build_model("dlr", spec(), {"model.d_model": "16", "model.d_state": "8", "model.n_layers": "2",
                                        "model.kernel_to_real": "prod", "model.max_kernel_length": "none",
                                        "model.prenorm": "true", "model.out_proj": "glu"})
    assert isinstance(model, SequenceModel) and len(model.blocks) == 2 and model.prenorm
    mixer = model.mixers[0]
    assert isinstance(mixer, DLR) and mixer.d_state == 8 and mixer.kernel_to_real == "prod"
    assert mixer.max_kernel_length is None and model.model_name == "dlr"
    assert model(torch.randn(2, 32, 3)).shape == (2, 8, 1)


def test_unknown_key_has_did_you_mean_even_with_kwargs(plugin: str) -> None:
    with pytest.raises(ConfigError, match="did you mean 'model.dt_min'"):
        build_model("dlr", spec(), {"model.dt_mn": 1e-4})
    with pytest.raises(ConfigError, match="model.hidden"):  # Shift takes **hparams, but only named keys pass
        build_model(f"{plugin}:Shift", spec(), {"hidden": 3})


def test_module_class_string_and_class_object(plugin: str) -> None:
    model = build_model(f"{plugin}:Prefix", spec(), {"d_model": 8})
    assert model.model_name == f"{plugin}:Prefix"
    assert check_causality(model, torch.randn(2, 32, 3)).passed
    import importlib

    cls = importlib.import_module(plugin).Prefix
    assert build_model(cls, spec(), {"d_model": 8}).model_name.endswith("Prefix")


def test_entry_point_plugin(plugin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ep = EntryPoint(name="prefix", value=f"{plugin}:Prefix", group="ssmbench.models")
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep] if group == "ssmbench.models" else [])
    monkeypatch.setattr(registry.models, "_entries", None)
    monkeypatch.setattr(registry.models, "_cache", {})
    assert "prefix" in registry.models
    assert build_model("prefix", spec(), {"d_model": 8})(torch.randn(1, 32, 3)).shape == (1, 8, 1)


def test_noncausal_refused_unless_allowed(plugin: str) -> None:
    with pytest.raises(ConfigError, match="declares causal = False"):
        build_model(f"{plugin}:Shift", spec(), {"lag": -1})
    model = build_model(f"{plugin}:Shift", spec(), {"lag": -1}, allow_noncausal=True)
    assert model.noncompliant
    with pytest.raises(ConfigError, match="causal = False"):
        build_model("las", spec(), {"d_model": 8, "ap_mode": "centered"})


def test_bidirectional_rules(plugin: str) -> None:
    with pytest.raises(ConfigError, match="never allowed on a causal task"):
        build_model("dlr", spec(), {"bidirectional": True})
    assert build_model("dlr", spec(causal=False), {"d_state": 8, "d_model": 8}).mixers[0].bidirectional
    with pytest.raises(ConfigError, match="takes no `bidirectional`"):
        build_model(f"{plugin}:Shift", spec(causal=False))
    with pytest.raises(ConfigError, match="Prefix is causal only"):  # raises at construction
        build_model(f"{plugin}:Prefix", spec(causal=False))
    assert build_model(f"{plugin}:Prefix", spec(causal=False), {"bidirectional": "false"}).mixers[0].causal


def test_rejected_value_becomes_config_error() -> None:
    with pytest.raises(ConfigError, match="'dlr' rejected its configuration: kernel_to_real"):
        build_model("dlr", spec(), {"kernel_to_real": "abs"})


def test_factory_hparams_and_output_check(plugin: str) -> None:
    model = build_model(f"{plugin}:build", spec(), {"width": "8"})
    assert model(torch.randn(2, 32, 3)).shape == (2, 8, 1)
    with pytest.raises(ConfigError, match="did you mean 'model.width'"):
        build_model(f"{plugin}:build", spec(), {"widht": 8})
    bad = build_model(f"{plugin}:build", spec(), {"wrong": True})
    with pytest.raises(SsmbenchError, match=r"model '.*:build' returned \(2, 7, 1\)"):
        bad(torch.randn(2, 32, 3))
    reports = causality_checks(model, torch.randn(2, 32, 3), l_output=8)
    assert reports["model"].passed


class LookAhead(nn.Module):
    """y_i = x_i + x_{i+k}: leaks k positions."""

    causal = True

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        ahead = torch.cat([x[:, self.k:], torch.zeros_like(x[:, :self.k])], dim=1)
        return x + ahead


@pytest.mark.parametrize("k", [1, 3])
def test_check_reports_leak_reach(k: int) -> None:
    report = check_causality(LookAhead(k), torch.randn(2, 40, 4), grad=True)
    assert not report.passed and report.lookahead == k and report.grad_passed is False
    assert "NOT causal" in str(report)
    assert check_causality(DLR(4, l_max=40, d_state=8), torch.randn(2, 40, 4), grad=True).passed


def test_whole_model_rows_are_aligned_to_the_last_positions() -> None:
    class Tail(nn.Module):
        """Row j = sum of inputs up to position T - l_output + j + ahead."""

        def __init__(self, ahead: int) -> None:
            super().__init__()
            self.ahead = ahead

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            c = x.cumsum(1)
            c = torch.cat([c[:, self.ahead:], c[:, -1:].expand(-1, self.ahead, -1)], dim=1)
            return c[:, -8:]

    x = torch.randn(2, 32, 3)
    assert check_causality(Tail(0), x, l_output=8).passed
    leaky = check_causality(Tail(1), x, l_output=8)
    assert not leaky.passed and leaky.lookahead == 1  # rows one position later than the harness assumes


def test_token_inputs_and_backbone_suite() -> None:
    s = spec(input_kind="tokens", d_input=16)
    model = build_model("las", s, {"d_model": 16})
    x = torch.randint(1, 16, (2, 32))
    reports = causality_checks(model, x, x_alt=torch.randint(1, 16, (2, 32)))
    assert set(reports) == {"mixer", "backbone"} and all(r.passed for r in reports.values())
    assert reports["backbone"].to_json()["passed"] is True


def test_batchnorm_is_checked_in_eval_mode() -> None:
    model = build_model("attention", spec(), {"d_model": 8, "norm": "batch"})
    model.train()
    assert check_causality(model, torch.randn(2, 32, 3)).passed
    assert model.training  # restored
