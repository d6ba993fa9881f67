"""Contract suite over every registered task (spec, dtypes, determinism, key invariance, splits, configs) and the
task contract itself: every hook the core reads is declared on `ssmbench.api.Task`, and nothing else is accepted."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from ssmbench import api, registry
from ssmbench.config import apply_overrides
from ssmbench.errors import ConfigError, SsmbenchError
from ssmbench.registry import get_task
from ssmbench.seeding import keys_for
from support import all_equal, draw, rows, tiny_config


def test_spec_matches_generate(task_name):
    task, config = get_task(task_name), tiny_config(task_name)
    spec = task.spec(config)
    out = draw(task_name, config, stop=3)
    assert set(out) == set(spec.fields)
    for name, field in spec.fields.items():
        assert out[name].dtype == np.dtype(field.dtype), name
        assert out[name].shape == (3, *field.shape), name
    assert spec.l_output <= spec.seq_len


def test_same_keys_same_bytes_and_piecewise_generation(task_name):
    config = tiny_config(task_name)
    whole = draw(task_name, config, stop=6)
    again = draw(task_name, config, stop=6)
    assert all_equal(whole, again)
    pieces = [draw(task_name, config, start=a, stop=b) for a, b in ((0, 1), (1, 4), (4, 6))]
    joined = {k: np.concatenate([p[k] for p in pieces]) for k in whole}
    assert all_equal(whole, joined)


def test_splits_and_seeds_give_different_samples(task_name):
    config = tiny_config(task_name)
    train, val, test = (draw(task_name, config, split=s, stop=3) for s in ("train", "val", "test"))
    other_seed = draw(task_name, config, stop=3, seed=1)
    for other in (val, test, other_seed):
        assert not np.array_equal(train["inputs"], other["inputs"])


def test_keys_are_disjoint_across_splits(task_name):
    task, config = get_task(task_name), tiny_config(task_name)
    keys = [keys_for(task.name, task.version, config.to_dict(), 0, s, 0, 2000) for s in ("train", "val", "test")]
    allkeys = np.concatenate(keys)
    assert len(np.unique(allkeys)) == len(allkeys)


def test_oracle_agrees_with_generated_targets(task_name):
    task, config = get_task(task_name), tiny_config(task_name)
    for row in rows(draw(task_name, config, stop=4)):
        for name, want in task.oracle(config, row).items():
            np.testing.assert_allclose(np.asarray(row[name], np.float64), np.asarray(want, np.float64),
                                       rtol=1e-6, atol=1e-6, err_msg=name)


def test_targets_are_in_range_and_ignore_index_marks_only_unscored_positions(task_name):
    task, config = get_task(task_name), tiny_config(task_name)
    spec = task.spec(config)
    targets = draw(task_name, config, stop=3)["targets"]
    if spec.target_kind == "regress":
        assert spec.ignore_index is None and targets.dtype == np.float32 and np.isfinite(targets).all()
        return
    assert np.issubdtype(targets.dtype, np.integer)
    scored = targets != spec.ignore_index if spec.ignore_index is not None else np.ones(targets.shape, bool)
    assert scored.any()
    assert ((targets[scored] >= 0) & (targets[scored] < spec.d_output)).all()
    if spec.ignore_index is not None:  # the ignore value is outside the classes, so it can never be a label
        assert not 0 <= spec.ignore_index < spec.d_output
        assert np.iinfo(targets.dtype).min <= spec.ignore_index  # representable in the stored dtype


def test_a_wrong_value_is_reported_under_its_own_field(task_name):
    """-5 is invalid for every config field of every task; the ConfigError must name that field and the value."""
    config = tiny_config(task_name)
    for f in dataclasses.fields(config):
        with pytest.raises(ConfigError) as err:
            dataclasses.replace(config, **{f.name: -5})
        assert err.value.field == f.name, f"{task_name}.{f.name}: the error names {err.value.field!r}"
        assert "-5" in str(err.value), str(err.value)


@pytest.mark.parametrize("task_name,changes,field", [
    ("shift", {"L": 4, "num_shifts": 8}, "L"),
    ("select", {"M": 0}, "M"),
    ("mips", {"causal": "yes"}, "causal"),
    ("listops", {"min_length": 200, "max_length": 100}, "min_length"),
    ("listops_subtrees", {"pad_to": 64}, "pad_to"),
    ("pathfinder", {"size": 32, "seed_distance": 8}, "seed_distance"),
    ("mqar", {"L": 24, "num_kv_pairs": 8}, "num_kv_pairs"),
    ("mqar", {"L": 63}, "L"),
    ("mqar", {"vocab_size": 16, "num_kv_pairs": 8}, "vocab_size"),
])
def test_cross_field_errors_name_the_field_to_change(task_name, changes, field):
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(tiny_config(task_name), **changes)
    assert err.value.field == field


def test_unknown_override_key_is_a_config_error_with_a_suggestion(task_name):
    config = tiny_config(task_name)
    first = dataclasses.fields(config)[0].name
    with pytest.raises(ConfigError, match=f"did you mean '{first}'") as err:
        apply_overrides(config, {first + "x": 1})
    assert err.value.field == first + "x"


def test_presets_are_valid_configs_of_the_task(task_name):
    task = get_task(task_name)
    assert task.default_preset in task.presets
    for name, preset in task.presets.items():
        assert isinstance(preset, task.Config), name
        task.spec(preset)


def test_advertised_cli_presets_exist():
    assert {"4096", "512"} <= set(get_task("shift").presets)
    assert {"128", "256", "512"} <= set(get_task("pathfinder").presets)
    assert {"lra"} <= set(get_task("listops").presets) and {"dlr"} <= set(get_task("listops_subtrees").presets)


# ------------------------------------------------------------------------------------------- the task contract

def test_registered_tasks_define_only_declared_hooks(task_name):
    assert api.undeclared_names(registry.tasks.get(task_name)) == []


def test_tasks_are_final_with_at_most_one_abstract_base_between_them_and_task(task_name):
    """ssmbench/api.py's rule: a concrete task is `@typing.final`; between it and `Task` stands at most one class,
    abstract (the atomic tasks' `AtomicTask`)."""
    cls = registry.tasks.get(task_name)
    assert getattr(cls, "__final__", False), f"{cls.__qualname__} is not @typing.final"
    between = [k for k in cls.__mro__[1:] if issubclass(k, api.Task) and k is not api.Task]
    assert len(between) <= 1 and all(inspect.isabstract(k) for k in between), between


def test_every_hook_has_a_default_and_a_docstring():
    """Each public name of Task is either abstract (spec, generate, oracle, the identity ClassVars) or has a default;
    each carries a docstring (methods: __doc__; class attributes: the string literal after them)."""
    source = ast.parse(inspect.getsource(api.Task))
    body = source.body[0].body
    documented = {node.target.id for node, nxt in zip(body, body[1:], strict=False) if isinstance(node, ast.AnnAssign)
                  and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)}
    required = {"name", "version", "Config", "presets", "default_preset", "default_n", "spec", "generate", "oracle"}
    for hook in api.declared_hooks():
        value = inspect.getattr_static(api.Task, hook, None)
        if callable(value):
            assert inspect.getdoc(value), f"Task.{hook} has no docstring"
            assert getattr(value, "__isabstractmethod__", False) == (hook in required), hook
        else:
            assert hook in documented, f"Task.{hook} has no docstring"
            assert (hook in vars(api.Task)) != (hook in required), f"Task.{hook}: default or required, not both"
    assert set(api.Task.__abstractmethods__) == {"spec", "generate", "oracle"}


