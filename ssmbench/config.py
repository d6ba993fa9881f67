"""Config plumbing: canonical JSON, digests, presets and `key=value` overrides on frozen dataclasses.

One path, no global state: defaults -> preset -> optional file -> overrides -> validation (`__post_init__`).
Overrides never mutate a config; each step builds a new frozen instance with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import tomllib
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import ConfigError


def canonical_json(obj: Any) -> bytes:
    """Sorted keys, no whitespace, primitives only: the bytes every digest is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def config_sha256(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(dict(config))).hexdigest()


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings of a dataclass (the string literal after each field), read from its source."""
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, nxt in zip(body, body[1:], strict=False):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _parse_value(cls: type, name: str, raw: Any) -> Any:
    hints = typing.get_type_hints(cls)
    typ = hints.get(name, str)
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    try:
        if typ is bool:
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if typ is int:
            return int(text, 0)
        if typ is float:
            return float(text)
        if typ is str:
            return text
        return json.loads(text)
    except ValueError:
        raise ConfigError(name, f"cannot parse {raw!r} as {getattr(typ, '__name__', typ)}") from None


def apply_overrides(config: Any, overrides: Mapping[str, Any]) -> Any:
    """A new config with `overrides` (field name -> value or string) applied; unknown keys get a did-you-mean."""
    names = [f.name for f in dataclasses.fields(config)]
    changes = {}
    for key, raw in overrides.items():
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(names)}"
            raise ConfigError(key, f"unknown config key for {type(config).__name__}{hint}")
        changes[key] = _parse_value(type(config), key, raw)
    try:
        return dataclasses.replace(config, **changes)
    except TypeError as exc:
        raise ConfigError("config", str(exc)) from None


def parse_overrides(pairs: Iterable[str], option: str = "-o") -> dict[str, str]:
    """The one `key=value` parser (-o, extra --key options, --split): values stay strings, dashes in keys become
    underscores; a pair without '=' or without a key is a ConfigError naming `option`.

    >>> parse_overrides(["L=64", "min-length = 5", "note=a=b"])
    {'L': '64', 'min_length': ' 5', 'note': 'a=b'}
    >>> parse_overrides(["train=0.8", "val"], option="--split")
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: --split: expected key=value, got 'val'
    """
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(option, f"expected key=value, got {pair!r}")
        out[key] = value
    return out


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A flat mapping of config keys from a TOML or JSON file."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError("--config", f"cannot read {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text.decode()) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("--config", f"{path} is not valid {path.suffix.lstrip('.') or 'JSON'}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("--config", f"{path} must hold a mapping of config keys")
    return data


def config_from_dict(cls: type, data: Mapping[str, Any]) -> Any:
    """Rebuild a config instance from its stored JSON form (e.g. a manifest's `config`)."""
    return apply_overrides(cls(), dict(data))
