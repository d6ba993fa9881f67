"""Contract suite over every registered task: spec, dtypes, determinism, key invariance, splits, configs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ssmbench.errors import ConfigError
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


def test_ignore_index_only_where_targets_are_absent(task_name):
    task, config = get_task(task_name), tiny_config(task_name)
    spec = task.spec(config)
    targets = draw(task_name, config, stop=3)["targets"]
    if spec.ignore_index is None:
        assert not (targets == -100).any() if spec.target_kind == "classify" else np.isfinite(targets).all()
    else:
        valid = targets != spec.ignore_index
        assert valid.any()
        assert ((targets[valid] >= 0) & (targets[valid] < spec.d_output)).all()


def test_invalid_config_names_the_field(task_name):
    task = get_task(task_name)
    config = tiny_config(task_name)
    first = dataclasses.fields(config)[0].name
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(config, **{first: -5})
    assert err.value.field in {f.name for f in dataclasses.fields(config)}
    with pytest.raises(ConfigError):
        from ssmbench.config import apply_overrides

        apply_overrides(config, {"no_such_field": 1})
    assert task.default_preset in task.presets


def test_presets_are_valid_configs_of_the_task(task_name):
    task = get_task(task_name)
    for name, preset in task.presets.items():
        assert isinstance(preset, task.Config), name
        task.spec(preset)


def test_advertised_cli_presets_exist():
    assert set(get_task("shift").presets) >= {"4096", "512"}
    for name in ("pathfinder",):
        try:
            task = get_task(name)
        except Exception:
            continue
        assert {"128", "256", "512"} <= set(task.presets)
