"""Paper presets carry where their values come from (issue 25, item 1): the provenance table of `paper.toml`, its
validation at load time, what `--preset paper` resolves to where the authors' run script and the paper's tables
differ, and `ssmbench ls presets --verbose`."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import tomllib

import pytest
import torch

from ssmbench.errors import ConfigError
from ssmbench.harness.config.presets import (
    PaperPresets,
    Provenance,
    Reading,
    _load,
    paper_presets,
    parse_paper,
    resolve_preset,
)
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.models.build import build_model
from ssmbench.harness.models.optim_groups import param_groups
from ssmbench.registry import get_task

RUN_1D = "ag1988/dlr@27e7287 run-1d.sh"


def ssmbench(*args: str) -> subprocess.CompletedProcess:
    """The CLI as a user runs it (`python -m ssmbench`), outside the checkout."""
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    return subprocess.run([sys.executable, "-m", "ssmbench", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tempfile.gettempdir())


def test_paper_file_loads_into_typed_provenance() -> None:
    paper = paper_presets()
    assert isinstance(paper, PaperPresets)
    entry = paper.rows["dlr_paper/atomic/dlr"].layer.provenance["train.lr"]
    assert isinstance(entry, Provenance) and entry.source.startswith(RUN_1D)
    assert entry.others == (Reading(1e-4, entry.others[0].source),) and "Table 5" in entry.others[0].source
    assert "the experiment wins" in entry.note
    # a base's entries travel with its keys: every atomic row says where its 43.2K steps come from
    steps = paper.resolve("dlr_paper/atomic/attention", "cumsum")[1]["train.steps"]
    assert (steps.value, [o.value for o in steps.others]) == (43200, [40000])


def test_every_dlr_paper_row_says_where_its_learning_rate_comes_from() -> None:
    paper = paper_presets()
    for name, row in paper.rows.items():
        if not name.startswith("dlr_paper/"):
            continue
        assert "train.lr" in paper.resolve(name)[1], name
        for task in row.tasks:
            keys, prov = paper.resolve(name, task)
            assert "train.lr" in prov and prov["train.lr"].value == keys["train.lr"], (name, task)


@pytest.mark.parametrize("task, lr", [("select_fixed", 5e-5), ("cummax", 5e-5), ("shift", 5e-5), ("sort", 5e-5),
                                      ("mips", 1e-4), ("solve", 1e-4), ("solve_fixed", 1e-4)])
def test_paper_preset_dlr_learning_rate_follows_the_run_script(task: str, lr: float) -> None:
    """The 1-layer L = 4096 DLR rows run-1d.sh@27e7287 ran at 5e-5 resolve to 5e-5; MIPS keeps its command's 1e-4;
    SOLVE / SOLVE-FIXED (no script records them) keep Table 5's 1e-4 and say it is unrecorded."""
    t = get_task(task)
    p = resolve_preset("paper", t, "dlr")
    assert p.name == "dlr_paper/atomic/dlr" and p.keys["train.lr"] == lr
    entry = p.provenance["train.lr"]
    assert entry.value == lr
    if task == "mips":
        assert entry.source.startswith(RUN_1D) and p.keys["train.batch_size"] == 4
    elif task.startswith("solve"):
        assert "unrecorded" in entry.source and [o.value for o in entry.others] == [5e-5]
    else:
        assert entry.source.startswith(RUN_1D) and [o.value for o in entry.others] == [1e-4]


def test_run_config_resolves_the_script_rate_and_keeps_the_papers_one_away() -> None:
    assert resolve_run("dlr", "select_fixed", "paper").train.lr == 5e-5
    assert resolve_run("dlr", "mips", "paper").train.lr == 1e-4
    assert resolve_run("dlr", "select_fixed", "paper", overrides={"train.lr": 1e-4}).train.lr == 1e-4
    six = resolve_run("dlr", "reverse", "dlr_paper/atomic/dlr_6l")
    assert (six.model_overrides["n_layers"], six.train.lr) == (6, 1e-4)
    prod = resolve_run("dlr", "shift", "dlr_paper/long_shift/dlr_prod", length=2 ** 14)
    assert (prod.model_overrides["kernel_to_real"], prod.train.lr) == ("prod", 2e-5)


def test_dlr_kernel_parameters_follow_the_preset_rate() -> None:
    """train.lr alone is the authors' optimizer.lr and model.layer.lr.Lambda / .W: every group gets 5e-5."""
    t = get_task("select_fixed")
    p = resolve_preset("paper", t, "dlr")
    model_keys = {k: v for k, v in p.keys.items() if k.startswith("model.")} | {"model.d_state": 64}
    torch.manual_seed(0)
    net = build_model("dlr", t.spec(t.Config(L=64)), model_keys)
    groups = param_groups(net, lr=p.keys["train.lr"], weight_decay=p.keys["train.weight_decay"])
    assert len(groups) > 1 and {g["lr"] for g in groups} == {5e-5}


