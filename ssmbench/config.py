"""Config plumbing: canonical JSON, digests, presets and `key=value` overrides on frozen dataclasses.

One path, no global state: defaults -> preset -> optional file -> overrides -> validation (`__post_init__`).
Overrides never mutate a config; each step builds a new frozen instance with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ConfigError
from .plain import did_you_mean

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

D = TypeVar("D", bound="DataclassInstance")


def canonical_json(obj: object) -> bytes:
    """Sorted keys, no whitespace, primitives only: the bytes every digest is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def config_sha256(config: Mapping[str, object]) -> str:
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
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def parse_value(raw: object, typ: object = None, name: str = "value") -> Any:
    """The one value parser: a command-line string as the type `typ` names (an annotation: int, float, bool, str,
    `X | None`, list / tuple / dict as JSON); `typ=None` reads the string as the literal it spells (8, 1e-3, true,
    [1, 2]) and keeps any other text. Non-strings pass through. A string that is not a `typ` is a ConfigError
    naming the key, the value and the expected type.

    >>> parse_value("8", int, "d_model"), parse_value("1e-3", float), parse_value("off", bool)
    (8, 0.001, False)
    >>> parse_value("none", int | None), parse_value("[3, 4]", tuple[int, ...]), parse_value("lin", None)
    (None, [3, 4], 'lin')
    >>> parse_value("abc", int, "model.d_model")
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: model.d_model: cannot parse 'abc' as int
    """
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    args = [a for a in typing.get_args(typ) if a is not type(None)] if _is_optional(typ) else None
    if args is not None:
        if text.lower() in ("none", "null"):
            return None
        typ = args[0] if len(args) == 1 else None
    origin = typing.get_origin(typ) or typ
    try:
        if typ is None or typ is Any:
            return _literal(text, raw, name)
        if origin is bool:
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if origin is int:
            if text.lower().startswith(("0x", "0o", "0b")):
                return int(text, 0)
            number = float(text)
            if number != int(number):
                raise ValueError(text)
            return int(number) if "." in text or "e" in text.lower() else int(text)
        if origin is float:
            return _finite(float(text), raw, name)
        if origin is str:
            return text
        if origin is typing.Literal:
            choices = typing.get_args(typ)
            if text not in choices:
                raise ConfigError(name, f"must be one of {', '.join(map(str, choices))}, got {raw!r}")
            return text
        value = json.loads(text)
        if origin in (list, tuple) and not isinstance(value, list):
            raise ValueError(text)
        return value
    except ConfigError:
        raise
    except (ValueError, OverflowError):
        kind = getattr(origin, "__name__", str(typ))
        raise ConfigError(name, f"cannot parse {raw!r} as {kind}") from None


def _is_optional(typ: object) -> bool:
    return type(None) in typing.get_args(typ)


def _literal(text: str, raw: str, name: str) -> Any:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.lower().lstrip("+-") in ("nan", "inf", "infinity"):  # float() reads these: never kept as text
        raise ConfigError(name, f"must be a finite number, got {raw!r}")
    try:
        value = json.loads(text)  # also NaN, Infinity, 1e400 (inf): refused below
    except ValueError:
        return raw
    return _finite(value, raw, name) if isinstance(value, float) else value


def _finite(value: float, raw: object, name: str) -> float:
    """`value`, or a ConfigError when it is nan or infinite (a value no run can use, and that no config.json can
    hold: the canonical JSON refuses it)."""
    if not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number, got {raw!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Bound:
    """The declared range of a numeric key: `low <= value <= high` (`low < value` when `low_open`); either end
    may be None (unbounded). `check` refuses a value outside it, and any nan or infinity, in one line naming the
    key, the value and the range.

    >>> Bound(1, 10 ** 9).check("train.steps", 5)
    5
    >>> Bound(0, 10, low_open=True).check("train.lr", float("nan"))
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: train.lr: must be a finite number, got nan
    >>> Bound(1, 10 ** 9).check("train.steps", 10 ** 20)
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: train.steps: must be <= 1,000,000,000, got 100,000,000,000,000,000,000
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""
    """What the upper end protects (added to the message when it is exceeded)."""

    def check(self, name: str, value: Any) -> Any:
        """`value` (None passes: an unset optional key), or a ConfigError naming `name`."""
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return value
        if isinstance(value, float):
            _finite(value, value, name)
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            raise ConfigError(name, f"must be {'>' if self.low_open else '>='} {_num(self.low)}, got {_num(value)}")
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            raise ConfigError(name, f"must be {'<' if self.high_open else '<='} {_num(self.high)}, got {_num(value)}" +
                              (f" ({self.why})" if self.why else ""))
        return value


def _num(x: float) -> str:
    """An integer with thousands separators, a float as Python writes it."""
    return f"{x:,}" if isinstance(x, int) else str(x)


def apply_overrides(config: D, overrides: Mapping[str, object]) -> D:
    """A new config with `overrides` (field name -> value or string) applied; unknown keys get a did-you-mean."""
    names = [f.name for f in dataclasses.fields(config)]
    changes = {}
    for key, raw in overrides.items():
        if key not in names:
            hint = did_you_mean(key, names) or f"; known keys: {', '.join(names)}"
            raise ConfigError(key, f"unknown config key for {type(config).__name__}{hint}")
        changes[key] = parse_value(raw, typing.get_type_hints(type(config)).get(key, str), key)
    try:
        return dataclasses.replace(config, **changes)
    except TypeError as exc:
        raise ConfigError("config", str(exc)) from None


def parse_overrides(pairs: Iterable[str], option: str = "-o", removable: bool = False) -> dict[str, str | None]:
    """The one `key=value` parser (-o, extra --key options, --split): values stay strings, dashes in keys become
    underscores; a pair without '=' or without a key is a ConfigError naming `option`. With `removable` (eval's -o),
    `~model.KEY` removes a model key a preset set (value None: the model's own default applies).

    >>> parse_overrides(["L=64", "min-length = 5", "note=a=b"])
    {'L': '64', 'min_length': ' 5', 'note': 'a=b'}
    >>> parse_overrides(["model.d_model=64", "~model.dt-min"], removable=True)
    {'model.d_model': '64', 'model.dt_min': None}
    >>> parse_overrides(["train=0.8", "val"], option="--split")
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: --split: expected key=value, got 'val'
    """
    out: dict[str, str | None] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if removable and key.startswith("~"):
            key = key[1:].strip()
            if sep or not key.startswith("model.") or key == "model.":
                raise ConfigError(option, f"{pair!r}: ~ removes a model key a preset set, as ~model.KEY (no value); "
                                          "give other keys a value instead")
            out[key] = None
            continue
        if not sep or not key:
            raise ConfigError(option, f"expected key=value, got {pair!r}" + (
                " (~model.KEY removes a preset's model key)" if removable else ""))
        out[key] = value
    return out


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A flat mapping of config keys from a TOML or JSON file."""
    return read_config_file(path)[1]


def read_config_file(path: str | Path) -> tuple[str, dict[str, Any]]:
    """(the file's text, its flat mapping of config keys) from a TOML or JSON file, read once."""
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
    return text.decode(errors="replace"), data
