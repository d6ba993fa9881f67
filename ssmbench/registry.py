"""Lazy registries of tasks, models and evaluators.

Built-ins come from one table per plug-in package (`BUILTIN` in its `__init__.py`: name -> ("module:attr",
"one-line summary")); third-party plug-ins from the entry-point groups `ssmbench.tasks`, `ssmbench.models` and
`ssmbench.evaluators`. Reading the tables imports neither numba nor torch, so `ssmbench ls` is instant; `get`
imports a target on first use. A third-party name that clashes with a built-in is an error, never an override.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from .errors import SsmbenchError, UnknownNameError

T = TypeVar("T")


def import_string(target: str) -> object:
    """Import "package.module:attr" and return the attribute."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise SsmbenchError(f"not an import string: {target!r} (expected 'module:attr')")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise SsmbenchError(f"module {module_name!r} has no attribute {attr!r}") from None


class Registry(Generic[T]):
    """Names -> lazily imported plug-ins of one kind ("task", "model", "evaluator")."""

    def __init__(self, kind: str, builtin_table: str, group: str, alias: dict[str, str] | None = None) -> None:
        self.kind = kind
        self._builtin_table = builtin_table  # "ssmbench.generators:BUILTIN"
        self._group = group
        self._alias = dict(alias or {})
        self._entries: dict[str, tuple[str, str]] | None = None
        self._cache: dict[str, T] = {}

    def _load_table(self) -> dict[str, tuple[str, str]]:
        if self._entries is None:
            table = dict(import_string(self._builtin_table))  # type: ignore[call-overload]
            for ep in entry_points(group=self._group):
                if ep.name in table:
                    raise SsmbenchError(
                        f"{self.kind} {ep.name!r} from entry point {ep.value!r} clashes with the built-in "
                        f"{table[ep.name][0]!r}; rename the plug-in")
                table[ep.name] = (ep.value, f"(plug-in from {ep.value})")
            self._entries = table
        return self._entries

    def names(self) -> list[str]:
        return list(self._load_table())

    def summaries(self) -> dict[str, str]:
        return {name: summary for name, (_, summary) in self._load_table().items()}

    def canonical(self, name: str) -> str:
        """The registry key for `name` (resolving aliases); raises UnknownNameError with close matches."""
        name = self._alias.get(name, name)
        if name not in self._load_table():
            raise UnknownNameError(self.kind, name, self.names() + list(self._alias))
        return name

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._alias.get(name, name) in self._load_table()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def origin(self, name: str) -> str:
        return self._load_table()[self.canonical(name)][0]

    def get(self, name: str) -> T:
        """The plug-in object for a registered name or a literal "module:attr" string."""
        if ":" in name and name not in self._load_table():
            return import_string(name)  # type: ignore[return-value]
        key = self.canonical(name)
        if key not in self._cache:
            self._cache[key] = import_string(self._load_table()[key][0])  # type: ignore[assignment]
        return self._cache[key]


tasks: Registry = Registry("task", "ssmbench.generators:BUILTIN", "ssmbench.tasks",
                           alias={"masked_select": "select", "masked_select_fixed": "select_fixed"})
models: Registry = Registry("model", "ssmbench.reference_models:BUILTIN", "ssmbench.models")
evaluators: Registry = Registry("evaluator", "ssmbench.evaluators:BUILTIN", "ssmbench.evaluators")


def get_task(name: str):  # -> Task instance
    """Instantiate the task class registered under `name`."""
    return tasks.get(name)()
