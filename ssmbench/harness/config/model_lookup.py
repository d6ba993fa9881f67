"""What `--model` names: a registered model, a `module:Object` plug-in or an object, and whether it is a mixer
(an nn.Module subclass the harness wraps in its backbone) or a factory (a callable that builds the whole model).

Example:
    >>> obj, name = resolve("dlr")
    >>> name, is_mixer(obj)
    ('dlr', True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import ConfigError
from ...registry import models


def resolve(model: str | Callable[..., Any]) -> tuple[Any, str]:
    """(mixer class or factory, display name) for a registered name, a `module:Class` string or an object."""
    if isinstance(model, str):
        obj = models.get(model)
        if not callable(obj):
            raise ConfigError("--model", f"{model!r} is a {type(obj).__name__}, neither an nn.Module subclass (a "
                              "mixer) nor a callable (a factory)", "see docs/models.md, Plugging in your own model")
        return obj, model
    return model, getattr(model, "__qualname__", getattr(model, "__name__", repr(model)))


def is_mixer(obj: Any) -> bool:
    """True for an nn.Module subclass (a mixer the harness wraps in its backbone), False for a factory."""
    from torch import nn  # torch only when asked: the resolver runs before the heavy imports

    return isinstance(obj, type) and issubclass(obj, nn.Module)