def test_the_core_reads_task_hooks_directly():
    """No getattr/hasattr on a task object in the core: a hook the core reads must be declared (and typo-proof)."""
    root = Path(api.__file__).parent
    bad = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and node.args
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in ("task", "task_obj", "cls")):
                bad.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert not bad


def test_a_misspelt_hook_is_refused_when_the_task_is_loaded():
    with pytest.raises(SsmbenchError, match="'statistcs', which is not a hook") as err:
        registry.tasks.get("plugin_tasks:MisspeltHook")
    assert "did you mean 'statistics'" in err.value.hint
    assert api.undeclared_names(__import__("plugin_tasks").MisspeltHook) == ["statistcs"]
    with pytest.raises(SsmbenchError, match="not a subclass of ssmbench.api.Task"):
        registry.tasks.get("plugin_tasks:ResiduesConfig")


def test_a_training_rule_on_the_task_or_a_malformed_policy_is_refused_when_the_task_is_loaded():
    with pytest.raises(SsmbenchError, match="'groups', which is a training rule") as err:
        registry.tasks.get("plugin_tasks:GroupsOnTheTask")
    assert "policy = TrainingPolicy(groups=...)" in err.value.hint
    with pytest.raises(SsmbenchError, match="has policy .*, not a ssmbench.api.TrainingPolicy"):
        registry.tasks.get("plugin_tasks:PolicyAsDict")


