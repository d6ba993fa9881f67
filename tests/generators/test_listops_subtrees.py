"""ListOps-Subtrees: labels re-derived by an independent parser, reference rows, distributions, determinism, errors."""

from __future__ import annotations

import csv
import dataclasses
import random
from pathlib import Path

import numba
import numpy as np
import pytest
from scipy import stats

import listops_oracle as oracle  # tests/generators is on pytest's pythonpath
import support
from ssmbench.errors import ConfigError, VerificationError
from ssmbench.generators import _listops_sampler
from ssmbench.generators.listops_subtrees import ListOpsSubtrees, ListOpsSubtreesConfig
from ssmbench.seeding import keys_for

REFERENCE = support.REFERENCE / "listops_subtrees"
TASK = ListOpsSubtrees()
SMALL = ListOpsSubtreesConfig(min_length=200, max_length=600)  # DLR tree parameters, a short window
PAPER_IDS = [12, 3, 7, 13, 14, 4, 2, 7, 15, 9, 4, 15, 5, 6, 15]  # [MAX 2 6 [MED [SM 3 1 6 ] 8 3 ] 4 5 ]




def keys(config, n, split="train", start=0):
    return keys_for(TASK.name, TASK.version, config.to_dict(), 0, split, start, start + n)


def check_rows(config, data, label_all=True, generated=True):
    """Every stored field of every row against the independent parser (tests/generators/listops_oracle.py)."""
    t = _listops_sampler.pad_length(config)
    for i in range(data["inputs"].shape[0]):
        tokens = oracle.decode(data["inputs"][i])
        n = len(tokens)
        assert config.min_length < n < config.max_length and int(data["lengths"][i]) == n
        assert not data["inputs"][i, n:].any(), "padding must be <pad> = 0"
        root = oracle.parse(tokens)
        rows = oracle.subtree_rows(root)
        want_t, want_h, want_o = (np.full(t, v, np.int64) for v in (-100, -1, -1))
        for pos, value, _size, height, op in rows:
            want_t[pos] = value if label_all or pos == n - 1 else -100
            want_h[pos] = height
            want_o[pos] = oracle.OPS.index(op)
        assert np.array_equal(data["targets"][i], want_t)
        assert np.array_equal(data["node_height"][i], want_h)
        assert np.array_equal(data["node_op"][i], want_o)
        assert int(data["root_value"][i]) == root.value and tokens[-1] == "]"
        assert data["roots_drawn"][i] >= 1 and (data["candidate_index"][i] == -1 or not generated)


def test_reference_rows_reproduced():
    support.require_reference(REFERENCE)
    csv.field_size_limit(1 << 30)
    dlr = TASK.presets["dlr"]
    count = 0
    for split in ("train", "val", "test"):
        with open(REFERENCE / f"subtrees_{split}.tsv", newline="") as fh:
            for ref in csv.DictReader(fh, delimiter="\t"):
                tokens = ref["Source"].split()
                rows = oracle.subtree_rows(oracle.parse(tokens))
                cols = [[int(x) for x in ref[c].split()] for c in
                        ("SubTreeInds", "SubTreeEvals", "SubTreeLengths", "SubTreeHeights")]
                assert [list(c) for c in zip(*[r[:4] for r in rows], strict=True)] == cols
                assert [r[4] for r in rows] == ref["SubTreeOps"].split()
                # the task's own oracle on the reference expression, encoded with the frozen vocabulary
                ids = np.zeros(8192, np.uint8)
                ids[:len(tokens)] = [oracle.TOKENS.index(tok) for tok in tokens]
                got = TASK.oracle(dlr, {"inputs": ids})
                labelled = np.flatnonzero(got["targets"] != -100)
                assert labelled.tolist() == cols[0] and got["targets"][labelled].tolist() == cols[1]
                assert got["node_height"][labelled].tolist() == cols[3]
                assert [oracle.OPS[o] for o in got["node_op"][labelled]] == ref["SubTreeOps"].split()
                assert int(got["root_value"]) == int(ref["Target"]) and int(got["lengths"]) == len(tokens)
                count += 1
    assert count == 14


