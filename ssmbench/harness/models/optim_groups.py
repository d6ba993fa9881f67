"""Optimiser parameter groups from per-parameter `_optim` hints or a module's own `param_groups` (docs/models.md, Optimiser hints).

Group 0 holds every parameter without a hint (global learning rate and weight decay). Each distinct hint dict gets
one more group that inherits the global settings and overrides what the hint names. Hint keys:

* `lr`: an absolute learning rate;
* `weight_decay` (and any other optimiser key, e.g. `betas`): passed through;
* `lr_scale`: multiply the rate (the LRU's `lr_factor`); `lr_max`: cap the rate (S4D's `min(1e-3, lr)`).

A hinted parameter without an absolute `lr` starts from `lr_ssm` (the `train.lr_ssm` key) when it is given, else
from the global rate. A module (or the whole model) that implements `param_groups(base_lr, base_wd)` supplies the
groups for its own parameters, which must then be covered exactly once.

Example:
    >>> import torch
    >>> lin = torch.nn.Linear(2, 2)
    >>> lin.bias._optim = {"weight_decay": 0.0, "lr_scale": 0.5}
    >>> [(g["lr"], g["weight_decay"], len(g["params"])) for g in param_groups(lin, lr=1e-3, weight_decay=0.1)]
    [(0.001, 0.1, 1), (0.0005, 0.0, 1)]
"""

from __future__ import annotations

import json
from typing import Any

from torch import nn

from ...errors import SsmbenchError

_RELATIVE_KEYS = ("lr_scale", "lr_max")


def _resolve_hint(hint: dict[str, Any], lr: float, weight_decay: float, lr_ssm: float | None) -> dict[str, Any]:
    group = {k: v for k, v in hint.items() if k not in _RELATIVE_KEYS}
    rate = float(group.pop("lr")) if "lr" in group else (lr_ssm if lr_ssm is not None else lr)
    rate *= float(hint.get("lr_scale", 1.0))
    if "lr_max" in hint:
        rate = min(rate, float(hint["lr_max"]))
    group.setdefault("weight_decay", weight_decay)
    group["lr"] = rate
    return group


def _custom_groups(model: nn.Module, lr: float, weight_decay: float) -> tuple[list[dict], set[int]]:
    """Groups from the outermost modules that implement `param_groups`, and the ids of the parameters they claim."""
    groups: list[dict] = []
    claimed: set[int] = set()
    skip_prefixes: list[str] = []
    for name, module in model.named_modules():
        if any(name.startswith(p) for p in skip_prefixes) or not callable(getattr(module, "param_groups", None)):
            continue
        skip_prefixes.append(name + "." if name else "")
        own = {id(p) for p in module.parameters()}
        seen: set[int] = set()
        for group in module.param_groups(lr, weight_decay):
            params = list(group["params"])
            for p in params:
                if id(p) in seen or id(p) not in own:
                    raise SsmbenchError(f"param_groups() of {type(module).__name__} lists a parameter twice or one "
                                        "that is not its own")
                seen.add(id(p))
            groups.append({"lr": lr, "weight_decay": weight_decay, **group, "params": params,
                           "group": f"{type(module).__name__}.param_groups"})
        if seen != own:
            raise SsmbenchError(f"param_groups() of {type(module).__name__} leaves {len(own - seen)} of its "
                                "parameters out; cover every parameter exactly once")
        claimed |= own
    return groups, claimed


def param_groups(model: nn.Module, lr: float, weight_decay: float, *, lr_ssm: float | None = None) -> list[dict]:
    """PyTorch parameter groups for `model` (trainable parameters only, each exactly once).

    Each group carries a `group` label ("default", the hint as JSON, or "<Module>.param_groups") that optimisers
    keep and the run's metrics.json records (see `describe`).
    """
    groups, claimed = _custom_groups(model, lr, weight_decay)
    default: list = []
    hinted: dict[str, list] = {}
    for p in model.parameters():  # deduplicates shared parameters
        if not p.requires_grad or id(p) in claimed:
            continue
        hint = getattr(p, "_optim", None)
        if hint is None:
            default.append(p)
        else:
            hinted.setdefault(json.dumps(hint, sort_keys=True), []).append(p)
    out = [{"params": default, "lr": lr, "weight_decay": weight_decay, "group": "default"}] if default else []
    for key, params in hinted.items():
        out.append({"params": params, **_resolve_hint(json.loads(key), lr, weight_decay, lr_ssm), "group": key})
    return out + groups


def describe(model: nn.Module, groups: list[dict]) -> list[dict[str, Any]]:
    """JSON-ready summary of `groups`: label, settings, parameter count and parameter names."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [{**{k: v for k, v in g.items() if k != "params"}, "n_params": sum(p.numel() for p in g["params"]),
             "names": [names.get(id(p), "?") for p in g["params"]]} for g in groups]
