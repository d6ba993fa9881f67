"""`ssmbench compare RUN...`: a results table across finished runs, laid out like the DLR paper's Table 1.

Rows are tasks; each column is one comparable configuration: runs share a column only when everything that can
change their scores is equal except the task and the training seed (model, preset, steps, L, layers, batch, learning
rate, ... : the digest of config.json without task, seed, paths and hardware). A 2-step smoke test therefore never
stands in the column of a 2,000-step run: it gets a column of its own, and the header names the steps. The runs of
one suite folder (`eval --task GROUP`) are one column, since one command (model, preset, `-o` keys) made them all,
even where the preset gives each task its own length and steps (the header then names their range). Several seeds
of one configuration are averaged: the cell shows mean ± sample standard deviation and the count (n=3); a seed run
twice counts once (the newest run). Each cell shows the exact test R² and the paper's per-batch-averaged validation R²
(the number Table 1 prints), or for ListOps the exact and per-batch test token accuracy and for Pathfinder the test
macro-F1 and macro accuracy (Table 3). The last row gives the median time per training step relative to the 1-layer
DLR column at the same L on the same device (Table 1), or else to the DLR column with the same number of layers at
the same L (Table 3's "relative time per step"): `base` marks that column, and other DLR columns like it get no
ratio (DLR against itself is load noise). `compare` reads `config.json` and `metrics.json` of each run (and the
manifest of a folder task's dataset, for the size of its test split);
it takes run folders, suite folders (`eval --task a,b` or `--seeds`) and folders holding either (`runs/*`, `runs`).
Folders it cannot tabulate (unfinished runs, a checkpoint scored on val, a missing, truncated or empty config.json
or metrics.json) are skipped with a note. A checkpoint scored on test (`eval --checkpoint`, `--lengths`: a folder of
its own) is a row `TASK [scored L=N]` in the column of the run that trained it (same task, seed and training config),
never a seed of that run: its cell's second number is the test set's per-batch R², since it has no validation scores;
without its run in the table it keeps a `[scored]` column per training config (`[untrained]`: `score_only` without a
checkpoint). A cell scored on fewer test samples than the full test set (the dataset's test split, else the preset's
test set) says so: `(test 20/2000)`. Every column title is unique (the config digest, then the suite folder's name
are added where titles would read alike), and a legend below the table says what the cells are.

Example:
    >>> runs = [{"task": "shift", "model": "dlr", "layers": 1, "L": 512, "params": 1000, "device": "cpu",
    ...          "steps": 2000, "preset": "quick", "group": "a", "seed": s, "time": s, "time_per_step_s": 0.02,
    ...          "cells": {"r2": v, "r2_batchavg": v - 0.01}} for s, v in ((0, 0.99), (1, 0.96), (2, 0.96))]
    >>> print(render_text(build_table(runs)))
    task              dlr 1L L=512 2000 steps quick (1.0K)
    ----------------  ------------------------------------
    shift             0.970±0.017 / 0.960±0.017 (n=3)
    time/step vs DLR  base
    <BLANKLINE>
    Cells: exact test R² / the paper's per-batch-averaged validation R² (Table 1's
    metric). Several seeds: mean ± sample standard deviation (n = seeds). time/step
    vs DLR: median time per training step against the `base` DLR column at the same
    L (1 layer, else as many layers); none for DLR columns like the base.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...config import config_sha256

log = logging.getLogger(__name__)

NOT_COMPARED = ("task", "task_config", "seed")
"""config.json keys that may differ within a column (the task's own config is reduced to its L)."""
NOT_COMPARED_SECTIONS = {"data": ("workers", "prefetch", "path", "dataset_id"), "hardware": ("device", "compile",
                                                                                             "cuda_graph", "threads"),
                         "eval": ("batch_size", "log_samples")}
"""Keys that never change a score (where the data lives, how fast it is read, on which device, whether per-sample
predictions are saved; a run made before a key existed lacks it)."""


RUN_FILES = ("metrics.json", "metrics.jsonl", "checkpoints")
"""What a run folder holds besides config.json: a folder with one of these but no config.json is a damaged run."""


def _kind(path: Path) -> str:
    if not path.exists():
        return "missing"
    if path.is_file():
        return "file"
    if (path / "config.json").is_file():
        return "run"
    if (path / "suite.json").is_file():
        return "suite"
    return "damaged" if any((path / f).exists() for f in RUN_FILES) else "folder"


def _skip(path: Path, why: str) -> None:
    log.warning("skipped %s: %s", path, why)


def run_folders(paths: Sequence[str | Path]) -> list[Path]:
    """The run folders named by `paths`, in order and without repeats.

    A run folder (config.json) is itself; a suite folder (suite.json) gives its run folders; any other folder, the
    run and suite folders it holds, so `compare runs/*`, `compare runs` and `compare runs/*/*` all work. A run
    folder without config.json, a file or a path that does not exist is skipped with a logged note; what `runs/*/*`
    lists inside a run folder (its files, checkpoints/) or beside a suite's runs (suite.json), silently.
    """
    found: list[Path] = []

    def take(path: Path, parent: bool) -> bool:
        kind = _kind(path)
        if parent and kind not in ("run", "suite", "damaged") and _kind(path.parent) in ("run", "suite"):
            return False  # what `runs/*/*` lists inside a run folder (its files, checkpoints/) or a suite's suite.json
        if kind == "run":
            found.append(path)
        elif kind == "suite":
            for child in _subfolders(path):
                take(child, False)
        elif kind == "damaged":
            _skip(path, "no config.json (a damaged or unfinished run folder)")
        elif kind == "folder" and parent:
            before = len(found)
            for child in _subfolders(path):
                take(child, False)
            if len(found) == before:
                _skip(path, "no run folder in it (no config.json or suite.json in it or its folders)")
        elif kind in ("missing", "file") and parent:
            _skip(path, "does not exist" if kind == "missing" else "a file, not a run folder")
        return kind == "run"

    for p in paths:
        take(Path(p), True)
    unique: dict[Path, Path] = {}
    for f in found:
        unique.setdefault(f.resolve(), f)
    return list(unique.values())


def _subfolders(path: Path) -> list[Path]:
    return sorted(c for c in path.iterdir() if c.is_dir() and not c.name.startswith("."))


def _read_json(file: Path) -> Any:
    """The file's JSON object; ValueError naming what is wrong with it (truncated, empty, not an object)."""
    text = file.read_text(errors="replace")
    if not text.strip():
        raise ValueError(f"{file.name} is empty")
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{file.name} is not valid JSON (truncated? {exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{file.name} holds a JSON {type(obj).__name__}, not an object")
    return obj


def load_runs(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """One summary per finished run with test scores under `paths` (run folders, suite folders or parents of
    either: `run_folders`); folders that cannot be tabulated (unfinished, scored on val only, a truncated or empty
    metrics.json or config.json) are skipped with a logged note."""
    runs = []
    for path in run_folders(paths):
        metrics_file, config_file = path / "metrics.json", path / "config.json"
        if not metrics_file.exists():
            _skip(path, "not finished (no metrics.json)")
            continue
        try:
            m, cfg = _read_json(metrics_file), _read_json(config_file)
        except (ValueError, OSError) as exc:
            _skip(path, str(exc))
            continue
        if "test" not in m:
            _skip(path, "no test scores (a checkpoint scored on "
                  f"{', '.join(k for k in ('val', 'train') if k in m) or 'no split'} only)")
            continue
        try:
            runs.append(_summary(path, m, cfg, metrics_file.stat().st_mtime))
            runs.extend(_length_row(runs[-1], m))
        except (KeyError, TypeError, AttributeError) as exc:  # a metrics.json or config.json of another shape
            _skip(path, f"metrics.json or config.json lacks what compare reads ({type(exc).__name__}: {exc})")
    return runs


def _length_row(run: dict[str, Any], m: dict[str, Any]) -> list[dict[str, Any]]:
    """A train-short-test-long run (`runtime.lengths`) adds a row `TASK [mean METRIC, test L A-B]` to its column:
    its mean over the test lengths, whose cell shows the maximum over seeds and their mean ± std."""
    lengths = m.get("lengths")
    if not isinstance(lengths, dict) or lengths.get("mean") is None:
        return []
    tested = lengths["test_lengths"]
    task = f"{run['task']} [mean {lengths['metric']}, test L {min(tested)}-{max(tested)}]"
    return [{**run, "task": task, "time_per_step_s": None, "cells": {"label": "lengths", "mean": lengths["mean"]}}]


def _summary(path: Path, m: dict[str, Any], cfg: dict[str, Any], time: float) -> dict[str, Any]:
    return {
        "run": str(path), "task": row_name(m["task"], cfg["task_config"]), "model": m["model"],
        "preset": m.get("preset"),
        "layers": cfg["model_overrides"].get("n_layers", m.get("layers")),
        "L": cfg["task_config"].get("L", m.get("seq_len")), "params": m.get("parameters"),
        "device": m.get("device"), "time_per_step_s": m.get("time_per_step_s"),
        "steps": cfg.get("train", {}).get("steps"), "seed": cfg.get("seed"), "group": config_group(cfg),
        "suite": str(path.parent.resolve()) if (path.parent / "suite.json").is_file() else None,
        "scored": _scored(m), "time": time, "cells": {**_scores(m), **_partial(m, cfg)}, "source": source_key(cfg)}


def source_key(cfg: dict[str, Any]) -> str:
    """8 hex of what a scored checkpoint shares with the run that trained it: the run's config without the keys
    scoring may change (the length, the eval and hardware sections)."""
    kept = {k: v for k, v in cfg.items() if k not in ("eval", "hardware", "data")}
    kept["task_config"] = {k: v for k, v in cfg.get("task_config", {}).items() if k not in ("L", "size")}
    return config_sha256(kept)[:8]


def _partial(m: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """{"partial": "n/N"} when the test set scored is smaller than the full one (the dataset folder's test split,
    else the test set of the run's preset for its task), so a run scored on 20 images never passes for a full one."""
    n = m["test"].get("n")
    full = _full_test_set(m, cfg) if isinstance(n, int) else None
    return {"partial": f"{n}/{full}"} if full and n < full else {}


def _full_test_set(m: dict[str, Any], cfg: dict[str, Any]) -> int | None:
    folder = (cfg.get("data") or {}).get("path")
    if folder:
        try:
            return int(_read_json(Path(folder) / "manifest.json")["splits"]["test"]["num_samples"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    try:
        from ...registry import get_task
        from ..config.presets import resolve_preset

        task = get_task(m["task"])
        if task.policy.reads_folder:  # its folder is not here: its test split's size is unknown
            return None
        keys = resolve_preset(str(cfg.get("preset") or "quick"), task, m["model"]).keys
        return int(keys.get("eval.test_samples", 640))
    except Exception:  # a plug-in or a preset of another version: no mark rather than a wrong one
        return None


def _scored(m: dict[str, Any]) -> str | None:
    """'scored' for a checkpoint scored without training, 'untrained' for a fresh model scored; None for a run."""
    if "scored_checkpoint" not in m:
        return None
    return "scored" if m["scored_checkpoint"] else "untrained"


def row_name(task: str, task_config: dict[str, Any]) -> str:
    """A run's table row: its task, plus the task's variant keys (`TaskConfig.added_defaults`) where they are off
    their default, since a variant is a dataset of its own and must not replace the default's cell.

    >>> row_name("select_fixed", {"L": 4096, "values": "zeros"}), row_name("select_fixed", {"L": 4096})
    ('select_fixed (values=zeros)', 'select_fixed')
    """
    from ...errors import SsmbenchError
    from ...registry import get_task

    try:
        added = getattr(get_task(task).Config, "added_defaults", {})
    except (SsmbenchError, ImportError):  # a plug-in task that is not installed here: its name alone
        return task
    variant = [f"{k}={task_config[k]}" for k in sorted(added) if k in task_config and task_config[k] != added[k]]
    return f"{task} ({', '.join(variant)})" if variant else task


def config_group(cfg: dict[str, Any]) -> str:
    """8 hex of everything in a run's config that can change its scores, except the task and the training seed."""
    kept = {k: v for k, v in cfg.items() if k not in NOT_COMPARED}
    for section, keys in {**NOT_COMPARED_SECTIONS, "train": ()}.items():  # a None key: one a run made before it
        # existed lacks (train.length_min / length_max, eval.test_lengths, data.train_samples, ...)
        kept[section] = {k: v for k, v in cfg.get(section, {}).items() if k not in keys and v is not None}
    kept["L"] = cfg.get("task_config", {}).get("L")
    return config_sha256(kept)[:8]


def _scores(m: dict[str, Any]) -> dict[str, Any]:
    """A cell's numbers: regression R² (Table 1), or the classification scores of the paper's Table 3 (test)."""
    test = m["test"]
    if "macro_f1_batchavg" in test:  # Pathfinder (segmentation): test macro-F1 / macro accuracy
        return {"label": "F1/acc", "a": test.get("macro_f1"), "b": test.get("macro_accuracy")}
    if "accuracy_batchavg" in test:  # ListOps: exact / per-batch test token accuracy
        return {"label": "acc", "a": test.get("accuracy"), "b": test.get("accuracy_batchavg")}
    val = m.get("val")
    if val is None and _scored(m):  # a checkpoint scored on test only: its per-batch figure is the test set's
        return {"r2": test.get("r2"), "r2_batchavg": test.get("r2_batchavg"), "val_r2": None}
    val = val or {}
    return {"r2": test.get("r2"), "r2_batchavg": val.get("r2_batchavg"), "val_r2": val.get("r2")}


def _column(run: dict[str, Any]) -> tuple[Any, ...]:
    key = run["model"], run["layers"], run["L"], run.get("steps"), run.get("preset"), run.get("group")
    if run.get("scored") == "scored":  # a checkpoint whose run is not in the table: one column per training config
        return "scored", run.get("source")
    if run.get("scored"):  # a fresh model scored: never a seed of the trained runs' column
        return (run["scored"], *key)
    if run.get("suite"):  # one suite command: one column, whatever its preset gives each task
        return "suite", run["suite"]
    return key


def _fold(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Scored checkpoints (`eval --checkpoint`, `--lengths`) become rows `TASK [scored L=N]` of the column of the
    run that trained them (same task, seed and training config), so scorings never widen the table; a scoring whose
    run is not among `runs` keeps a `[scored]` column, one per training config."""
    trained = {(r["task"], r.get("seed"), r.get("source")): r for r in runs if not r.get("scored")}
    out = []
    for r in runs:
        if r.get("scored") == "scored":
            r = {**r, "task": f"{r['task']} [scored L={r['L']}]"}
            home = trained.get((r["task"].split(" [")[0], r.get("seed"), r.get("source")))
            if home is not None:
                r["home"] = _column(home)
        out.append(r)
    return out


def build_table(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """{tasks, columns}: the data behind every output format. Each column holds, per task, the runs of each seed
    (the newest when a seed was run twice) and their mean / std / count."""
    columns: dict[tuple, dict[str, Any]] = {}
    runs = _fold(runs)
    for r in sorted(runs, key=lambda r: (bool(r.get("home")), r.get("time") or 0)):  # trained runs first
        if r.get("home") in columns:
            home = columns[r["home"]]
            home["seeds"].setdefault(r["task"], {})[r.get("seed")] = r["cells"]
            continue
        col = columns.setdefault(_column(r), {"model": r["model"], "layers": r["layers"], "L": r["L"],
                                              "steps": r.get("steps"), "preset": r.get("preset"),
                                              "group": r.get("group"), "scored": r.get("scored"),
                                              "suite": r.get("suite"),
                                              "params": r["params"], "seeds": {},
                                              "times": {}, "params_max": r["params"], "Ls": set(),
                                              "steps_seen": set(), "layers_seen": set()})
        col["Ls"].add(r["L"])
        col["steps_seen"].add(r.get("steps"))
        col["layers_seen"].add(r["layers"])
        if r["params"] is not None:  # tasks' input and output widths differ: the same model has a range of sizes
            col["params"] = min(p for p in (col["params"], r["params"]) if p is not None)
            col["params_max"] = max(p for p in (col["params_max"], r["params"]) if p is not None)
        col["seeds"].setdefault(r["task"], {})[r.get("seed")] = r["cells"]  # newest last: replaces an older rerun
        if r.get("time_per_step_s"):
            col["times"].setdefault(f"{r['task']}@{r['device']}", []).append(r["time_per_step_s"])
    from ..config.task_groups import task_order

    order = task_order()
    tasks = sorted({t for c in columns.values() for t in c["seeds"]},
                   key=lambda t: (order(t.split(" (")[0].split(" [")[0]), t))
    labelled = _distinguish(list(columns.values()))
    for col in columns.values():
        col["cells"] = {t: _aggregate(list(by_seed.values())) for t, by_seed in col["seeds"].items()}
        col["times"] = {k: statistics.median(v) for k, v in col["times"].items()}
        col["label"] = labelled[id(col)]
    for col in columns.values():
        base = _dlr_base(col, list(columns.values()))
        col["time_base"] = base is col  # its ratio is 1.0 by definition; the table says `base`
        if base is None or (base is not col and col["model"] == "dlr" and col["layers_seen"] == base["layers_seen"]):
            col["time_ratio"] = None  # no ratio of DLR against another DLR column alike: load noise
            continue
        ratios = [t / base["times"][k] for k, t in col["times"].items() if k in base["times"]]
        col["time_ratio"] = statistics.median(ratios) if ratios else None
    for col in columns.values():  # a suite column's lengths, steps and layers: one value, or their range as text
        for key, seen in (("L", "Ls"), ("steps", "steps_seen"), ("layers", "layers_seen")):
            col[key] = next(iter(col[seen])) if len(col[seen]) == 1 else _span(col[seen])
        del col["seeds"], col["Ls"], col["steps_seen"], col["layers_seen"]
    return {"tasks": tasks, "columns": list(columns.values())}


def _dlr_base(col: dict[str, Any], columns: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The DLR column a column's time is measured against: 1 layer at the same L and steps, else the same layers."""
    for layers in (1, col["layers"]):
        for c in columns:
            if c["model"] == "dlr" and c["layers_seen"] == {layers} and c["Ls"] == col["Ls"]:
                return c
    return None


def _aggregate(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, sample standard deviation and count of each number over the seeds of one cell."""
    out: dict[str, Any] = {"n": len(cells)}
    for key in dict.fromkeys(k for c in cells for k in c):
        values = [c.get(key) for c in cells]
        if key in ("label", "partial"):  # text: the first run's, or the smallest partial test set
            marks = [v for v in values if v is not None]
            out[key] = min(marks, key=lambda v: int(str(v).split("/")[0])) if key == "partial" and marks else \
                values[0]
            continue
        finite = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
        out[key] = statistics.fmean(finite) if finite else None
        out[f"{key}_std"] = statistics.stdev(finite) if len(finite) > 1 else None
        if out.get("label") == "lengths":  # the protocol's row: also the best seed (`runtime.lengths.over_seeds`)
            out[f"{key}_max"] = max(finite) if finite else None
    return out


def _distinguish(columns: list[dict[str, Any]]) -> dict[int, str]:
    """Column titles, each unique: columns that would read alike get their config digest appended, then where they
    come from (a suite's folder name, `runs`), then a number."""
    titles = {id(c): _title(c) for c in columns}
    for extra in (lambda c: f"cfg {c['group']}",
                  lambda c: f"suite {Path(c['suite']).name}" if c.get("suite") else "runs",
                  lambda c: ""):
        counts: dict[str, int] = {}
        for t in titles.values():
            counts[t] = counts.get(t, 0) + 1
        if max(counts.values(), default=1) == 1:
            break
        seen: dict[str, int] = {}
        for c in columns:
            t = titles[id(c)]
            if counts[t] > 1:
                seen[t] = seen.get(t, 0) + 1
                titles[id(c)] = f"{t} {extra(c) or f'#{seen[t]}'}"
    return titles


def _title(col: dict[str, Any]) -> str:
    low, high = _size(col["params"]), _size(col.get("params_max"))
    size = low if high in ("?", low) else f"{low}-{high}"  # the smallest and largest run of the column
    steps = _span(col["steps_seen"])
    steps = f" {steps} steps" if steps != "?" else ""
    preset = f" {col['preset']}" if col.get("preset") else ""
    scored = f" [{col['scored']}]" if col.get("scored") else ""
    return f"{col['model']} {_span(col['layers_seen'])}L L={_span(col['Ls'])}{steps}{preset} ({size}){scored}"


def _span(values: set[Any]) -> str:
    """One value, or the smallest and largest of several: '64', '64-256'; '?' when none is known."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return "?"
    return str(known[0]) if known[0] == known[-1] else f"{known[0]}-{known[-1]}"


def _size(params: int | None) -> str:
    return f"{params / 1e6:.1f}M" if params and params >= 1e6 else f"{params / 1e3:.1f}K" if params else "?"


def _cell(c: dict[str, Any] | None) -> str:
    if not c:
        return "-"

    def f(key: str) -> str:
        v = c.get(key)
        if v is None or v != v:
            return "nan"
        std = c.get(f"{key}_std")
        return f"{v:.3f}" if std is None else f"{v:.3f}±{std:.3f}"

    count = f" (n={c['n']})" if c.get("n", 1) > 1 else ""
    count += f" (test {c['partial']})" if c.get("partial") else ""
    if c.get("label") == "lengths":
        best = c.get("mean_max")
        return f"{f('mean')}{count}" if c.get("n", 1) == 1 or best is None else f"max {best:.3f} / {f('mean')}{count}"
    if "label" in c:
        return f"{c['label']} {f('a')} / {f('b')}{count}"
    return f"{f('r2')} / {f('r2_batchavg')}{count}"


def _rows(table: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    header = ["task"] + [c["label"] for c in table["columns"]]
    rows = [[t] + [_cell(c["cells"].get(t)) for c in table["columns"]] for t in table["tasks"]]
    times = ["time/step vs DLR"] + ["base" if c.get("time_base") else f"{c['time_ratio']:.2f}x" if c["time_ratio"]
                                    else "-" for c in table["columns"]]
    return header, rows, times


def render_text(table: dict[str, Any]) -> str:
    header, rows, times = _rows(table)
    widths = [max(len(r[i]) for r in [header, *rows, times]) for i in range(len(header))]
    line = lambda r: "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    import textwrap

    legend = textwrap.wrap(legend_text(table), width=max(80, min(110, sum(widths) + 2 * len(widths))))
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows), line(times), "", *legend])


def render_markdown(table: dict[str, Any]) -> str:
    header, rows, times = _rows(table)
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in [*rows, times]]
    out += ["", legend_text(table)]
    return "\n".join(out)


def legend_text(table: dict[str, Any]) -> str:
    """What the cells mean, in words: below the plain table and the Markdown one alike (only what the table shows)."""
    cells = [c for col in table["columns"] for c in col["cells"].values()]
    kinds = {c.get("label") for c in cells}
    parts = []
    if None in kinds:
        parts.append("Cells: exact test R² / the paper's per-batch-averaged validation R² (Table 1's metric)")
    if "acc" in kinds:
        parts.append("ListOps: exact / per-batch test token accuracy")
    if "F1/acc" in kinds:
        parts.append("Pathfinder: test macro-F1 / macro accuracy (Table 3's metrics)")
    text = "; ".join(parts) + "."
    if any(c.get("n", 1) > 1 for c in cells):
        text += " Several seeds: mean ± sample standard deviation (n = seeds)."
    if any("[scored" in t for t in table["tasks"]) or any(col.get("scored") for col in table["columns"]):
        text += (" `[scored L=N]`: a checkpoint scored on test by `eval --checkpoint` / `--lengths` at length N, "
                 "in the column of the run that trained it (second number: per-batch test R²); `[untrained]`: a "
                 "fresh model scored.")
    if "lengths" in kinds:
        text += (" `[mean M, test L A-B]`: train short, test long: each seed's M averaged over the test lengths; "
                 "several seeds: max over seeds (the number Delétang et al. and Grazzi et al. report: best of 10 "
                 "and of 3 seeds) / mean ± std over seeds.")
    if any(c.get("partial") for c in cells):
        text += " (test n/N): scored on n of the N test samples the full test set has."
    if any(" cfg " in col["label"] for col in table["columns"]):
        text += " `cfg <digest>`: the configuration of a column whose title reads like another's."
    if any(col.get("time_ratio") or col.get("time_base") for col in table["columns"]):
        text += (" time/step vs DLR: median time per training step against the `base` DLR column at the same L "
                 "(1 layer, else as many layers); none for DLR columns like the base.")
    return text

