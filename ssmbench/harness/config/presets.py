"""Training presets as data: `quick` (ssmbench's CPU-sized default) and `paper` (the DLR paper's Tables 2, 5, 6).

The presets live in `presets/quick.toml` and `presets/paper.toml` as `-o`-style keys, with the sections and rows of
`presets/quick_*.toml` and `presets/paper_*.toml` merged in (one file per paper or task family). `resolve_preset` turns a
preset name, a task (with the config the user's own task values resolve to) and a model into the keys to apply,
with the row's source. The task's training policy (`Task.policy`, `ssmbench.training_policy`) decides which part
applies; this module lists no task names:

* `quick`: the section named by the policy's `preset_family` (or the task's name) -- its keys, then the model's,
  then the task's, then the (model, task) pair's; a task without a section (a plug-in) gets the `generic` section;
* `paper`: the row `<paper>/<family>/<model>` with the family from the policy's `paper_family` (atomic tasks:
  `atomic` at L = 4096, `atomic512`; SHIFT at other lengths: `long_shift`, Table 2): the DLR paper's rows
  (`dlr_paper/...`), or another paper's for a family the DLR paper did not run (LRA Pathfinder,
  `lra_pathfinder<S>`: `lru_paper/...`, `las_paper/...`, `s4_repo/...`); a full row name is accepted.

Provenance. A base, a row or a row's task exception (`tasks.<task>`) may say where a key's value comes from:
`provenance."<key>" = {source = "...", other = [{value = ..., source = "..."}], note = "..."}` -- the source of the
value used, and the other readings with theirs (e.g. the paper's table where the authors' run script differs: the
script, the experiment that made the table, wins). `parse_paper` turns the file into typed `PaperPresets` and refuses (ConfigError) a provenance entry
for a key its base / row / exception does not set, or an entry without a source. A resolved `Preset.provenance`
holds the entries of the keys it applies, with `value` filled in; a layer that sets a key again without an entry
drops the older entry (its text no longer describes the value). `ssmbench ls presets --verbose` prints them.

Example:
    >>> from ssmbench.registry import get_task
    >>> shift = get_task("shift")
    >>> p = resolve_preset("paper", shift, "dlr", shift.presets["4096"])
    >>> p.name, p.keys["train.lr"], p.keys["task.L"], p.source.split(";")[0]
    ('dlr_paper/atomic/dlr', 5e-05, 4096, 'DLR paper Table 5')
    >>> p.provenance["train.lr"].source.split(":")[0], [o.value for o in p.provenance["train.lr"].others]
    ('ag1988/dlr@27e7287 run-1d.sh', [0.0001])
    >>> resolve_preset("paper", get_task("mips"), "dlr").keys["train.lr"]
    0.0001
    >>> resolve_preset("paper", shift, "dlr", shift.Config(L=2 ** 16), length=2 ** 16).name
    'dlr_paper/long_shift/dlr'
    >>> resolve_preset("quick", get_task("reverse"), "dlr").keys["model.n_layers"]
    2
"""

from __future__ import annotations

import difflib
import functools
import textwrap
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from ...errors import ConfigError


@dataclass(frozen=True)
class Reading:
    """Another value a source gives for a preset key (the paper's table, a README, another script), and that source."""

    value: Any
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source}


@dataclass(frozen=True)
class Provenance:
    """Where a preset key's value comes from: `source`; `others`: what other sources say; `note`: anything else
    (e.g. why one reading wins). `value` is the value the resolved preset uses (None before resolution)."""

    source: str
    others: tuple[Reading, ...] = ()
    note: str = ""
    value: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "source": self.source,
                               "other": [o.to_json() for o in self.others]}
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Layer:
    """What one base, row or task exception sets: its bases (applied first, in order), its own keys, and the
    provenance of keys it sets (directly or through its bases)."""

    bases: tuple[str, ...] = ()
    keys: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Provenance] = field(default_factory=dict)


@dataclass(frozen=True)
class PaperRow:
    name: str
    source: str
    layer: Layer
    notes: str = ""
    tasks: Mapping[str, Layer] = field(default_factory=dict)
    """Per-task exceptions (`tasks.<task>`), applied after the row's own keys."""


