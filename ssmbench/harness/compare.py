"""`ssmbench compare RUN...`: a results table across finished runs, laid out like the DLR paper's Table 1.

Rows are tasks, columns are (model, layers, L) with the parameter count; each cell shows the exact test R² and the
paper's per-batch-averaged validation R² (the number Table 1 prints), or for ListOps the exact and per-batch test
token accuracy and for Pathfinder the test macro-F1 and macro accuracy (Table 3). The last row gives the median time per
training step relative to the 1-layer DLR run at the same L on the same device (Table 1), or else to the DLR run
with the same number of layers at the same L (Table 3's "relative time per step"), when such runs are present.
`compare` reads only `config.json` and `metrics.json` of each run.

Example:
    >>> runs = [{"task": "shift", "model": "dlr", "layers": 1, "L": 512, "params": 1000, "device": "cpu",
    ...          "cells": {"r2": 0.99, "r2_batchavg": 0.98}, "time_per_step_s": 0.02}]
    >>> print(render_text(build_table(runs)))
    task              dlr 1L L=512 (1.0K)
    ----------------  -------------------
    shift             0.990 / 0.980
    time/step vs DLR  1.00x
    >>> runs = [{"task": "pathfinder", "model": m, "layers": 2, "L": 1024, "params": 2000, "device": "cpu",
    ...          "cells": {"label": "F1/acc", "a": 0.5, "b": 0.6}, "time_per_step_s": t}
    ...         for m, t in (("dlr", 0.5), ("local_attention", 2.0))]
    >>> [c["time_ratio"] for c in build_table(runs)["columns"]]  # no 1-layer DLR: the 2-layer one is the base
    [1.0, 4.0]
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError

log = logging.getLogger(__name__)



def load_runs(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """One summary per finished run folder with test scores; other folders are skipped with a logged note."""
    runs = []
    for p in paths:
        path = Path(p)
        metrics_file, config_file = path / "metrics.json", path / "config.json"
        if not config_file.exists():
            raise ConfigError("RUN", f"{path} is not an ssmbench run folder (no config.json)")
        if not metrics_file.exists():
            log.warning("skipped %s: not finished (no metrics.json)", path)
            continue
        m = json.loads(metrics_file.read_text())
        if "test" not in m:
            log.warning("skipped %s: no test scores (a checkpoint scored on %s only)", path,
                        ", ".join(k for k in ("val", "train") if k in m) or "no split")
            continue
        cfg = json.loads(config_file.read_text())
        runs.append({
            "run": str(path), "task": m["task"], "model": m["model"], "preset": m.get("preset"),
            "layers": cfg["model_overrides"].get("n_layers", m.get("layers")),
            "L": cfg["task_config"].get("L", m.get("seq_len")), "params": m.get("parameters"),
            "device": m.get("device"), "time_per_step_s": m.get("time_per_step_s"),
            "cells": _scores(m)})
    return runs


def _scores(m: dict[str, Any]) -> dict[str, Any]:
    """A cell's numbers: regression R² (Table 1), or the classification scores of the paper's Table 3 (test)."""
    test = m["test"]
    if "macro_f1_batchavg" in test:  # Pathfinder (segmentation): test macro-F1 / macro accuracy
        return {"label": "F1/acc", "a": test.get("macro_f1"), "b": test.get("macro_accuracy")}
    if "accuracy_batchavg" in test:  # ListOps: exact / per-batch test token accuracy
        return {"label": "acc", "a": test.get("accuracy"), "b": test.get("accuracy_batchavg")}
    return {"r2": test.get("r2"), "r2_batchavg": m["val"].get("r2_batchavg"), "val_r2": m["val"].get("r2")}


def _column(run: dict[str, Any]) -> tuple[str, Any, Any]:
    return run["model"], run["layers"], run["L"]


def build_table(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """{columns, rows, time_ratio}: the data behind every output format."""
    columns: dict[tuple, dict[str, Any]] = {}
    for r in runs:
        col = columns.setdefault(_column(r), {"model": r["model"], "layers": r["layers"], "L": r["L"],
                                              "params": r["params"], "cells": {}, "times": {}})
        if r["task"] in col["cells"]:
            log.warning("%s replaces an earlier run of %s in the column %s", r.get("run", "a run"), r["task"],
                        _title(col))
        col["cells"][r["task"]] = r["cells"]
        if r.get("time_per_step_s"):
            col["times"][f"{r['task']}@{r['device']}"] = r["time_per_step_s"]
    from .suites import task_order

    present = {t for c in columns.values() for t in c["cells"]}
    tasks = sorted(present, key=task_order())
    tasks += sorted({t for c in columns.values() for t in c["cells"]} - set(tasks))
    for (_model, layers, L), col in columns.items():
        base = columns.get(("dlr", 1, L)) or columns.get(("dlr", layers, L))
        ratios = [t / base["times"][k] for k, t in col["times"].items() if base and k in base["times"]]
        col["time_ratio"] = statistics.median(ratios) if ratios else None
    return {"tasks": tasks, "columns": list(columns.values())}


def _title(col: dict[str, Any]) -> str:
    params = col["params"]
    size = f"{params / 1e6:.1f}M" if params and params >= 1e6 else f"{params / 1e3:.1f}K" if params else "?"
    return f"{col['model']} {col['layers']}L L={col['L']} ({size})"


def _cell(c: dict[str, Any] | None) -> str:
    if not c:
        return "-"
    f = lambda v: "nan" if v is None or v != v else f"{v:.3f}"  # noqa: E731
    if "label" in c:
        return f"{c['label']} {f(c.get('a'))} / {f(c.get('b'))}"
    return f"{f(c.get('r2'))} / {f(c.get('r2_batchavg'))}"


def _rows(table: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    header = ["task"] + [_title(c) for c in table["columns"]]
    rows = [[t] + [_cell(c["cells"].get(t)) for c in table["columns"]] for t in table["tasks"]]
    times = ["time/step vs DLR"] + [f"{c['time_ratio']:.2f}x" if c["time_ratio"] else "-"
                                       for c in table["columns"]]
    return header, rows, times


def render_text(table: dict[str, Any]) -> str:
    header, rows, times = _rows(table)
    widths = [max(len(r[i]) for r in [header, *rows, times]) for i in range(len(header))]
    line = lambda r: "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows), line(times)])


def render_markdown(table: dict[str, Any]) -> str:
    header, rows, times = _rows(table)
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in [*rows, times]]
    out.append("")
    out.append("Cells: exact test R² / the paper's per-batch-averaged validation R² (Table 1's metric); "
               "ListOps: exact / per-batch test token accuracy; Pathfinder: test macro-F1 / macro accuracy "
               "(Table 3's metrics).")
    return "\n".join(out)

