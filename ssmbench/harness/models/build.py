"""Resolve `--model` into an nn.Module for a task's Spec, and check causality (docs/models.md, Plugging in your own model).

One rule: a `torch.nn.Module` subclass is a sequence mixer and is wrapped in `ssmbench.harness.models.backbone.SequenceModel`;
any other callable is a factory `build(spec, **hparams)` that returns the whole model. `--model` is a registered
name (built-in or entry point `ssmbench.models`), a literal `module:Class`, or the object itself.

Example:
    >>> from ssmbench.api import Spec
    >>> spec = Spec(fields={}, input_kind="real", d_input=3, seq_len=64, target_kind="regress", d_output=1,
    ...             l_output=64, ignore_index=None, causal=True, input_scale=None, metrics=("r2",))
    >>> model = build_model("dlr", spec, {"model.d_model": 16, "model.d_state": 32})
    >>> check_causality(model, torch.randn(2, 64, 3)).passed
    True
    >>> build_model("dlr", spec, {"model.d_stat": 32})
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: model.d_stat: unknown key for model 'dlr'; did you mean 'model.d_state'?
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from ...api import Spec
from ...config import Bound, parse_value
from ...errors import ConfigError, SsmbenchError
from ...plain import did_you_mean
from ..config.model_lookup import is_mixer, resolve
from .backbone import SequenceModel

log = logging.getLogger(__name__)

MIXER_RESERVED = ("self", "d_model", "l_max", "bidirectional", "dropout", "layer_idx")
BACKBONE_KEYS = ("d_model", "n_layers", "norm", "prenorm", "out_proj", "dropout", "bidirectional", "norm_eps",
                 "pool")
BACKBONE_BOUNDS = {"d_model": Bound(1, 2 ** 20), "n_layers": Bound(1, 10_000), "dropout": Bound(0, 1, high_open=True),
                   "norm_eps": Bound(0, 1)}
"""Declared ranges of the backbone's numeric keys (a model too large for the device is the memory check's)."""


def _named_params(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(fn).parameters.items()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _coerce(value: Any, param: inspect.Parameter | None, hints: Mapping[str, Any], key: str) -> Any:
    """A command-line string as the type the parameter's annotation (or its default) names, through the one value
    parser (`ssmbench.config.parse_value`): a value that is not that type is a ConfigError naming the key."""
    if not isinstance(value, str) or param is None:
        return value
    typ = hints.get(param.name)
    if typ is None and param.default is not inspect.Parameter.empty and param.default is not None:
        typ = type(param.default)
    return parse_value(value, typ, f"model.{key}")


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Evaluated annotations of a callable (empty when they cannot be evaluated)."""
    import typing

    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - a plug-in's annotation that names something unimportable: parse as literals
        return {}


def _unknown(key: str, name: str, choices: list[str]) -> ConfigError:
    hint = did_you_mean(key, choices, "'model.{}'") or f"; accepted: {', '.join(sorted(choices))}"
    return ConfigError(f"model.{key}", f"unknown key for model {name!r}{hint}")


def build_model(model: str | Callable[..., Any], spec: Spec, overrides: Mapping[str, Any] | None = None, *,
                allow_noncausal: bool = False, check: bool = True) -> nn.Module:
    """Build the model for `spec`.

    Args:
        model: a registered name, `module:Class`, a mixer class or a factory.
        spec: the task's Spec.
        overrides: `model.*` keys (the prefix is optional); values may be strings from the command line.
            Backbone keys: d_model, n_layers, norm, prenorm, out_proj, dropout, bidirectional, norm_eps, pool; every other
            key must be a parameter named by the mixer's `__init__` (or the factory's signature).
        allow_noncausal: accept a mixer declaring `causal = False` on a causal task (results are non-compliant).
        check: run the quick causality check of a mixer (False: a build that is only counted, e.g. on the meta
            device by the memory check, where nothing can run).

    Raises:
        ConfigError: unknown keys, bidirectional on a causal task, a non-causal mixer on a causal task, a mixer
            that cannot be bidirectional, a value the model rejects, or a mixer that declares no `causal`.
            SsmbenchError: a factory that returns no nn.Module.
    """
    obj, name = resolve(model)
    keys = {str(k).removeprefix("model."): v for k, v in (overrides or {}).items()}
    if is_mixer(obj):
        built = _build_backbone(obj, name, spec, keys, allow_noncausal, check)
    elif callable(obj):
        built = _build_factory(obj, name, spec, keys)
    else:
        raise ConfigError("--model", f"{name!r} is a {type(obj).__name__}, neither an nn.Module subclass (a mixer) "
                          "nor a callable (a factory)", "see docs/models.md, Plugging in your own model")
    built.model_name = name  # type: ignore[assignment]
    return built