@dataclass(frozen=True)
class PaperPresets:
    """`presets/paper.toml`, parsed and validated."""

    bases: Mapping[str, Layer]
    rows: Mapping[str, PaperRow]

    def resolve(self, name: str, task: str | None = None) -> tuple[dict[str, Any], dict[str, Provenance]]:
        """The keys of row `name` for `task` (its exception applied if it has one) and their provenance, values
        filled in."""
        row = self.rows[name]
        keys: dict[str, Any] = {}
        prov: dict[str, Provenance] = {}
        for layer in (row.layer, row.tasks.get(task or "")):
            if layer is not None:
                self._apply(layer, keys, prov)
        return keys, {k: replace(p, value=keys[k]) for k, p in prov.items()}

    def layer_keys(self, layer: Layer) -> dict[str, Any]:
        """The keys one layer sets (its bases', then its own), without any other layer."""
        keys: dict[str, Any] = {}
        self._apply(layer, keys, {})
        return keys

    def _apply(self, layer: Layer, keys: dict[str, Any], prov: dict[str, Provenance]) -> None:
        for base in layer.bases:
            self._apply(self.bases[base], keys, prov)
        for key, value in layer.keys.items():
            keys[key] = value
            prov.pop(key, None)  # set again: an older entry no longer describes the value
        prov.update(layer.provenance)


@dataclass(frozen=True)
class Preset:
    name: str
    source: str
    keys: dict[str, Any]
    notes: str = ""
    family: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    dataset: dict[str, Any] = field(default_factory=dict)
    """Folder-backed tasks: the dataset the preset is sized for (`preset`, `n`), used to find or name its folder."""
    provenance: dict[str, Provenance] = field(default_factory=dict)
    """Paper rows: where each key that has a recorded source comes from (values filled in); see the module doc."""


@functools.cache
def _load(name: str) -> dict[str, Any]:
    """`presets/<name>.toml` with every `presets/<name>_*.toml` merged in (sorted by file name): a paper's rows or a
    task family's quick sections live in a file of their own. A table two files both define is a ConfigError."""
    folder = resources.files("ssmbench.harness.config").joinpath("presets")
    data = tomllib.loads(folder.joinpath(f"{name}.toml").read_text())
    extra = sorted(f.name for f in folder.iterdir() if f.name.startswith(f"{name}_") and f.name.endswith(".toml"))
    for file in extra:
        for key, table in tomllib.loads(folder.joinpath(file).read_text()).items():
            into = data.setdefault(key, {}) if key in ("bases", "rows") else data
            entries = table if key in ("bases", "rows") else {key: table}
            clash = sorted(set(entries) & set(into))
            if clash:
                raise ConfigError(f"presets/{file}", f"defines {', '.join(clash)} again",
                                  "give each base, row or quick section one file")
            into.update(entries)
    return data


# ----------------------------------------------------------------------------------------------- parse & validate
_ROW_FIELDS = {"bases", "source", "notes", "keys", "tasks", "provenance"}
_PROVENANCE_FIELDS = {"source", "other", "note"}


def _bad(where: str, problem: str) -> ConfigError:
    return ConfigError(f"paper.toml {where}", problem, "fix ssmbench/harness/config/presets/paper.toml")


def _is_key(name: str) -> bool:
    return "." in name  # `-o` keys are `section.name` (task.L, model.d_state, train.lr, ...)


def _parse_provenance(where: str, table: Any) -> dict[str, Provenance]:
    if not isinstance(table, Mapping):
        raise _bad(where, "must be a table of `\"<key>\" = {source = ..., other = [...]}` entries")
    out: dict[str, Provenance] = {}
    for key, entry in table.items():
        here = f'{where}."{key}"'
        if not isinstance(entry, Mapping):
            raise _bad(here, "must be a table with `source` (and optionally `other`, `note`)")
        unknown = sorted(set(entry) - _PROVENANCE_FIELDS)
        if unknown:
            raise _bad(here, f"unknown field(s) {', '.join(unknown)}; allowed: source, other, note")
        source = entry.get("source")
        if not isinstance(source, str) or not source.strip():
            raise _bad(here, "needs a non-empty `source`: where the value used comes from")
        others = entry.get("other", [])
        if not isinstance(others, list):
            raise _bad(f"{here}.other", "must be a list of {value = ..., source = \"...\"} tables")
        readings = []
        for i, other in enumerate(others):
            if (not isinstance(other, Mapping) or set(other) != {"value", "source"}
                    or not isinstance(other["source"], str) or not other["source"].strip()):
                raise _bad(f"{here}.other[{i}]", "must be exactly {value = ..., source = \"...\"}")
            readings.append(Reading(other["value"], other["source"]))
        note = entry.get("note", "")
        if not isinstance(note, str):
            raise _bad(f"{here}.note", "must be a string")
        out[key] = Provenance(source, tuple(readings), note)
    return out