def test_paper_example_and_vocabulary():
    spec = TASK.spec(TASK.presets["dlr"])
    vocab = spec.fields["inputs"].attrs["vocab"]
    assert vocab == oracle.TOKENS and spec.d_input == 16 and spec.d_output == 10 and spec.seq_len == 8192
    assert spec.fields["node_op"].attrs["operators"] == ["MIN", "MAX", "MED", "SM"]
    assert " ".join(vocab[i] for i in PAPER_IDS) == "[MAX 2 6 [MED [SM 3 1 6 ] 8 3 ] 4 5 ]"
    cfg = ListOpsSubtreesConfig(min_length=10, max_length=20, max_depth=4)
    got = TASK.oracle(cfg, {"inputs": np.array(PAPER_IDS + [0] * 241, np.uint8)})
    labelled = np.flatnonzero(got["targets"] != -100)
    assert labelled.tolist() == [8, 11, 14] and got["targets"][labelled].tolist() == [0, 3, 6]
    assert got["node_height"][labelled].tolist() == [1, 2, 3] and got["node_op"][labelled].tolist() == [3, 2, 1]
    with pytest.raises(VerificationError, match="malformed"):
        TASK.oracle(cfg, {"inputs": np.array(PAPER_IDS[:-1] + [0] * 242, np.uint8)})


def test_spec_matches_generate_and_padding_follows_window():
    cfg = ListOpsSubtreesConfig(min_length=500, max_length=2000)
    spec = TASK.spec(cfg)
    assert spec.seq_len == spec.l_output == 2048 and spec.causal and spec.ignore_index == -100
    assert TASK.spec(TASK.presets["short"]).seq_len == 2048
    assert TASK.spec(dataclasses.replace(cfg, pad_to=1999)).seq_len == 1999
    data = TASK.generate(cfg, keys(cfg, 3))
    assert set(data) == set(spec.fields)
    for name, f in spec.fields.items():
        assert data[name].dtype == np.dtype(f.dtype) and data[name].shape == (3, *f.shape), name


def test_every_label_height_and_operator_recomputed():
    data = TASK.generate(SMALL, keys(SMALL, 48))
    check_rows(SMALL, data)
    assert TASK.generate(SMALL, keys(SMALL, 0))["inputs"].shape == (0, 768)


def test_dlr_preset_handful():
    cfg = TASK.presets["dlr"]
    data = TASK.generate(cfg, keys(cfg, 3))
    assert data["inputs"].shape == (3, 8192)
    check_rows(cfg, data)
    for i in range(3):  # the task's own oracle agrees too (what `verify --deep` runs)
        got = TASK.oracle(cfg, {"inputs": data["inputs"][i]})
        for name in ("targets", "node_height", "node_op", "lengths", "root_value"):
            assert np.array_equal(got[name], data[name][i]), name


def test_determinism_and_worker_invariance():
    k = keys(SMALL, 40)
    whole = TASK.generate(SMALL, k)
    again = TASK.generate(SMALL, k)
    pieces = [TASK.generate(SMALL, k[a:b]) for a, b in ((0, 1), (1, 17), (17, 40))]
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single = TASK.generate(SMALL, k)
    finally:
        numba.set_num_threads(threads)
    for name in whole:
        assert np.array_equal(whole[name], again[name])
        assert np.array_equal(whole[name], np.concatenate([p[name] for p in pieces]))
        assert np.array_equal(whole[name], single[name])
    other = TASK.generate(SMALL, keys(SMALL, 40, split="val"))
    assert not np.array_equal(whole["inputs"], other["inputs"])


def per_tree_counts(trees, what, size):
    """(n_trees, size) counts of a per-node quantity: label, height or operator index."""
    out = np.zeros((len(trees), size), np.int64)
    for i, rows in enumerate(trees):
        for r in rows:
            out[i, {"label": r[1], "height": r[3], "op": oracle.OPS.index(r[4])}[what]] += 1
    return out


