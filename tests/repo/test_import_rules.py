"""Import rules of the layout, checked statically on the source (AST), so no import has side effects here.

- `ssmbench/{api,errors,registry,config,seeding,training_policy}.py` (contracts and plumbing) import neither h5py,
  torch nor click;
- `ssmbench/data/**` never imports torch at module level, nor click anywhere;
- only `ssmbench/cli/` imports click;
- no core module imports a specific plug-in module (`ssmbench.generators.<task>`, ...) at module level, and
  `ssmbench/data/` reaches plug-ins only through the registry (no import of one anywhere);
- no import cycles among ssmbench modules, of any kind: every `import` / `from ... import` anywhere in a module
  counts, at module level, inside functions and under `if TYPE_CHECKING`;
- layers: `ssmbench/cli/` -> `ssmbench/harness/` -> `ssmbench/data/` -> the core (the top-level modules), never back;
- inside `ssmbench/harness/`, floors: the entry points at its top -> `training/` -> `models/`, `results/` ->
  `config/`, `feed/`, `metrics/` -> `runtime/`; a module imports from its own sub-package or a lower floor only
  (two sub-packages on one floor do not import each other), and the top holds at most 12 modules;
- inside `ssmbench/data/`: `folder/` (the dataset-folder contract) imports only the core, `read/` only `folder/` and
  the core (a reader never loads the builder or the downloader), and the harness reaches no `hub/` module.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import REPO

PLUGIN_DIRS = {"generators": "ssmbench.generators", "evaluators": "ssmbench.evaluators",
               "reference_models": "ssmbench.reference_models"}
PLUMBING = ["ssmbench.api", "ssmbench.errors", "ssmbench.registry", "ssmbench.config", "ssmbench.seeding",
            "ssmbench.training_policy"]
CORE = ("ssmbench", *PLUMBING, "ssmbench.task_config", "ssmbench.plain")
"""The top-level modules (`ssmbench` itself for `__version__`): what `ssmbench/data/folder/` may import."""


@dataclass(frozen=True)
class Import:
    target: str  # dotted module name, resolved (a package's submodule when `from pkg import submodule`)
    top_level: bool  # executed at import time (not inside a function body, not under `if TYPE_CHECKING`)
    line: int
    type_only: bool = False  # under `if TYPE_CHECKING` (never executed, but still an arrow of the structure)


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in [("ssmbench", "ssmbench"), *PLUGIN_DIRS.items()]:
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _imports(name: str) -> list[Import]:
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[Import] = []

    def visit(node: ast.AST, top: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(child, False, True)
                continue
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                out.extend(Import(alias.name, inner, child.lineno, type_only) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                for alias in child.names:
                    sub = f"{module}.{alias.name}"
                    out.append(Import(sub if sub in MODULES else module, inner, child.lineno, type_only))
            else:
                visit(child, inner, type_only)

    tree = ast.parse(path.read_text(), filename=str(path))
    visit(tree, True, False)
    # every Import / ImportFrom node of the module is seen, wherever it sits (functions, classes, try, if, with)
    assert len({imp.line for imp in out}) == len({n.lineno for n in ast.walk(tree)
                                                  if isinstance(n, (ast.Import, ast.ImportFrom))}), name
    return out


IMPORTS = {name: _imports(name) for name in MODULES}


def _is(target: str, library: str) -> bool:
    return target == library or target.startswith(library + ".")


def _violations(modules: list[str], banned: tuple[str, ...], top_level_only: bool = False,
                executed_only: bool = False) -> list[str]:
    """Imports of `banned` by `modules`; `top_level_only`: those run at import time; `executed_only`: leaving out
    those under `if TYPE_CHECKING` (a library named for its types is never loaded)."""
    return [f"{MODULES[m].relative_to(REPO)}:{imp.line} imports {imp.target}" for m in modules
            for imp in IMPORTS[m] if any(_is(imp.target, b) for b in banned)
            and (imp.top_level or not top_level_only) and not (imp.type_only and executed_only)]


def _is_plugin(name: str) -> bool:
    return any(_is(name, package) for package in PLUGIN_DIRS.values())


def test_the_scan_sees_the_layout():
    assert {"ssmbench.api", "ssmbench.data.make.generate", "ssmbench.cli.app", "ssmbench.generators.shift",
            "ssmbench.generators._listops_dedup"} <= set(MODULES)
    build = {imp.target for imp in IMPORTS["ssmbench.data.make.generate"]}
    assert {"ssmbench.config", "ssmbench.data.make.shards", "ssmbench.data.make.finalize", "ssmbench.data.make.jobs"} <= build
    assert any(imp.target == "numba" and not imp.top_level for imp in IMPORTS["ssmbench.data.make.jobs"])
    assert any(imp.target == "h5py" and not imp.top_level for imp in IMPORTS["ssmbench.data.make.shards"])
    assert any(imp.target == "ssmbench.api" and imp.top_level for imp in IMPORTS["ssmbench.data.make.shards"])
    # imports under `if TYPE_CHECKING` and inside functions are seen too
    evaluation = IMPORTS["ssmbench.harness.evaluation"]
    assert any(imp.target == "ssmbench.harness.config.run_request" and imp.type_only for imp in evaluation)
    protocol = IMPORTS["ssmbench.harness.training.protocol"]
    assert any(imp.target == "ssmbench.harness.training.trainer" and not imp.top_level and not imp.type_only
               for imp in protocol)


@pytest.mark.parametrize("module", PLUMBING)
def test_plumbing_imports_no_heavy_or_cli_library(module):
    assert not _violations([module], ("h5py", "torch", "click"), executed_only=True)


def test_data_never_imports_torch_at_module_level_nor_click():
    data = [m for m in MODULES if _is(m, "ssmbench.data")]
    assert len(data) > 8
    assert not _violations(data, ("torch",), top_level_only=True)
    assert not _violations(data, ("click",), executed_only=True)


def test_only_the_cli_imports_click():
    others = [m for m in MODULES if not _is(m, "ssmbench.cli")]
    assert not _violations(others, ("click",))


def test_core_imports_no_plugin_module_at_module_level():
    core = [m for m in MODULES if not _is_plugin(m)]
    bad = [f"{MODULES[m].relative_to(REPO)}:{imp.line} imports {imp.target}" for m in core for imp in IMPORTS[m]
           if imp.top_level and _is_plugin(imp.target) and imp.target not in PLUGIN_DIRS.values()]
    assert not bad


def test_data_reaches_plugins_only_through_the_registry():
    data = [m for m in MODULES if _is(m, "ssmbench.data")]
    assert not _violations(data, tuple(PLUGIN_DIRS.values()))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _graph() -> dict[str, set[str]]:
    return {m: {imp.target for imp in IMPORTS[m] if imp.target in MODULES and imp.target != m} for m in MODULES}


def test_no_import_cycles():
    """No circle of any kind: module level, inside functions and under `if TYPE_CHECKING` alike."""
    assert not _cycles(_graph())


def test_the_cycle_test_sees_a_type_checking_circle():
    real = IMPORTS["ssmbench.harness.config.run_request"]
    IMPORTS["ssmbench.harness.config.run_request"] = [*real, Import("ssmbench.harness.config.resolver", False, 1,
                                                                    True)]
    try:
        with pytest.raises(AssertionError):
            test_no_import_cycles()
    finally:
        IMPORTS["ssmbench.harness.config.run_request"] = real


def _ssmbench_imports(modules: list[str]) -> list[tuple[str, Import]]:
    return [(m, imp) for m in modules for imp in IMPORTS[m] if imp.target in MODULES]


def _under(package: str) -> list[str]:
    found = [m for m in MODULES if _is(m, package)]
    assert found, f"no module under {package}"
    return found


def test_layers_import_only_downwards():
    layers = ["ssmbench.cli", "ssmbench.harness", "ssmbench.data"]
    for i, layer in enumerate(layers):
        above = tuple(layers[:i])
        assert not (above and _violations(_under(layer), above)), layer
    core = [m for m in MODULES if m in CORE]
    assert len(core) == len(CORE)
    assert not _violations(core, tuple(layers))


def test_the_folder_contract_imports_only_the_core():
    bad = [f"{MODULES[m].relative_to(REPO)}:{imp.line} imports {imp.target}"
           for m, imp in _ssmbench_imports(_under("ssmbench.data.folder"))
           if imp.target not in CORE and not _is(imp.target, "ssmbench.data.folder")]
    assert not bad


def test_the_reader_imports_neither_the_builder_nor_the_hub():
    read = _under("ssmbench.data.read")
    assert {"ssmbench.data.read.loader", "ssmbench.data.read.streaming"} <= set(read)
    assert not _violations(read, ("ssmbench.data.make", "ssmbench.data.hub"))
    bad = [f"{MODULES[m].relative_to(REPO)}:{imp.line} imports {imp.target}" for m, imp in _ssmbench_imports(read)
           if imp.target not in CORE and not _is(imp.target, "ssmbench.data.read")
           and not _is(imp.target, "ssmbench.data.folder")]
    assert not bad


HARNESS = "ssmbench.harness"
HARNESS_FLOORS = [("runtime",), ("config", "feed", "metrics"), ("models", "results"), ("training",), ("",)]
"""Bottom to top; "" is the harness's own top (the entry points)."""
MAX_TOP_MODULES = 12
COMPAT = ("ssmbench.harness.backbone", "ssmbench.harness.optim_groups")
"""Paths of docs/models.md kept for plug-ins; nothing in ssmbench imports them."""