def _build_backbone(cls: type, name: str, spec: Spec, keys: dict[str, Any], allow_noncausal: bool,
                    check: bool = True) -> nn.Module:
    params = _named_params(cls.__init__)
    own = [n for n in params if n not in MIXER_RESERVED]
    backbone_params = _named_params(SequenceModel.__init__)
    hints, backbone_hints = _hints(cls.__init__), _hints(SequenceModel.__init__)
    bb, mixer_kw = {}, {}
    for key, value in keys.items():
        if key in BACKBONE_KEYS:
            bb[key] = _coerce(value, backbone_params.get(key), backbone_hints, key)
            if key in BACKBONE_BOUNDS:
                BACKBONE_BOUNDS[key].check(f"model.{key}", bb[key])
        elif key in own:
            mixer_kw[key] = _coerce(value, params[key], hints, key)
        else:
            raise _unknown(key, name, own + list(BACKBONE_KEYS))
    bidirectional = bool(bb.pop("bidirectional", not spec.causal))
    if bidirectional and spec.causal:
        raise ConfigError("model.bidirectional", "is never allowed on a causal task")
    if bidirectional and "bidirectional" not in params:
        raise ConfigError("model.bidirectional", f"model {name!r} takes no `bidirectional` argument and cannot "
                          "run two-sided; pass -o model.bidirectional=false to run it causally")
    try:
        built = SequenceModel(spec, cls, bidirectional=bidirectional, mixer_kwargs=mixer_kw, name=name, **bb)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, SsmbenchError):
            raise
        raise ConfigError("model", f"{name!r} rejected its configuration: {exc}") from exc
    for mixer in built.mixers:
        flag = getattr(mixer, "causal", None)
        if not isinstance(flag, bool):
            got = "none" if flag is None else repr(flag)
            raise ConfigError("--model", f"{name!r} breaks the mixer contract: it must declare `causal = True` (its "
                              f"output at t reads inputs up to t only) or `causal = False` (got {got})",
                              "see docs/models.md, Plugging in your own model: A mixer")
        if spec.causal and not flag:
            if not allow_noncausal:
                raise ConfigError("model", f"{name!r} declares causal = False and this task is causal; pass "
                                  "--allow-noncausal to run it anyway (results are marked non-compliant)")
            log.warning("model %r is not causal; its results on this causal task are non-compliant", name)
    leaked = False
    if check and spec.causal and built.mixers and built.mixers[0].causal:
        report = quick_causality_check(built.mixers[0], built.d_model, spec.seq_len, name)
        if report is not None and not report.passed:
            if not allow_noncausal:
                raise ConfigError("model", f"{name!r} declares causal = True but fails the causality check: "
                                  f"{report}", "fix the mixer, or declare causal = False")
            log.warning("model %r fails the causality check; its results are non-compliant: %s", name, report)
            leaked = True
    built.noncompliant = spec.causal and (leaked or not all(m.causal for m in built.mixers))  # type: ignore[assignment]
    return built


QUICK_CHECK_LENGTH = 256
"""Sequence length of the check `build_model` runs (the full-length check runs before training)."""