def _parse_layer(where: str, table: Any, bases: Mapping[str, Layer] | None, own_keys: Any = None) -> Layer:
    """A base (`bases` None: no bases of its own), a row (`own_keys`: its `keys` table) or a task exception."""
    if not isinstance(table, Mapping):
        raise _bad(where, "must be a table")
    names: tuple[str, ...] = ()
    if bases is not None:
        names = tuple(table.get("bases", []))
        missing = [b for b in names if b not in bases]
        if missing:
            raise _bad(f"{where}.bases", f"unknown base(s) {', '.join(missing)}; known: {', '.join(bases)}")
    if own_keys is None:  # a base or a task exception: its keys sit in the table itself (or in `keys`)
        allowed = {"provenance"} | ({"bases", "keys"} if bases is not None else set())
        odd = sorted(k for k in table if k not in allowed and not _is_key(k))
        if odd:
            raise _bad(where, f"unknown field(s) {', '.join(odd)}: keys are `section.name` (e.g. \"train.lr\")")
        keys = {k: v for k, v in table.items() if _is_key(k)}
        keys.update(table.get("keys", {}))
    else:
        keys = dict(own_keys)
    provenance = _parse_provenance(f"{where}.provenance", table.get("provenance", {}))
    layer = Layer(names, keys, provenance)
    if provenance:
        have = PaperPresets(bases or {}, {}).layer_keys(layer)
        stray = [k for k in provenance if k not in have]
        if stray:
            raise _bad(f"{where}.provenance", f"entry for {', '.join(repr(k) for k in stray)}, which "
                       f"{where} does not set (provenance belongs to the base, row or task exception that sets "
                       "the key)")
    return layer


def parse_paper(data: Mapping[str, Any]) -> PaperPresets:
    """The parsed TOML of `presets/paper.toml` as typed, validated `PaperPresets`; ConfigError naming the place."""
    odd = sorted(set(data) - {"bases", "rows"})
    if odd:
        raise _bad("top level", f"unknown table(s) {', '.join(odd)}; expected [bases.*] and [rows.*]")
    bases = {name: _parse_layer(f"bases.{name}", table, None) for name, table in data.get("bases", {}).items()}
    rows: dict[str, PaperRow] = {}
    for name, table in data.get("rows", {}).items():
        where = f'rows."{name}"'
        if not isinstance(table, Mapping):
            raise _bad(where, "must be a table")
        odd = sorted(set(table) - _ROW_FIELDS)
        if odd:
            raise _bad(where, f"unknown field(s) {', '.join(odd)}; allowed: {', '.join(sorted(_ROW_FIELDS))}")
        if not isinstance(table.get("source"), str) or not table["source"].strip():
            raise _bad(where, "needs a non-empty `source`")
        layer = _parse_layer(where, table, bases, own_keys=table.get("keys", {}))
        tasks = {task: _parse_layer(f"{where}.tasks.{task}", sub, bases)
                 for task, sub in table.get("tasks", {}).items()}
        rows[name] = PaperRow(name, table["source"], layer, table.get("notes", ""), tasks)
    return PaperPresets(bases, rows)


@functools.cache
def paper_presets() -> PaperPresets:
    """`presets/paper.toml`, parsed and validated once."""
    return parse_paper(_load("paper"))


def paper_rows() -> dict[str, PaperRow]:
    return dict(paper_presets().rows)


