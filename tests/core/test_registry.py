"""Registries: lazy tables, did-you-mean, docstring summaries, module/card/table sync, entry points."""

from __future__ import annotations

import inspect
from importlib import resources

import pytest

from ssmbench import registry
from ssmbench.data.make.cards import split_front_matter
from ssmbench.errors import SsmbenchError, UnknownNameError
from ssmbench.generators import BUILTIN
from support import REPO


def test_unknown_name_suggests_close_matches():
    with pytest.raises(UnknownNameError, match="did you mean 'context_shift'"):
        registry.tasks.get("contex_shift")
    assert registry.tasks.canonical("masked_select") == "select"


def test_summaries_equal_first_docstring_line(task_name):
    cls = registry.tasks.get(task_name)
    assert inspect.getdoc(cls).splitlines()[0] == BUILTIN[task_name][1]
    assert cls.name == task_name and cls.__module__ == f"ssmbench.generators.{task_name}"


def test_table_modules_and_cards_in_sync():
    modules = {p.stem for p in (REPO / "generators").glob("*.py") if not p.stem.startswith("_")}
    assert modules == set(BUILTIN)
    cards = {p.stem for p in (REPO / "data_cards").glob("*.md") if not p.stem.startswith("_")}
    assert cards == set(BUILTIN)


def test_every_card_front_matter_matches(task_name):
    text = resources.files("ssmbench.data_cards").joinpath(f"{task_name}.md").read_text()
    meta, body = split_front_matter(text)
    assert meta["task"] == task_name and meta["version"] == registry.tasks.get(task_name).version
    assert "Worked example" in body and "discrepanc" in body.lower()


def test_module_class_strings_and_entry_point_clash(monkeypatch):
    assert registry.tasks.get("ssmbench.generators.shift:Shift").name == "shift"

    class FakeEP:
        name, value = "shift", "somepkg.tasks:Shift"

    monkeypatch.setattr(registry, "entry_points", lambda group: [FakeEP()])
    fresh = registry.Registry("task", "ssmbench.generators:BUILTIN", "ssmbench.tasks")
    with pytest.raises(SsmbenchError, match="clashes with the built-in"):
        fresh.names()