def permutation_chi2(a, b, n_perm=4000, seed=0):
    """p-value of the 2 x K chi-square statistic, permuting whole trees between the groups.

    Nodes of one tree are dependent (a parent's value and height depend on its children), so a chi-square test
    on pooled node counts would be anti-conservative; trees are independent, so permuting them gives a valid test.
    """
    x = np.vstack([a, b]).astype(float)
    x = x[:, x.sum(0) > 0]
    total = x.sum(0)
    rng = np.random.default_rng(seed)
    masks = np.vstack([np.arange(len(x)) < len(a)] + [rng.permutation(len(x)) < len(a) for _ in range(n_perm)])
    first = masks @ x
    second = total - first
    n1, n2 = first.sum(1, keepdims=True), second.sum(1, keepdims=True)
    expect1, expect2 = n1 * total / (n1 + n2), n2 * total / (n1 + n2)
    chi2 = ((first - expect1) ** 2 / expect1 + (second - expect2) ** 2 / expect2).sum(1)
    return (1 + np.sum(chi2[1:] >= chi2[0])) / (1 + n_perm)


def compare(kernel_data, slow_trees, slow_tries, max_depth):
    kernel_trees = [oracle.subtree_rows(oracle.parse(oracle.decode(row))) for row in kernel_data["inputs"]]
    p = {"length": stats.ks_2samp(kernel_data["lengths"].astype(int), [len(t) for t, _ in slow_trees]).pvalue}
    slow_rows = [oracle.subtree_rows(oracle.parse(t)) for t, _ in slow_trees]
    for what, size in (("label", 10), ("height", max_depth), ("op", 4)):
        p[what] = permutation_chi2(per_tree_counts(kernel_trees, what, size), per_tree_counts(slow_rows, what, size))
    # acceptance: roots drawn per sample are geometric; compare the totals (two-sample test on the rates)
    k_tries, s_tries = kernel_data["roots_drawn"].astype(int), np.array(slow_tries)
    p["roots"] = stats.mannwhitneyu(k_tries, s_tries).pvalue
    return p


@pytest.fixture(scope="module")
def slow_samples():
    rng = random.Random(20240601)
    return [oracle.slow_sample(SMALL, rng) for _ in range(300)]


def test_distributions_match_slow_sampler(slow_samples):
    data = TASK.generate(SMALL, keys(SMALL, 300))
    p = compare(data, slow_samples, [t for _, t in slow_samples], SMALL.max_depth)
    assert min(p.values()) > 0.001, p
    # the tests have power: a slightly different process is caught
    shifted = dataclasses.replace(SMALL, max_args=7)
    q = compare(TASK.generate(shifted, keys(shifted, 300)), slow_samples, [t for _, t in slow_samples],
                SMALL.max_depth)
    assert min(q.values()) < 0.001, q


def test_lengths_and_acceptance_match_exact_law():
    """Kernel lengths and rejection counts against the exact length law of the process (a DP, not a sampler)."""
    data, outcomes = _listops_sampler.sample_batch(SMALL, keys(SMALL, 2000), True)
    exact = _listops_sampler.root_outcomes(SMALL)
    pmf = _listops_sampler.length_pmf(9, 15, 0.25, 600)[201:]
    edges = np.linspace(201, 600, 21).astype(int)
    expected = np.array([pmf[a - 201:b - 201].sum() for a, b in zip(edges[:-1], edges[1:], strict=True)])
    observed = np.histogram(data["lengths"], bins=edges)[0]
    assert stats.chisquare(observed, expected / expected.sum() * observed.sum()).pvalue > 0.001
    roots = outcomes.sum() + len(outcomes)
    fates = np.append(outcomes.sum(0), len(outcomes))
    probs = np.array([exact["single_digit"], exact["too_short"], exact["too_long"], exact["accepted"]])
    assert stats.chisquare(fates, probs * roots).pvalue > 0.001
    assert np.array_equal(data["roots_drawn"], outcomes.sum(1) + 1)