def quick_causality_check(mixer: nn.Module, d_model: int, seq_len: int, name: str) -> CausalityReport | None:
    """The perturbation check of one mixer on N(0, 1) input (2, min(seq_len, 256), d_model), seeded and on the CPU
    generator (the global torch random state is not touched); None when the mixer cannot run that input.

    A leak that only reaches further than 256 positions ahead shows in the full-length check of the harness.
    """
    T = min(seq_len, QUICK_CHECK_LENGTH)
    device = next((p.device for p in mixer.parameters()), torch.device("cpu"))
    u = torch.randn(2, T, d_model, generator=torch.Generator().manual_seed(0)).to(device)  # (2, T, d_model)
    try:
        return check_causality(mixer, u, name=f"{name} (mixer)")
    except (RuntimeError, ValueError, TypeError, IndexError, AssertionError) as exc:  # user code on a short input
        log.warning("causality check of %r skipped at build time: its mixer failed on a (2, %d, %d) input (%s)",
                    name, T, d_model, exc)
        return None


def _build_factory(factory: Callable[..., Any], name: str, spec: Spec, keys: dict[str, Any]) -> nn.Module:
    params = _named_params(factory)
    own = list(params)[1:]  # the first parameter receives the Spec
    hints = _hints(factory)
    kwargs = {}
    for key, value in keys.items():
        if key not in own:
            raise _unknown(key, name, own)
        kwargs[key] = _coerce(value, params[key], hints, key)
    built = factory(spec, **kwargs)
    if not isinstance(built, nn.Module):
        raise SsmbenchError(f"model {name!r}: the factory returned {type(built).__name__}, expected nn.Module")

    def check(module: nn.Module, args: tuple, out: Any) -> None:
        check_model_output(out, args[0], spec, name)

    built.register_forward_hook(check)
    return built


def check_model_output(y: Any, x: torch.Tensor, spec: Spec, name: str) -> None:
    """Raise an SsmbenchError naming the model unless y is a float (B, l_output, d_output) tensor."""
    want = (x.shape[0], spec.l_output, spec.d_output)
    if not isinstance(y, torch.Tensor) or tuple(y.shape) != want or not y.dtype.is_floating_point:
        got = f"{tuple(y.shape)} {y.dtype}" if isinstance(y, torch.Tensor) else type(y).__name__
        raise SsmbenchError(f"model {name!r} returned {got}; expected a float tensor of shape {want} "
                            "(B, l_output, d_output)")


@dataclass
class CausalityReport:
    """Result of the perturbation check of `check_causality`."""

    passed: bool
    name: str
    cuts: list[int] = field(default_factory=list)
    max_deviation: float = 0.0
    """Largest max |y - y'| over the compared rows of every cut and perturbation."""
    failed_cut: int | None = None
    lookahead: int | None = None
    """Reach of the leak: outputs at i were seen to depend on inputs up to i + lookahead."""
    grad_passed: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        if self.passed:
            return f"{self.name}: causal (cuts {self.cuts}, max deviation {self.max_deviation:.2e})"
        return (f"{self.name}: NOT causal: perturbing inputs after position {self.failed_cut} moved earlier "
                f"outputs by up to {self.max_deviation:.3g}; outputs read up to {self.lookahead} position(s) ahead")