# ----------------------------------------------------------------------------------------------------- resolution
def resolve_preset(preset: str, task: Any, model: str, config: Any = None, length: int | None = None,
                   size: int | None = None) -> Preset:
    """The keys of a training preset for (task, model); ConfigError (exit 2) when no row exists.

    `task` is a Task instance; `config` the task config the user's own values resolve to (its selector picks the
    paper family; default: the task's default preset). `length` / `size` asked explicitly replace the row's
    `task.L` / `task.size`.
    """
    if preset == "quick":
        return _quick(task, model)
    paper = paper_presets()
    rows = paper.rows
    if preset == "paper":
        config = config if config is not None else task.presets[task.default_preset]
        family = task.policy.paper_rows(task.name, config)
        name = next((r for r in rows if r.split("/", 1)[1] == f"{family}/{model}"),
                    f"dlr_paper/{family}/{model}")
        if name not in rows:
            have = sorted(r for r in rows if r.split("/")[1] == family)
            if not have:  # e.g. Pathfinder at a size the paper did not run: name the families it did run
                stem = family.rstrip("0123456789")
                have = sorted({r.rsplit("/", 1)[0] for r in rows if r.split("/")[1].rstrip("0123456789") == stem})
            raise ConfigError("--preset", f"no paper preset for model {model!r} on {task.name} ({family}); "
                              f"available: {', '.join(have) or 'none for this task'}",
                              "run `ssmbench ls presets`, or use --preset quick")
    elif preset in rows:
        name = preset
    else:
        close = difflib.get_close_matches(preset, ["quick", "paper", *rows], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError("--preset", f"unknown preset {preset!r}{hint}", "run `ssmbench ls presets`")
    row = rows[name]
    keys, provenance = paper.resolve(name, task.name)
    if length is not None and ("task.L" in keys or name.split("/")[1] == "long_shift"):
        if keys.get("task.L") != length:
            provenance.pop("task.L", None)  # the user's length, not the row's
        keys["task.L"] = length
    if size is not None and "task.size" in keys:
        if keys["task.size"] != size:
            provenance.pop("task.size", None)
        keys["task.size"] = size
    return Preset(name, row.source, keys, row.notes, name.split("/")[1], provenance=provenance)


def _quick(task: Any, model: str) -> Preset:
    data = _load("quick")
    family = task.policy.quick_section(task.name)
    if family not in data:
        family = "generic"
    section = data[family]
    keys = dict(section["keys"])
    keys.update(section.get("models", {}).get(model, {}))
    keys.update(section.get("tasks", {}).get(task.name, {}))
    keys.update(section.get("pairs", {}).get(f"{model}/{task.name}", {}))
    return Preset("quick", data["preset"]["source"], keys, section.get("notes", ""), family,
                  dataset=dict(section.get("dataset", {})))


# ------------------------------------------------------------------------------------------------------- listings
def list_presets(verbose: bool = False) -> list[dict[str, Any]]:
    """Every preset with its source, for `ssmbench ls presets`. `verbose`: paper rows also carry `keys` (the row's
    own resolution, no task exception), `provenance` (key -> value, source, other readings) and `tasks` (task ->
    the exception's keys and provenance)."""
    quick = _load("quick")
    out: list[dict[str, Any]] = [
        {"name": "quick" if family == "atomic" else f"quick ({family})", "source": quick["preset"]["source"],
         "notes": section.get("notes", "default; atomic tasks")}
        for family, section in quick.items() if family != "preset"]
    paper = paper_presets()
    for name, row in paper.rows.items():
        item: dict[str, Any] = {"name": name, "source": row.source, "notes": row.notes}
        if verbose:
            keys, prov = paper.resolve(name)
            item["keys"] = keys
            item["provenance"] = {k: p.to_json() for k, p in prov.items()}
            item["tasks"] = {}
            for task, layer in row.tasks.items():
                own = paper.layer_keys(layer)
                t_keys, t_prov = paper.resolve(name, task)
                item["tasks"][task] = {"keys": {k: t_keys[k] for k in own},
                                       "provenance": {k: t_prov[k].to_json() for k in own if k in t_prov}}
        out.append(item)
    return out


def _fmt(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _key_lines(keys: Mapping[str, Any], provenance: Mapping[str, Any], indent: str, width: int) -> list[str]:
    lines: list[str] = []
    wrap = functools.partial(textwrap.wrap, width=width, break_long_words=False, break_on_hyphens=False)
    # keys whose sources disagree first, then the others, each group in the order the preset applies them
    for key, p in sorted(provenance.items(), key=lambda kv: not kv[1]["other"]):
        lines.append(f"{indent}{key} = {_fmt(p['value'])}" + ("  (sources differ)" if p["other"] else ""))
        lines += wrap(f"source: {p['source']}", initial_indent=indent + "    ", subsequent_indent=indent + "      ")
        for o in p["other"]:
            lines += wrap(f"other: {_fmt(o['value'])} -- {o['source']}", initial_indent=indent + "    ",
                          subsequent_indent=indent + "      ")
        if p.get("note"):
            lines += wrap(f"note: {p['note']}", initial_indent=indent + "    ", subsequent_indent=indent + "      ")
    rest = [f"{k}={_fmt(v)}" for k, v in keys.items() if k not in provenance]
    if rest:
        lines += wrap("other keys (the row's source): " + ", ".join(rest), initial_indent=indent,
                      subsequent_indent=indent + "    ")
    return lines


def list_presets_verbose_text(width: int = 118) -> str:
    """`ssmbench ls presets --verbose`: every preset; for each paper row, each key with a recorded source (value,
    source, other readings with theirs), the row's other keys, and its per-task exceptions likewise."""
    lines: list[str] = []
    for item in list_presets(verbose=True):
        lines.append(f"{item['name']}  {item['source']}")
        if item.get("notes"):
            lines += textwrap.wrap(f"notes: {item['notes']}", width=width, initial_indent="  ",
                                   subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
        if "keys" not in item:
            continue
        lines += _key_lines(item["keys"], item["provenance"], "  ", width)
        for task, exc in item["tasks"].items():
            lines.append(f"  tasks.{task}:")
            lines += _key_lines(exc["keys"], exc["provenance"], "    ", width)
        lines.append("")
    return "\n".join(lines).rstrip("\n")
