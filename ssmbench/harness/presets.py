"""Training presets as data: `quick` (ssmbench's CPU-sized default) and `paper` (the DLR paper's Tables 2, 5, 6).

The presets live in `presets/quick.toml` and `presets/paper.toml` as `-o`-style keys. `resolve_preset` turns a
preset name, a task (with the config the user's own task values resolve to) and a model into the keys to apply,
with the row's source. The task decides which part applies (`Task.preset_family`, `Task.paper_family`); this
module lists no task names:

* `quick`: the section named by the task's `preset_family` (or its name) -- its keys, then the model's, then the
  task's, then the (model, task) pair's; a task without a section (a plug-in) gets the `generic` section;
* `paper`: the row `<paper>/<family>/<model>` with the family from `Task.paper_family(config)` (atomic tasks:
  `atomic` at L = 4096, `atomic512`; SHIFT at other lengths: `long_shift`, Table 2): the DLR paper's rows
  (`dlr_paper/...`), or another paper's for a family the DLR paper did not run (LRA Pathfinder,
  `lra_pathfinder<S>`: `lru_paper/...`, `las_paper/...`, `s4_repo/...`); a full row name is accepted.

Example:
    >>> from ssmbench.registry import get_task
    >>> shift = get_task("shift")
    >>> p = resolve_preset("paper", shift, "dlr", shift.presets["4096"])
    >>> p.name, p.keys["train.lr"], p.keys["task.L"], p.source
    ('dlr_paper/atomic/dlr', 0.0001, 4096, 'DLR paper Table 5')
    >>> resolve_preset("paper", shift, "dlr", shift.Config(L=2 ** 16), length=2 ** 16).name
    'dlr_paper/long_shift/dlr'
    >>> resolve_preset("quick", get_task("reverse"), "dlr").keys["model.n_layers"]
    2
"""

from __future__ import annotations

import difflib
import functools
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ..errors import ConfigError


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


@functools.cache
def _load(name: str) -> dict[str, Any]:
    text = resources.files("ssmbench.harness").joinpath("presets", f"{name}.toml").read_text()
    return tomllib.loads(text)


def _row_keys(table: dict[str, Any], bases: dict[str, Any]) -> dict[str, Any]:
    keys: dict[str, Any] = {}
    for base in table.get("bases", []):
        keys.update(bases[base])
    keys.update({k: v for k, v in table.get("keys", table).items()
                 if k not in ("bases", "source", "notes", "tasks", "keys")})
    return keys


def paper_rows() -> dict[str, dict[str, Any]]:
    return _load("paper")["rows"]


def resolve_preset(preset: str, task: Any, model: str, config: Any = None, length: int | None = None,
                   size: int | None = None) -> Preset:
    """The keys of a training preset for (task, model); ConfigError (exit 2) when no row exists.

    `task` is a Task instance; `config` the task config the user's own values resolve to (its selector picks the
    paper family; default: the task's default preset). `length` / `size` asked explicitly replace the row's
    `task.L` / `task.size`.
    """
    if preset == "quick":
        return _quick(task, model)
    data = _load("paper")
    rows = data["rows"]
    if preset == "paper":
        config = config if config is not None else task.presets[task.default_preset]
        family = task.paper_family(config)
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
    keys = _row_keys(row, data["bases"])
    exception = row.get("tasks", {}).get(task.name)
    if exception:
        keys.update(_row_keys(exception, data["bases"]))
    if length is not None and ("task.L" in keys or name.split("/")[1] == "long_shift"):
        keys["task.L"] = length
    if size is not None and "task.size" in keys:
        keys["task.size"] = size
    return Preset(name, row["source"], keys, row.get("notes", ""), name.split("/")[1])


def _quick(task: Any, model: str) -> Preset:
    data = _load("quick")
    family = task.preset_family or task.name
    if family not in data:
        family = "generic"
    section = data[family]
    keys = dict(section["keys"])
    keys.update(section.get("models", {}).get(model, {}))
    keys.update(section.get("tasks", {}).get(task.name, {}))
    keys.update(section.get("pairs", {}).get(f"{model}/{task.name}", {}))
    return Preset("quick", data["preset"]["source"], keys, section.get("notes", ""), family,
                  dataset=dict(section.get("dataset", {})))


def list_presets() -> list[dict[str, str]]:
    """Every preset with its source, for `ssmbench ls presets`."""
    quick = _load("quick")
    out = [{"name": "quick" if family == "atomic" else f"quick ({family})", "source": quick["preset"]["source"],
            "notes": section.get("notes", "default; atomic tasks")}
           for family, section in quick.items() if family != "preset"]
    for name, row in paper_rows().items():
        out.append({"name": name, "source": row["source"], "notes": row.get("notes", "")})
    return out