def _cut_points(T: int, l_output: int, seed: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    cuts = [T // 4, T // 2, T - l_output - 1, T - l_output + l_output // 2, T - 2]
    cuts += torch.randint(0, max(1, T - 1), (2,), generator=gen).tolist()
    return sorted({t for t in cuts if 0 <= t <= T - 2})


def check_causality(model: nn.Module, x: torch.Tensor, *, x_alt: torch.Tensor | None = None,
                    l_output: int | None = None, vocab_size: int | None = None, seed: int = 0, grad: bool = False,
                    name: str | None = None) -> CausalityReport:
    """Perturb the future, check that the past outputs do not move.

    Args:
        model: a mixer ((B, T, H) -> (B, T, H)), a `SequenceModel` (checked before the crop, all T positions) or
            a whole model (rows j of its (B, l_output, d) output belong to positions T - l_output + j).
        x: (B, T, ...) input batch: float values or integer token ids.
        x_alt: an independent batch of the same task, whose suffix is the first perturbation.
        l_output: output rows of a whole model (default: the output has T rows aligned with the input).
        vocab_size: token perturbations draw ids in [1, vocab_size); default x.max() + 1.
        seed: the check seed (random cut points and noise). grad: also check d sum(y_<=t) / d x_>t = 0.
    """
    name = name or getattr(model, "model_name", type(model).__name__)
    full = isinstance(model, SequenceModel)
    forward = model.forward_full if full else model
    T = x.shape[1]
    rows_out = T if (full or l_output is None) else l_output
    cuts = _cut_points(T, model.l_output if full else rows_out, seed)  # the backbone compares all T rows
    gen = torch.Generator().manual_seed(seed + 1)
    if x.is_floating_point():
        noise = torch.randn(x.shape, generator=gen, dtype=x.dtype).to(x.device)
    else:
        high = vocab_size or int(x.max()) + 1
        noise = torch.randint(1, max(2, high), x.shape, generator=gen).to(x.device, x.dtype)
    perturbations = [p for p in (x_alt, noise) if p is not None]
    report = CausalityReport(passed=True, name=name, cuts=cuts)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            y = forward(x)
            for t in cuts:
                n_rows = t + 1 - (T - rows_out)  # rows whose input position is <= t
                if n_rows <= 0:
                    continue
                ref = y[:, :n_rows]
                tol = 1e-5 + 1e-4 * float(ref.abs().max())
                for pert in perturbations:
                    x2 = x.clone()
                    x2[:, t + 1:] = pert[:, t + 1:]
                    dev = (forward(x2)[:, :n_rows] - ref).abs().flatten(2).amax(dim=(0, 2))  # (rows,)
                    report.max_deviation = max(report.max_deviation, float(dev.max()))
                    bad = torch.nonzero(dev > tol).flatten()
                    if len(bad):
                        first_pos = int(bad[0]) + (T - rows_out)
                        reach = t + 1 - first_pos
                        if report.passed or reach > (report.lookahead or 0):
                            report.failed_cut, report.lookahead = t, reach
                        report.passed = False
        if grad and x.is_floating_point():
            report.grad_passed = _grad_check(forward, x, cuts[:3], T - rows_out)
            report.passed = report.passed and report.grad_passed
    finally:
        model.train(was_training)
    return report


def _grad_check(forward: Callable[..., torch.Tensor], x: torch.Tensor, cuts: list[int], offset: int) -> bool:
    xg = x.detach().clone().requires_grad_(True)
    y = forward(xg)
    for t in cuts:
        if t + 1 - offset <= 0:
            continue
        (g,) = torch.autograd.grad(y[:, :t + 1 - offset].sum(), xg, retain_graph=True)
        if float(g[:, t + 1:].abs().max()) > 1e-5 + 1e-4 * float(g.abs().max()):
            return False
    return True


def causality_checks(model: nn.Module, x: torch.Tensor, *, x_alt: torch.Tensor | None = None,
                     l_output: int | None = None, vocab_size: int | None = None,
                     seed: int = 0) -> dict[str, CausalityReport]:
    """The full check of a built model: for a SequenceModel, its first mixer on N(0, 1) input (2, T, H) and the
    backbone before the crop; for a whole model, its output rows (pass `l_output`)."""
    if not isinstance(model, SequenceModel):
        return {"model": check_causality(model, x, x_alt=x_alt, l_output=l_output, vocab_size=vocab_size,
                                         seed=seed)}
    gen = torch.Generator().manual_seed(seed)
    u = torch.randn(2, x.shape[1], model.d_model, generator=gen).to(x.device)
    return {"mixer": check_causality(model.mixers[0], u, seed=seed, name=f"{model.name} (mixer)"),
            "backbone": check_causality(model, x, x_alt=x_alt, vocab_size=vocab_size or model.spec.d_input,
                                        seed=seed)}