def _room(module: str) -> str:
    """The harness sub-package a harness module lives in ("" for the modules at the harness's top)."""
    rest = module.removeprefix(HARNESS).lstrip(".")
    head, dot, _ = rest.partition(".")
    return head if dot or MODULES[module].name == "__init__.py" and head else ""


def _floor(room: str) -> int:
    return next(i for i, rooms in enumerate(HARNESS_FLOORS) if room in rooms)


def _harness_breaches(imports: dict[str, list[Import]]) -> list[str]:
    bad = []
    for m in _under(HARNESS):
        here = _room(m)
        for imp in imports[m]:
            if imp.target not in MODULES or not _is(imp.target, HARNESS) or imp.target == HARNESS:
                continue
            there = _room(imp.target)
            if there != here and _floor(there) >= _floor(here):
                bad.append(f"{MODULES[m].relative_to(REPO)}:{imp.line} ({here or 'top'}) imports {imp.target} "
                           f"({there or 'top'})")
    return bad


def test_the_harness_is_in_floors_that_import_downwards():
    rooms = {_room(m) for m in _under(HARNESS)}
    assert rooms == {room for floor in HARNESS_FLOORS for room in floor}, rooms  # every sub-package has a floor
    assert not _harness_breaches(IMPORTS)


def test_the_harness_top_holds_few_modules():
    top = sorted(p.name for p in (REPO / "ssmbench/harness").glob("*.py"))
    assert "__init__.py" in top and len(top) <= MAX_TOP_MODULES, top


