"""Contract suite over every registered model: shape, honest causality flag, hints, finite grads, summaries."""

from __future__ import annotations

import importlib
import inspect

import pytest
import torch

from ssmbench.harness.models.build import check_causality
from ssmbench.reference_models import BUILTIN
from ssmbench.registry import models

# Small settings so that every model runs in milliseconds; third-party plug-ins run with their defaults.
SMALL = {"dlr": {"d_state": 16}, "dss_exp": {"d_state": 16}, "s4d": {"d_state": 16}, "s4": {"d_state": 16}, "sgconv": {"kernel_dim": 8}, "lru": {"d_state": 16},
         "local_attention": {"chunk_size": 8}, "las_chunk": {"chunk_size": 8}}
SSM_PARAMS = {"dlr": {"a", "b", "W"}, "dss_exp": {"log_lambda_re", "lambda_im", "log_dt", "W"},
              "s4d": {"log_dt", "log_A_real", "A_imag"},
              "s4": {"log_dt", "log_A_real", "A_imag", "B", "P"}, "lru": {"nu_log", "theta_log", "gamma_log", "B"},
              "mamba": {"ssm.0.A_log", "ssm.0.D"}, "sgconv": {"ws.0", "ws.1", "ws.2", "ws.3", "alpha"}}
CAUSAL_ONLY = {"lstm", "deltanet"}  # built-ins that refuse bidirectional=True at construction
H, L = 16, 40


def build(name: str, **kw: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return models.get(name)(H, l_max=L, **SMALL.get(name, {}), **kw)


@pytest.mark.parametrize("name", models.names())
def test_signature_follows_the_mixer_contract(name: str) -> None:
    params = inspect.signature(models.get(name).__init__).parameters
    for key in ("d_model", "l_max", "bidirectional", "dropout", "layer_idx"):
        assert key in params, f"{name}: __init__ lacks {key}"
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), f"{name}: **kwargs swallow typos"


@pytest.mark.parametrize("name", models.names())
@pytest.mark.parametrize("bidirectional", [False, True])
def test_shape_flag_honesty_and_finite_gradients(name: str, bidirectional: bool) -> None:
    if bidirectional and name in CAUSAL_ONLY:
        with pytest.raises(ValueError, match="causal only"):
            build(name, bidirectional=True)
        return
    if bidirectional and name not in BUILTIN:
        try:  # a plug-in that cannot run two-sided must raise at construction
            m = build(name, bidirectional=True)
        except Exception:
            pytest.skip(f"{name} refuses bidirectional=True at construction")
    m = build(name, bidirectional=bidirectional)
    assert isinstance(m.causal, bool) and m.causal is (not bidirectional)
    x = torch.randn(2, L - 3, H, requires_grad=True)  # any L <= l_max
    y = m(x)
    assert y.shape == x.shape and y.dtype == x.dtype
    y.square().mean().backward()
    assert torch.isfinite(x.grad).all()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.parameters() if p.requires_grad)
    report = check_causality(m, torch.randn(2, L, H))
    assert report.passed is m.causal, str(report)  # causal ones pass; two-sided ones are caught leaking


@pytest.mark.parametrize("name", models.names())
def test_optimiser_hints_on_ssm_parameters(name: str) -> None:
    m = build(name)
    hinted = {n for n, p in m.named_parameters() if hasattr(p, "_optim")}
    if name in BUILTIN:
        assert hinted == SSM_PARAMS.get(name, set())
    for n, p in m.named_parameters():
        if n in SSM_PARAMS.get(name, ()):
            assert p._optim["weight_decay"] == 0.0
    for n, p in m.named_parameters():
        assert not p.is_complex(), f"{name}.{n}: parameters are real (complex as a trailing 2)"


@pytest.mark.parametrize("name", list(BUILTIN))
def test_summary_is_first_docstring_line_and_module_has_docstring(name: str) -> None:
    target, summary = BUILTIN[name]
    cls = models.get(name)
    assert cls.__doc__.splitlines()[0] == summary
    module = importlib.import_module(target.split(":")[0])
    assert module.__name__ == f"ssmbench.reference_models.{name}"
    assert module.__doc__ and module.__doc__.strip()
    src = inspect.getsource(module)
    assert "import ssmbench.generators" not in src and "numba" not in src


@pytest.mark.gpu
@pytest.mark.parametrize("name", models.names())
@pytest.mark.parametrize("bidirectional", [False, True])
def test_cuda_matches_cpu(name: str, bidirectional: bool) -> None:
    """Same weights on CUDA and CPU give the same output and finite gradients (TF32 kept off in SSM kernels)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if bidirectional and name in CAUSAL_ONLY:
        pytest.skip(f"{name} is causal only")
    m = build(name, bidirectional=bidirectional)
    x = torch.randn(2, L, H)
    want = m(x)
    got = m.cuda()(x.cuda())
    torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)
    got.square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters() if p.requires_grad)