def test_dlr_exact_statistics_match_reference_figures():
    """The exact law reproduces the figures measured on the reference generator (75 / 24 / 0.6 % and 0.38 %, median ~7520)."""
    exact = _listops_sampler.root_outcomes(TASK.presets["dlr"])
    assert exact["single_digit"] == pytest.approx(0.75) and abs(exact["too_short"] - 0.242) < 0.005
    assert abs(exact["too_long"] - 0.006) < 0.001 and abs(exact["accepted"] - 0.0038) < 0.0002
    assert abs(exact["median_length"] - 7520) < 20


@pytest.mark.parametrize("changes, field, words", [
    ({"min_length": 600, "max_length": 601}, "min_length", "empty length window"),
    ({"min_length": 600, "max_length": 600}, "min_length", "max_length to at least"),
    ({"max_depth": 3, "max_args": 3}, "min_length", "no expression is longer than 17"),
    ({"max_args": 2, "min_length": 4, "max_length": 7}, "min_length", "is hit by 0 of root trees"),
    ({"non_leaf_prob": 0.0}, "min_length", "widen the window"),
    ({"pad_to": 500}, "pad_to", "max_length - 1 = 599"),
    ({"non_leaf_prob": 1.5}, "non_leaf_prob", "probability"),
    ({"max_args": 1}, "max_args", "[2, 16]"),
    ({"min_length": 0}, "min_length", ">= 1"),
    ({"max_depth": "3"}, "max_depth", "integer"),
])
def test_bad_options_fail_clearly(changes, field, words):
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(SMALL, **changes)
    assert err.value.field == field and words in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_statistics_sum_over_blocks_and_render():
    k = keys(SMALL, 30)
    a, b = TASK.generate(SMALL, k[:11]), TASK.generate(SMALL, k[11:])
    whole = TASK.statistics(SMALL, TASK.generate(SMALL, k))
    parts = [TASK.statistics(SMALL, x) for x in (a, b)]
    for name, value in whole.items():
        assert np.array_equal(value, parts[0][name] + parts[1][name]), name
    assert whole["samples"][0] == 30 and whole["length_hist"].sum() == 30
    assert whole["label_counts"].sum() == whole["labelled_positions"][0] == whole["height_counts"].sum()
    md = TASK.statistics_markdown(SMALL, {"train": {k: v.tolist() for k, v in whole.items()},
                                          "val": {k: v.tolist() for k, v in parts[0].items()}})
    assert "| samples | 30 | 11 |" in md and "Length histogram" in md and "| MED |" in md


def test_end_to_end_through_shards(tmp_path):
    """generate -> shards -> read back: worker invariance of the whole build, labels, candidate order, statistics."""
    import h5py

    from ssmbench.data.make.generate import generate_dataset

    builds = [generate_dataset(TASK.name, SMALL, tmp_path / str(w), n=60, split=None, seed=0, workers=w)
              for w in (1, 2)]
    m = builds[0].manifest
    assert m["content_digest"] == builds[1].manifest["content_digest"]
    assert sum(v["num_samples"] for v in m["splits"].values()) == 60
    order = []
    for split in ("train", "val", "test"):
        for shard in m["splits"][split]["shards"]:
            with h5py.File(Path(builds[0].path) / shard["path"], "r") as f:
                data = {name: f[name][()] for name in TASK.spec(SMALL).fields}
                assert f["inputs"].attrs["vocab"] is not None
            check_rows(SMALL, data, generated=False)
            order += data["candidate_index"].tolist()
        assert m["statistics"][split]["samples"] == [m["splits"][split]["num_samples"]]
    assert order == sorted(order) and len(set(order)) == 60
    assert "Measured statistics" in (Path(builds[0].path) / "README.md").read_text()


def test_card_renders_with_an_empty_split(tmp_path):
    """A build too small to fill val/test (no statistics recorded there) still finalizes and renders its card."""
    from ssmbench.data.make.generate import generate_dataset

    result = generate_dataset(TASK.name, SMALL, tmp_path, n=10, seed=0)
    assert result.manifest["splits"]["val"]["num_samples"] == 0
    assert "Measured statistics" in (result.path / "README.md").read_text()
