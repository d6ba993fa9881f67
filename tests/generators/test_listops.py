"""LRA ListOps (`listops`): one label at the root's `]`, same sampler and schema as `listops_subtrees`."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from scipy import stats

import listops_oracle as oracle  # tests/generators is on pytest's pythonpath
from ssmbench.errors import ConfigError
from ssmbench.generators.listops import ListOps, ListOpsConfig
from ssmbench.generators.listops_subtrees import ListOpsSubtrees, ListOpsSubtreesConfig
from ssmbench.seeding import keys_for

TASK = ListOps()
SMALL = ListOpsConfig(min_length=100, max_length=400)  # LRA tree parameters, a short window




def keys(config, n, task=TASK):
    return keys_for(task.name, task.version, config.to_dict(), 0, "train", 0, n)


def check_rows(config, data):
    for i in range(data["inputs"].shape[0]):
        tokens = oracle.decode(data["inputs"][i])
        n = len(tokens)
        assert config.min_length < n < config.max_length and int(data["lengths"][i]) == n
        root = oracle.parse(tokens)
        rows = oracle.subtree_rows(root)
        want = np.full(data["targets"].shape[1], -100)
        want[n - 1] = root.value
        assert np.array_equal(data["targets"][i], want), "exactly one label, at the root's ]"
        assert int(data["root_value"][i]) == root.value == rows[-1][1] and rows[-1][0] == n - 1
        closes = [r[0] for r in rows]
        assert np.flatnonzero(data["node_height"][i] >= 0).tolist() == closes
        assert data["node_height"][i][closes].tolist() == [r[3] for r in rows]
        assert [oracle.OPS[o] for o in data["node_op"][i][closes]] == [r[4] for r in rows]


def test_lra_preset_handful():
    cfg = TASK.presets["lra"]
    assert (cfg.min_length, cfg.max_length, cfg.max_args, cfg.max_depth, cfg.non_leaf_prob) == (500, 2000, 10, 10, 0.25)
    spec = TASK.spec(cfg)
    assert spec.seq_len == spec.l_output == 2048 and spec.d_output == 10 and spec.causal
    data = TASK.generate(cfg, keys(cfg, 4))
    assert data["inputs"].shape == (4, 2048)
    check_rows(cfg, data)
    for i in range(4):
        got = TASK.oracle(cfg, {"inputs": data["inputs"][i]})
        for name in ("targets", "node_height", "node_op", "lengths", "root_value"):
            assert np.array_equal(got[name], data[name][i]), name


def test_small_window_labels_and_padding_follow_window():
    data = TASK.generate(SMALL, keys(SMALL, 40))
    assert data["inputs"].shape == (40, 512)
    check_rows(SMALL, data)
    assert TASK.spec(dataclasses.replace(SMALL, max_length=1000)).seq_len == 1024


def test_same_sampler_as_subtrees():
    """Same config fields and keys give the same expressions; only label placement differs."""
    sub = ListOpsSubtreesConfig(**SMALL.to_dict())
    k = keys(SMALL, 10)
    a, b = TASK.generate(SMALL, k), ListOpsSubtrees().generate(sub, k)
    for name in a:
        if name != "targets":
            assert np.array_equal(a[name], b[name]), name
    root = (np.arange(512) == (a["lengths"][:, None] - 1))
    assert np.array_equal(np.where(root, b["targets"], -100), a["targets"])


def test_root_values_and_lengths_match_slow_sampler():
    rng = random.Random(7)
    slow = [oracle.slow_sample(SMALL, rng)[0] for _ in range(300)]
    data = TASK.generate(SMALL, keys(SMALL, 300))
    slow_values = np.bincount([oracle.parse(t).value for t in slow], minlength=10)
    kernel_values = np.bincount(data["root_value"], minlength=10)
    assert stats.chi2_contingency(np.vstack([kernel_values, slow_values])).pvalue > 0.001
    assert stats.ks_2samp(data["lengths"].astype(int), [len(t) for t in slow]).pvalue > 0.001


def test_bad_options_fail_clearly():
    with pytest.raises(ConfigError, match="empty length window"):
        ListOpsConfig(min_length=1998, max_length=1999)
    with pytest.raises(ConfigError, match="no expression is longer than"):
        ListOpsConfig(max_depth=2)
