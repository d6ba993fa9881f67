"""Lazy registries of tasks, models and evaluators.

Built-ins come from one table per plug-in package (`BUILTIN` in its `__init__.py`: name -> ("module:attr",
"one-line summary")); third-party plug-ins from the entry-point groups `ssmbench.tasks`, `ssmbench.models` and
`ssmbench.evaluators`. Reading the tables imports neither numba nor torch, so `ssmbench ls` is instant; `get`
imports a target on first use. A third-party name that clashes with a built-in is an error, never an override.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from .errors import ConfigError, SsmbenchError, UnknownNameError
from .plain import did_you_mean

T = TypeVar("T")


def import_string(target: str) -> object:
    """Import "package.module:attr" and return the attribute. The module is looked up as `python -m` would: on the
    Python path, then in the working folder (so `--model mypkg.mixers:MyMixer` works from the folder holding
    `mypkg/`); a misspelt module or attribute is a ConfigError (exit 2) with a did-you-mean."""
    import os
    import sys

    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise SsmbenchError(f"not an import string: {target!r} (expected 'module:attr')")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        missing = exc.name or module_name
        if not module_name.startswith(missing.split(".")[0]) or here in sys.path:
            raise _not_importable(target, module_name, exc) from None
        sys.path.insert(0, here)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as again:
            sys.path.remove(here)
            raise _not_importable(target, module_name, again) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        public = [n for n in dir(module) if not n.startswith("_")]
        raise ConfigError(target, f"module {module_name!r} has no attribute {attr!r}{did_you_mean(attr, public)}") \
            from None


def _not_importable(target: str, module_name: str, exc: ModuleNotFoundError) -> ConfigError:
    """One line for a module that cannot be found, with the closest module name that exists."""
    import pkgutil

    parent, _, leaf = module_name.rpartition(".")
    try:
        where = importlib.import_module(parent).__path__ if parent else None
        names = [m.name for m in pkgutil.iter_modules(where)]
    except (ImportError, AttributeError):
        names, leaf = [], module_name
    close = did_you_mean(leaf, names, "'" + (parent + "." if parent else "") + "{}'")
    return ConfigError(target, f"cannot import {module_name!r} ({exc}){close}",
                       "modules are looked up on the Python path and in the working folder")


class Registry(Generic[T]):
    """Names -> lazily imported plug-ins of one kind ("task", "model", "evaluator")."""

    def __init__(self, kind: str, builtin_table: str, group: str, alias: dict[str, str] | None = None,
                 check: Callable[[str, T], None] | None = None, prepare: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self._prepare = prepare  # run once, before the first plug-in of this kind is imported
        self._check = check  # (name, loaded object) -> None, raises on a malformed plug-in
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
        if self._prepare is not None:
            self._prepare()
            self._prepare = None
        if ":" in name and name not in self._load_table():
            obj = import_string(name)
            if self._check is not None:
                self._check(name, obj)  # type: ignore[arg-type]
            return obj  # type: ignore[return-value]
        key = self.canonical(name)
        if key not in self._cache:
            obj = import_string(self._load_table()[key][0])
            if self._check is not None:
                self._check(key, obj)  # type: ignore[arg-type]
            self._cache[key] = obj  # type: ignore[assignment]
        return self._cache[key]


def check_task_class(name: str, cls: object) -> None:
    """Refuse a task plug-in that is not a `Task` subclass, defines a public name `Task` does not declare, or whose
    `policy` is not a `TrainingPolicy`.

    Every hook the core reads is declared on `ssmbench.api.Task` with a default, so a misspelt hook
    (`statistcs`) would otherwise be ignored without a word; helpers belong in functions or `_private` names.
    """
    import dataclasses
    import difflib

    from .api import Task, TrainingPolicy, declared_hooks, undeclared_names

    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise SsmbenchError(f"task {name!r} is {cls!r}, not a subclass of ssmbench.api.Task")
    if not isinstance(cls.policy, TrainingPolicy):
        raise SsmbenchError(f"task {name!r} ({cls.__module__}.{cls.__qualname__}) has policy {cls.policy!r}, not a "
                            f"ssmbench.api.TrainingPolicy", "declare `policy = TrainingPolicy(...)`, or leave it out "
                            "for the default")
    extra = undeclared_names(cls)
    if extra and extra[0] in {f.name for f in dataclasses.fields(TrainingPolicy)}:  # a hook of the old Task
        raise SsmbenchError(f"task {name!r} ({cls.__module__}.{cls.__qualname__}) defines {extra[0]!r}, which is a "
                            f"training rule, not a hook of ssmbench.api.Task",
                            f"declare it in the task's policy: `policy = TrainingPolicy({extra[0]}=...)`")
    if extra:
        close = difflib.get_close_matches(extra[0], sorted(declared_hooks()), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SsmbenchError(f"task {name!r} ({cls.__module__}.{cls.__qualname__}) defines {extra[0]!r}, which is "
                            f"not a hook of ssmbench.api.Task", f"{hint}rename it to a declared hook, or make it "
                            f"private with a leading underscore")


def disable_svml() -> None:
    """Make Numba compile without Intel SVML in this process (if not imported yet) and in every child, so the same
    config gives the same bytes on every CPU: run before the first task module loads Numba (`tasks.get`), and in
    build workers."""
    import os
    import sys

    os.environ["NUMBA_DISABLE_INTEL_SVML"] = "1"
    config = sys.modules.get("numba.core.config")
    if getattr(config, "DISABLE_INTEL_SVML", None) is not None:
        config.DISABLE_INTEL_SVML = 1  # type: ignore[union-attr]


tasks: Registry = Registry("task", "ssmbench.generators:BUILTIN", "ssmbench.tasks",
                           alias={"masked_select": "select", "masked_select_fixed": "select_fixed"},
                           check=check_task_class, prepare=disable_svml)
models: Registry = Registry("model", "ssmbench.reference_models:BUILTIN", "ssmbench.models")
evaluators: Registry = Registry("evaluator", "ssmbench.evaluators:BUILTIN", "ssmbench.evaluators")


def get_task(name: str):  # -> Task instance
    """Instantiate the task class registered under `name`."""
    return tasks.get(name)()
