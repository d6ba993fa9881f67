"""De-duplication seam of the ListOps tasks: the survivor rule, hash confirmation, hashes of real candidates."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest

from ssmbench.generators import _listops_dedup as dedup
from ssmbench.generators.listops import ListOps, ListOpsConfig
from ssmbench.generators.listops_subtrees import ListOpsSubtrees, ListOpsSubtreesConfig
from ssmbench.seeding import keys_for

PAPER_IDS = [12, 3, 7, 13, 14, 4, 2, 7, 15, 9, 4, 15, 5, 6, 15]  # [MAX 2 6 [MED [SM 3 1 6 ] 8 3 ] 4 5 ]


def brute_force(expr, tmpl, needed):
    """The rule as data_cards/listops_subtrees.md words it: visit in index order, drop if expression or template equals a kept one."""
    kept = []
    for c in range(len(expr)):
        if any(expr[c] == expr[k] or tmpl[c] == tmpl[k] for k in kept):
            continue
        kept.append(c)
    return kept[:needed]


def as_hashes(expr, tmpl):
    """Synthetic (n, 4) hashes from small integer labels (high words differ from low words on purpose)."""
    e, t = np.asarray(expr, np.uint64), np.asarray(tmpl, np.uint64)
    return np.stack([e, e * np.uint64(3) + np.uint64(1), t, t ^ np.uint64(0xFF)], axis=1)


def test_rule_lowest_index_survives():
    expr = [5, 6, 5, 7, 8, 6, 9]   # 2 repeats 0's expression, 5 repeats 1's
    tmpl = [1, 2, 1, 2, 3, 2, 3]   # 3 repeats 1's template, 6 repeats 4's
    h = as_hashes(expr, tmpl)
    assert dedup.select_survivors(h, 10).tolist() == [0, 1, 4]
    assert dedup.select_survivors(h, 2).tolist() == [0, 1]
    assert dedup.select_survivors(h[::-1], 10).tolist() == [0, 1, 4]  # originals 6, 5, 2: the order decides
    fate = dedup.classify_candidates(h)
    assert fate.tolist() == [0, 0, 1, 2, 0, 1, 2]


def test_rule_matches_brute_force_on_random_collisions():
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(0, 40))
        expr = rng.integers(0, 1 + int(rng.integers(1, 25)), n)
        tmpl = rng.integers(0, 1 + int(rng.integers(1, 25)), n)
        if trial % 2:  # realistic: equal expressions have equal templates
            tmpl = expr // 3
        needed = int(rng.integers(0, n + 3))
        assert dedup.select_survivors(as_hashes(expr, tmpl), needed).tolist() == \
            brute_force(expr.tolist(), tmpl.tolist(), needed)


def test_hash_matches_are_confirmed_by_full_comparison():
    rows = np.array([[12, 3, 7, 15, 0], [12, 4, 7, 15, 0], [11, 3, 3, 15, 0]], np.uint8)
    h = np.zeros((3, 4), np.uint64)  # every hash collides
    assert dedup.select_survivors(h, 3).tolist() == [0]
    # rows 0 and 1 share the template [MAX ] but not the expression; row 2 differs in both
    assert dedup.select_survivors(h, 3, tokens=rows).tolist() == [0, 2]
    assert dedup.classify_candidates(h, tokens=rows).tolist() == [0, 2, 0]
    calls = []

    def fetch(c):
        calls.append(c)
        return rows[c]

    real = dedup.dedup_hashes(rows, np.array([4, 4, 4]))
    assert dedup.select_survivors(real, 3, tokens=fetch).tolist() == [0, 2]
    assert sorted(set(calls)) == [0, 1], "only candidates whose hashes match another's are read"


def test_hashes_of_the_paper_example():
    ids = np.array(PAPER_IDS + [0] * 17, np.uint8)
    h = dedup.dedup_hashes(ids[None], np.array([15]))
    expected_tmpl = hashlib.blake2b(bytes([12, 13, 14, 15, 15, 15]), digest_size=16, person=b"listops-tmpl")
    assert h[0, 2:].tobytes() == expected_tmpl.digest()  # template [MAX[MED[SM]]] = ids 12 13 14 15 15 15
    assert h.dtype == np.uint64 and h[0, :2].tobytes() == hashlib.blake2b(
        bytes(PAPER_IDS), digest_size=16, person=b"listops-expr").digest()
    other_digits = ids.copy()
    other_digits[1] = 9
    h2 = dedup.dedup_hashes(other_digits[None], np.array([15]))
    assert np.array_equal(h[0, 2:], h2[0, 2:]) and not np.array_equal(h[0, :2], h2[0, :2])


@pytest.mark.parametrize("task, config", [
    (ListOpsSubtrees(), ListOpsSubtreesConfig(min_length=3, max_length=12, max_depth=3)),
    (ListOps(), ListOpsConfig(min_length=3, max_length=12, max_depth=3)),
])
def test_real_candidates(task, config):
    """Tiny windows make duplicates common: survivors have distinct templates, each drop has a kept twin."""
    keys = keys_for(task.name, task.version, config.to_dict(), 0, "candidates", 0, 200)
    block = task.generate(config, keys)
    chunks = [task.generate(config, keys[a:b]) for a, b in ((0, 77), (77, 200))]
    h = task.dedup_hashes(config, block)
    assert h.shape == (200, 4) and h.dtype == np.uint64
    assert np.array_equal(h, np.vstack([task.dedup_hashes(config, c) for c in chunks]))  # worker invariance
    kept = dedup.select_survivors(h, 200, tokens=block["inputs"], lengths=block["lengths"])
    text = [bytes(r[:n]) for r, n in zip(block["inputs"], block["lengths"], strict=True)]
    tmpl = [bytes(b for b in t if b > 10) for t in text]
    assert kept.tolist() == brute_force(text, tmpl, 200)
    assert 0 < len(kept) < 200 and len({tmpl[k] for k in kept}) == len(kept)
    report = dedup.dedup_report(h, {"train": len(kept) - 4, "val": 2, "test": 2})
    assert report["candidates_used"] == kept[-1] + 1 and report["survivors"] == len(kept)
    assert report["dropped_expression_duplicates"] + report["dropped_template_duplicates"] == \
        report["candidates_used"] - len(kept)
    assert report["dropped_expression_duplicates"] == sum(
        1 for c in range(kept[-1] + 1) if c not in set(kept) and text[c] in text[:c])
    assert report["cross_split_shared_expressions"] == report["cross_split_shared_templates"] == 0
    assert task.generate(config, keys[:1])["candidate_index"].tolist() == [-1]


def test_report_on_synthetic_split():
    h = as_hashes([1, 2, 1, 3, 4, 5], [1, 2, 1, 2, 4, 5])
    r = dedup.dedup_report(h, {"train": 2, "val": 1})
    assert r == {"candidates_used": 5, "survivors": 3, "needed": 3, "dropped_expression_duplicates": 1,
                 "dropped_template_duplicates": 1, "cross_split_shared_expressions": 0,
                 "cross_split_shared_templates": 0}
    assert list(itertools.islice(dedup.select_survivors(h, 100), 10)) == [0, 1, 4, 5]
