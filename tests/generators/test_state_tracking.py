"""The state-tracking tasks (parity_check, even_pairs, cycle_navigation, modular_arithmetic, word_problem): the Numba
kernels against slow pure-Python references byte for byte, the labels against independent solvers, the token and
label laws against exact probabilities, the group tables against the group axioms and the word-problem numbering,
and the oracles' and configs' refusals."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
from scipy import stats

import state_oracle as ref  # tests/generators is on pytest's pythonpath
from ssmbench.errors import ConfigError, VerificationError
from ssmbench.generators._groups import cayley_table
from ssmbench.generators.cycle_navigation import CycleNavigation, CycleNavigationConfig
from ssmbench.generators.even_pairs import EvenPairs, EvenPairsConfig
from ssmbench.generators.modular_arithmetic import ModularArithmetic, ModularArithmeticConfig
from ssmbench.generators.parity_check import ParityCheck, ParityCheckConfig
from ssmbench.generators.word_problem import WordProblem, WordProblemConfig
from ssmbench.harness.config.task_groups import task_groups
from ssmbench.seeding import keys_for

REGULAR = {"parity_check": ParityCheck(), "even_pairs": EvenPairs(), "cycle_navigation": CycleNavigation(),
           "modular_arithmetic": ModularArithmetic()}


def keys(task, config, n: int, split: str = "train") -> np.ndarray:
    return keys_for(task.name, task.version, config.to_dict(), 0, split, 0, n)


def draw(task, config, n: int) -> dict[str, np.ndarray]:
    return task.generate(config, keys(task, config, n))


def reference(name: str, key: int, config) -> tuple[list[int], list[int]]:
    if name == "parity_check":
        return ref.parity_sample(key, config.L)
    if name == "even_pairs":
        return ref.even_pairs_sample(key, config.L)
    if name == "cycle_navigation":
        return ref.cycle_sample(key, config.L, config.cycle_length)
    if name == "modular_arithmetic":
        return ref.modular_sample(key, config.L, config.modulus)
    elements, multiply = ref.group_elements(config.group)
    return ref.word_problem_sample(key, config.L, elements, multiply)


CASES = [(name, cls.Config(L=L)) for name, cls in REGULAR.items() for L in (1, 2, 7, 40, 500)] + [
    ("cycle_navigation", CycleNavigationConfig(L=33, cycle_length=7)),
    ("modular_arithmetic", ModularArithmeticConfig(L=21, modulus=11)),
    *[("word_problem", WordProblemConfig(group=g, L=L)) for g in ("S5", "A5", "A4_x_Z5", "Z60") for L in (1, 20)],
    ("word_problem", WordProblemConfig(group="S3_x_Z2", L=50)),
]


@pytest.mark.parametrize("name,config", CASES, ids=lambda v: str(v) if isinstance(v, str) else
                         "-".join(f"{k}={x}" for k, x in v.to_dict().items()))
def test_kernel_matches_the_slow_reference_byte_for_byte(name, config):
    task = WordProblem() if name == "word_problem" else REGULAR[name]
    ks = keys(task, config, 10)
    out = task.generate(config, ks)
    rows = [reference(name, int(k), config) for k in ks]
    np.testing.assert_array_equal(out["inputs"], np.array([r[0] for r in rows], out["inputs"].dtype))
    np.testing.assert_array_equal(out["targets"], np.array([r[1] for r in rows], out["targets"].dtype))


def test_modular_arithmetic_labels_are_pythons_own_evaluation_and_even_lengths_drop_a_token():
    """Python's `eval` of the expression text, mod 5, over many samples; L = 40 gives 39 tokens, the paper's rule."""
    config = ModularArithmeticConfig(L=40)
    block = draw(ModularArithmetic(), config, 500)
    assert block["inputs"].shape == (500, 40) and config.n == 39
    for x, y in zip(block["inputs"].tolist(), block["targets"].tolist(), strict=True):
        assert y[-1] == eval(ref.expression_text(x[:-1], 5)) % 5  # noqa: S307 (digits and + - * only)
    assert ModularArithmeticConfig(L=41).n == 41 and ModularArithmeticConfig(L=2).n == 1


@pytest.mark.parametrize("name,symbols", [("parity_check", 2), ("even_pairs", 2), ("cycle_navigation", 3)])
def test_symbols_are_uniform_and_the_query_closes_the_string(name, symbols):
    task = REGULAR[name]
    block = draw(task, task.Config(L=30), 2000)
    x = block["inputs"].astype(np.int64)
    assert (x[:, -1] == symbols).all()
    assert stats.chisquare(np.bincount(x[:, :-1].ravel(), minlength=symbols)).pvalue > 1e-3
    assert ((block["targets"][:, :-1] == -100).all())


def test_modular_digits_and_operators_are_uniform_and_the_blank_never_occurs():
    block = draw(ModularArithmetic(), ModularArithmeticConfig(L=31), 2000)
    x = block["inputs"].astype(np.int64)
    assert stats.chisquare(np.bincount(x[:, 0:31:2].ravel(), minlength=5)).pvalue > 1e-3
    ops = x[:, 1:31:2].ravel()
    assert set(np.unique(ops)) == {5, 6, 7}  # +, -, *; the blank 8 is never drawn
    assert stats.chisquare(np.bincount(ops - 5, minlength=3)).pvalue > 1e-3


@pytest.mark.parametrize("name,L,law", [
    ("parity_check", 9, lambda L: np.array([0.5, 0.5])),
    ("even_pairs", 9, lambda L: np.array([0.5, 0.5])),
    ("even_pairs", 1, lambda L: np.array([1.0, 0.0])),  # no pair at all: always even
    ("cycle_navigation", 3, lambda L: ref.cycle_label_law(L, 5)),
    ("cycle_navigation", 40, lambda L: ref.cycle_label_law(L, 5)),
    ("modular_arithmetic", 3, lambda L: ref.modular_label_law(L, 5)),
    ("modular_arithmetic", 9, lambda L: ref.modular_label_law(L, 5)),
])
def test_label_law_matches_exact_probabilities(name, L, law):
    """The class frequencies against the exact law (short expressions are not uniform: 0 is over-represented
    because a product with a 0 is 0); chi-square over 6,000 samples."""
    task = REGULAR[name]
    n = 6000
    labels = draw(task, task.Config(L=L), n)["targets"][:, -1].astype(np.int64)
    p = law(L)
    observed = np.bincount(labels, minlength=len(p))
    keep = p > 0
    assert observed[~keep].sum() == 0
    assert keep.sum() == 1 or stats.chisquare(observed[keep], p[keep] * n).pvalue > 1e-3
    if name == "modular_arithmetic" and L == 3:
        assert p[0] > 0.25  # 0.253 against 0.2 for a uniform law: the check has power (6,000 samples)


def test_group_tables_are_groups_with_identity_zero_and_the_expected_structure():
    for name, order, abelian in [("S5", 120, False), ("A5", 60, False), ("A4_x_Z5", 60, False), ("Z60", 60, True),
                                 ("S3", 6, False)]:
        t = cayley_table(name)
        assert t.shape == (order, order)
        ids = np.arange(order)
        assert (t[0] == ids).all() and (t[:, 0] == ids).all()  # 0 is the identity
        assert all(sorted(row) == list(ids) for row in t.tolist())  # a Latin square: inverses exist
        a, b, c = np.meshgrid(ids, ids, ids, indexing="ij")
        assert (t[t[a, b], c] == t[a, t[b, c]]).all()  # associativity
        assert bool((t == t.T).all()) == abelian
    # A5 is simple: the only normal subgroup generated by a conjugacy class of a non-identity element is A5 itself
    t = cayley_table("A5")
    inverse = np.argmin(t, axis=1)
    klass = {int(t[t[g, 1], inverse[g]]) for g in range(60)}
    closure = set(klass) | {0}
    while True:
        grown = closure | {int(t[a, b]) for a in closure for b in closure}
        if grown == closure:
            break
        closure = grown
    assert len(closure) == 60


def test_group_numbering_is_the_word_problem_repositorys():
    """The tables' digests, as computed from jopetty/abstract_algebra@94226a0 (the word-problem repository's
    dependency) by benchmarks/fidelity/chomsky_word_problem.py, which compares the whole tables; here they pin the
    numbering without the upstream code. Also the permutations themselves: element 1 of S5 is (1, 2, 3, 5, 4)."""
    digests = {name: hashlib.sha256(cayley_table(name).astype(np.int64).tobytes()).hexdigest()[:16]
               for name in ("S5", "A5", "A4_x_Z5", "Z60")}
    assert digests == PINNED_DIGESTS
    elements, multiply = ref.group_elements("S5")
    assert elements[1] == ((1, 2, 3, 5, 4),)
    index = {e: i for i, e in enumerate(elements)}
    t = cayley_table("S5")
    assert all(t[a, b] == index[multiply(elements[a], elements[b])] for a in range(0, 120, 7) for b in range(120))


PINNED_DIGESTS = {"S5": "1cc1b58c6d6c717e", "A5": "eda409cc773f0dd4", "A4_x_Z5": "716c442aada007a3", "Z60": "64b62cd1a8ed78dc"}


def test_word_problem_tokens_are_uniform_and_prefix_products_are_uniform():
    config = WordProblemConfig(group="A5", L=12)
    block = draw(WordProblem(), config, 3000)
    x, y = block["inputs"].astype(np.int64), block["targets"].astype(np.int64)
    assert stats.chisquare(np.bincount(x.ravel(), minlength=60)).pvalue > 1e-3
    assert stats.chisquare(np.bincount(y[:, -1], minlength=60)).pvalue > 1e-3
    assert (y[:, 0] == x[:, 0]).all()  # the first product is the first element (0 is the identity)


@pytest.mark.parametrize("name", [*REGULAR, "word_problem"])
def test_oracle_solves_from_the_inputs_and_refuses_a_broken_layout(name):
    task = WordProblem() if name == "word_problem" else REGULAR[name]
    config = task.presets[task.default_preset]
    block = draw(task, config, 50)
    for i in range(50):
        row = {k: v[i] for k, v in block.items()}
        np.testing.assert_array_equal(task.oracle(config, {"inputs": row["inputs"], "targets": row["targets"]})
                                      ["targets"], row["targets"])
    row = {k: v[0].copy() for k, v in block.items()}
    if name == "word_problem":
        row["inputs"][3] = 250  # not an element of A5
    else:
        row["inputs"][-1] = 0  # the query token is gone
    with pytest.raises(VerificationError):
        task.oracle(config, row)


def test_generation_works_at_every_length_of_the_train_short_test_long_range():
    """Lengths 1..500 one after another (the protocol changes L per batch): right shapes, oracle-consistent."""
    for L in list(range(1, 60)) + [100, 257, 500]:
        for task in (*REGULAR.values(), WordProblem()):
            config = dataclasses.replace(task.presets[task.default_preset], L=L)
            block = draw(task, config, 2)
            assert block["inputs"].shape == (2, task.spec(config).seq_len)
            row = {"inputs": block["inputs"][1], "targets": block["targets"][1]}
            np.testing.assert_array_equal(task.oracle(config, row)["targets"], row["targets"])


def test_groups_and_bad_configs():
    groups = task_groups()
    assert groups["chomsky"][:4] == ["parity_check", "even_pairs", "cycle_navigation", "modular_arithmetic"]
    assert groups["state_tracking"] == ["parity_check", "modular_arithmetic", "word_problem"]
    for cls, changes, field in [(ParityCheckConfig, {"L": 0}, "L"), (EvenPairsConfig, {"L": 2**17}, "L"),
                                (CycleNavigationConfig, {"cycle_length": 1}, "cycle_length"),
                                (ModularArithmeticConfig, {"modulus": 1}, "modulus"),
                                (WordProblemConfig, {"group": "S6"}, "group"),
                                (WordProblemConfig, {"group": "A5xZ2"}, "group"),
                                (WordProblemConfig, {"group": "Z60_x_Z5"}, "group")]:
        with pytest.raises(ConfigError) as err:
            cls(**changes)
        assert err.value.field == field
    assert set(WordProblem.presets) == {"S5", "A5", "A4_x_Z5", "Z60"}