def test_nothing_imports_the_kept_documented_paths():
    assert set(COMPAT) <= set(MODULES)
    assert not _violations([m for m in MODULES if m not in COMPAT], COMPAT)


def test_the_floor_rule_sees_a_breach():
    """An upward import (the config importing the trainer) and a sideways one (results importing a model module)
    are caught, under `if TYPE_CHECKING` too; a downward one is not."""
    for source, target in [("ssmbench.harness.config.run_config", "ssmbench.harness.training.trainer"),
                           ("ssmbench.harness.results.run_folder", "ssmbench.harness.models.build")]:
        imports = {**IMPORTS, source: [*IMPORTS[source], Import(target, False, 1, True)]}
        assert _harness_breaches(imports), (source, target)
    down = "ssmbench.harness.training.trainer"
    assert not _harness_breaches({**IMPORTS, down: [*IMPORTS[down], Import("ssmbench.harness.runtime.threads",
                                                                             True, 1)]})


def test_the_harness_reads_folders_without_the_hub():
    assert not _violations(_under("ssmbench.harness"), ("ssmbench.data.hub",))


def test_the_rules_see_a_breach():
    """The checks above on a made-up graph: a reader importing the builder is caught, a reader importing the
    contract is not."""
    real = IMPORTS["ssmbench.data.read.loader"]
    IMPORTS["ssmbench.data.read.loader"] = [*real, Import("ssmbench.data.make.shards", False, 1)]
    try:
        with pytest.raises(AssertionError):
            test_the_reader_imports_neither_the_builder_nor_the_hub()
    finally:
        IMPORTS["ssmbench.data.read.loader"] = real
    IMPORTS["ssmbench.data.folder.manifest"] = [*IMPORTS["ssmbench.data.folder.manifest"],
                                                Import("ssmbench.data.read.loader", False, 1)]
    try:
        with pytest.raises(AssertionError):
            test_the_folder_contract_imports_only_the_core()
    finally:
        IMPORTS["ssmbench.data.folder.manifest"] = _imports("ssmbench.data.folder.manifest")
