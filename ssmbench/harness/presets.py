"""Training presets as data: `quick` (ssmbench's CPU-sized default) and `paper` (the DLR paper's Tables 2, 5, 6).

The presets live in `presets/quick.toml` and `presets/paper.toml` as `-o`-style keys. `resolve_preset` turns a
preset name, a task and a model into the keys to apply, with the row's source:

* `quick`: the family's keys, then the model's, then the task's;
* `paper`: the row `<paper>/<family>/<model>`, where the family is `atomic` (L other than 512), `atomic512`,
  `long_shift` (`shift` at L >= 2^14), `listops`, `pathfinder<S>` (the DLR paper's rows, `dlr_paper/...`) or
  `lra_pathfinder<S>` (LRA Pathfinder: the LRU, LaS and S4 rows); a full row name is accepted too.

Example:
    >>> p = resolve_preset("paper", "cumsum", "dlr", length=None)
    >>> p.name, p.keys["train.lr"], p.keys["task.L"], p.source
    ('dlr_paper/atomic/dlr', 0.0001, 4096, 'DLR paper Table 5')
    >>> resolve_preset("paper", "mips", "attention").keys["train.batch_size"]
    4
    >>> resolve_preset("quick", "reverse", "dlr").keys["model.n_layers"]
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

ATOMIC = ("shift", "cumsum", "cummax", "reverse", "sort", "select", "select_fixed", "solve", "solve_fixed",
          "context_shift", "mips")


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


def family_of(task: str, length: int | None = None, size: int | None = None, default_length: int = 4096) -> str:
    """The paper-preset family of a task at a length (atomic tasks) or image size (pathfinder)."""
    if task in ATOMIC:
        L = length if length is not None else default_length
        if task == "shift" and L >= 2 ** 14:
            return "long_shift"
        return "atomic512" if L == 512 else "atomic"
    if task == "listops_subtrees":
        return "listops"
    if task == "listops":  # LRA ListOps: the paper did not run it, so no paper row matches
        return "lra_listops"
    if task == "pathfinder":
        return f"pathfinder{size or 128}"
    if task == "pathfinder_lra":
        return f"lra_pathfinder{size or 32}"
    return task


def _row_keys(table: dict[str, Any], bases: dict[str, Any]) -> dict[str, Any]:
    keys: dict[str, Any] = {}
    for base in table.get("bases", []):
        keys.update(bases[base])
    keys.update({k: v for k, v in table.get("keys", table).items()
                 if k not in ("bases", "source", "notes", "tasks", "keys")})
    return keys


def paper_rows() -> dict[str, dict[str, Any]]:
    return _load("paper")["rows"]


def resolve_preset(preset: str, task: str, model: str, length: int | None = None,
                   size: int | None = None) -> Preset:
    """The keys of a training preset for (task, model); ConfigError (exit 2) when no row exists."""
    if preset == "quick":
        return _quick(task, model)
    data = _load("paper")
    rows = data["rows"]
    if preset == "paper":
        family = family_of(task, length, size)
        name = next((r for r in rows if r.split("/", 1)[1] == f"{family}/{model}"), f"dlr_paper/{family}/{model}")
        if name not in rows:
            have = sorted(r for r in rows if r.split("/")[1] == family)
            if not have:  # e.g. Pathfinder at a size the paper did not run: name the families it did run
                stem = family.rstrip("0123456789")
                have = sorted({r.rsplit("/", 1)[0] for r in rows if r.split("/")[1].rstrip("0123456789") == stem})
            raise ConfigError("--preset", f"no paper preset for model {model!r} on {task} ({family}); "
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
    exception = row.get("tasks", {}).get(task)
    if exception:
        keys.update(_row_keys(exception, data["bases"]))
    if length is not None and "task.L" in keys:
        keys["task.L"] = length
    if size is not None and "task.size" in keys:
        keys["task.size"] = size
    if task == "shift" and name.split("/")[1] == "long_shift":
        keys.setdefault("task.L", length)
    return Preset(name, row["source"], keys, row.get("notes", ""), name.split("/")[1])


def _quick(task: str, model: str) -> Preset:
    data = _load("quick")
    family = "atomic" if task in ATOMIC else task
    if family not in data:
        raise ConfigError("--preset", f"the quick preset does not cover task {task!r} yet",
                          "pass the settings with -o key=value or --config FILE")
    section = data[family]
    keys = dict(section["keys"])
    keys.update(section.get("models", {}).get(model, {}))
    keys.update(section.get("tasks", {}).get(task, {}))
    keys.update(section.get("pairs", {}).get(f"{model}/{task}", {}))
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