def _paper_data() -> dict:
    return copy.deepcopy(_load("paper"))


@pytest.mark.parametrize("where", ["row", "task", "base"])
def test_provenance_for_a_key_not_set_there_is_an_error_at_load_time(where: str) -> None:
    data = _paper_data()
    entry = {"source": "somewhere"}
    if where == "row":  # the row sets no model.n_heads (neither itself nor through its bases)
        data["rows"]["dlr_paper/atomic/dlr"]["provenance"]["model.n_heads"] = entry
        match = r'rows."dlr_paper/atomic/dlr".provenance.*\'model.n_heads\'.*does not set'
    elif where == "task":  # the row sets model.d_state; the MIPS exception does not
        data["rows"]["dlr_paper/atomic/dlr"]["tasks"]["mips"]["provenance"] = {"model.d_state": entry}
        match = r"tasks.mips.provenance.*'model.d_state'.*does not set"
    else:
        data["bases"]["mips"]["provenance"]["train.lr"] = entry
        match = r"bases.mips.provenance.*'train.lr'.*does not set"
    with pytest.raises(ConfigError, match=match):
        parse_paper(data)


def test_a_row_may_give_the_source_of_a_key_its_base_sets() -> None:
    data = _paper_data()
    data["rows"]["dlr_paper/atomic/dss_exp"]["provenance"]["model.d_state"] = {"source": "the row's own note"}
    keys, prov = parse_paper(data).resolve("dlr_paper/atomic/dss_exp", "cumsum")
    assert (prov["model.d_state"].source, prov["model.d_state"].value) == ("the row's own note", keys["model.d_state"])


@pytest.mark.parametrize("entry, match", [
    ({"other": [{"value": 1, "source": "x"}]}, "needs a non-empty `source`"),
    ({"source": "x", "others": []}, "unknown field"),
    ({"source": "x", "other": [{"value": 1}]}, r"other\[0\]"),
    ({"source": "x", "other": {"value": 1, "source": "y"}}, "must be a list"),
])
def test_malformed_provenance_entries_are_refused(entry: dict, match: str) -> None:
    data = _paper_data()
    data["rows"]["dlr_paper/atomic/dlr"]["provenance"]["train.lr"] = entry
    with pytest.raises(ConfigError, match=match):
        parse_paper(data)


def test_a_layer_that_sets_a_key_again_without_an_entry_drops_the_older_one() -> None:
    text = """
[bases.b]
"train.lr" = 1e-3
"train.steps" = 10
provenance."train.lr" = { source = "the base's source" }
provenance."train.steps" = { source = "steps source" }

[rows."p/f/m"]
bases = ["b"]
source = "row"
keys = { "train.lr" = 2e-3 }
[rows."p/f/m".tasks.t]
"train.steps" = 20
"""
    paper = parse_paper(tomllib.loads(text))
    keys, prov = paper.resolve("p/f/m", "t")
    assert keys == {"train.lr": 2e-3, "train.steps": 20} and prov == {}
    keys, prov = paper.resolve("p/f/m", "other")
    assert set(prov) == {"train.steps"} and prov["train.steps"].value == 10


def test_ls_presets_verbose_shows_value_source_and_other_reading() -> None:
    plain = ssmbench("ls", "presets")
    assert plain.returncode == 0, plain.stderr
    assert "dlr_paper/atomic/dlr" in plain.stdout and "source:" not in plain.stdout

    result = ssmbench("ls", "presets", "--verbose")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    row = out[out.index("dlr_paper/atomic/dlr  "):out.index("dlr_paper/atomic/dlr_6l  ")]
    lr = row[row.index("  train.lr = 5e-05"):]
    assert lr.index("source: " + RUN_1D) < lr.index("other: 0.0001 -- paper Table 5")
    mips = row[row.index("  tasks.mips:"):]
    assert "train.lr = 0.0001" in mips and "train.batch_size = 4" in mips
    solve = row[row.index("  tasks.solve:"):]
    assert "unrecorded" in solve and "other: 5e-05" in solve
    assert "other keys (the row's source): task.L=4096" in row

    as_json = ssmbench("ls", "presets", "--verbose", "--json")
    assert as_json.returncode == 0, as_json.stderr
    item = next(i for i in json.loads(as_json.stdout) if i["name"] == "dlr_paper/atomic/dlr")
    assert item["keys"]["train.lr"] == 5e-5
    assert item["provenance"]["train.lr"]["other"] == [{"value": 1e-4, "source": item["provenance"]["train.lr"]
                                                        ["other"][0]["source"]}]
    assert item["tasks"]["mips"]["provenance"]["train.lr"]["value"] == 1e-4

    refused = ssmbench("ls", "models", "--verbose")
    assert refused.returncode == 2 and "--verbose applies to `ssmbench ls presets`" in refused.stderr