def test_a_task_that_declares_no_policy_gets_the_default_one():
    from plugin_tasks import Residues

    policy = registry.tasks.get("plugin_tasks:Residues").policy
    assert "policy" not in vars(Residues) and policy == api.TrainingPolicy()
    config = Residues.presets["small"]
    assert (policy.reads_folder, policy.quick_section("residues"), policy.paper_rows("residues", config),
            dict(policy.groups), policy.breakdowns(config), policy.paper_config(config)) == (
        False, "residues", "residues", {}, {}, config)


@pytest.fixture
def plugin_registry(monkeypatch):
    """The plug-in tasks registered as entry points would register them (name -> "module:Class")."""

    class EntryPoint:
        def __init__(self, name: str, value: str) -> None:
            self.name, self.value = name, value

    points = [EntryPoint("residues", "plugin_tasks:Residues"),
              EntryPoint("distinct_residues", "plugin_tasks:DistinctResidues")]
    monkeypatch.setattr(registry, "entry_points", lambda group: points if group == "ssmbench.tasks" else [])
    monkeypatch.setattr(registry.tasks, "_entries", None)
    monkeypatch.setattr(registry.tasks, "_cache", {})
    yield
    registry.tasks._entries = None


def test_a_minimal_plugin_builds_with_every_hook_at_its_default(plugin_registry, tmp_path):
    from plugin_tasks import ResiduesConfig
    from ssmbench.data.hub.verify import verify_dataset
    from ssmbench.data.make.generate import generate_dataset

    result = generate_dataset("residues", ResiduesConfig(), out=tmp_path, n=20, samples_per_shard=8)
    manifest = result.manifest
    assert manifest["statistics"] == {"train": {}, "val": {}, "test": {}}
    assert manifest["storage"]["samples_per_shard"] == 8 and "deduplication" not in manifest
    card = (result.path / "README.md").read_text()
    assert "task_categories: [other]" in card and "a minimal plug-in task" in card
    assert not (result.path / "preview.png").exists()
    assert verify_dataset(result.path, deep=True).ok


def test_a_plugin_brings_its_own_deduplication(plugin_registry, tmp_path):
    """Residues modulo 25 repeat among the candidates; the default rules keep the first of each, in key order."""
    import h5py

    from plugin_tasks import ResiduesConfig
    from ssmbench.data.make.generate import generate_dataset

    config = ResiduesConfig(modulus=25)
    result = generate_dataset("distinct_residues", config, out=tmp_path, n=20, samples_per_shard=8)
    stored = []
    for split in ("train", "val", "test"):
        for shard in result.manifest["splits"][split]["shards"]:
            with h5py.File(result.path / shard["path"], "r") as h5:
                stored += list(zip(h5["targets"][...].tolist(), h5["candidate_index"][...].tolist(), strict=True))
    # independent oracle: walk the candidate keys in order, keep each residue the first time it appears
    keys = keys_for("distinct_residues", "1", config.to_dict(), 0, "candidates", 0, 200)
    want, seen = [], set()
    for c, key in enumerate(keys.tolist()):
        if key % 25 not in seen:
            seen.add(key % 25)
            want.append((key % 25, c))
    assert stored == want[:20]
    report = result.manifest["deduplication"]
    assert report["survivors"] == 20 and report["dropped_duplicates"] == want[19][1] + 1 - 20 > 0
    assert json.loads(json.dumps(report)) == report
