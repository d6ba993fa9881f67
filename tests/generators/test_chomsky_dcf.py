"""The Chomsky-hierarchy DCF tasks (reverse_string, stack_manipulation, modular_arithmetic_brackets,
solve_equation): the Numba kernels against slow recursive pure-Python references byte for byte, the labels against
Python's own evaluation, the length and token laws against exact counts, the oracles and their refusals, the configs'
refusals and the `chomsky` group."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

import chomsky_oracle as ref  # tests/generators is on pytest's pythonpath
from ssmbench.errors import ConfigError, VerificationError
from ssmbench.generators.modular_arithmetic_brackets import (
    ModularArithmeticBrackets,
    ModularArithmeticBracketsConfig,
)
from ssmbench.generators.reverse_string import ReverseString, ReverseStringConfig
from ssmbench.generators.solve_equation import SolveEquation, SolveEquationConfig
from ssmbench.generators.stack_manipulation import StackManipulation, StackManipulationConfig
from ssmbench.harness.config.task_groups import task_groups
from ssmbench.seeding import keys_for

DCF = {"reverse_string": ReverseString(), "stack_manipulation": StackManipulation(),
       "modular_arithmetic_brackets": ModularArithmeticBrackets(), "solve_equation": SolveEquation()}


def draw(task, config, n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    ks = keys_for(task.name, task.version, config.to_dict(), 0, "train", 0, n)
    return ks, task.generate(config, ks)


def reference(name: str, key: int, config) -> tuple[list[int], list[int]]:
    if name == "reverse_string":
        return ref.reverse_sample(key, config.L)
    if name == "stack_manipulation":
        return ref.stack_sample(key, config.L)
    if name == "modular_arithmetic_brackets":
        return ref.brackets_sample(key, config.L, config.modulus, config.mult)
    return ref.equation_sample(key, config.L, config.modulus)


CASES = [(name, cls.Config(L=L)) for name, cls in DCF.items() for L in (1, 2, 3, 4, 5, 6, 13, 40, 300)] + [
    ("modular_arithmetic_brackets", ModularArithmeticBracketsConfig(L=31, modulus=7, mult=False)),
    ("solve_equation", SolveEquationConfig(L=29, modulus=7)),
]


@pytest.mark.parametrize("name,config", CASES, ids=lambda v: v if isinstance(v, str) else
                         "-".join(f"{k}={x}" for k, x in v.to_dict().items()))
def test_kernel_matches_the_slow_recursive_reference_byte_for_byte(name, config):
    task = DCF[name]
    ks, out = draw(task, config, 12)
    rows = [reference(name, int(k), config) for k in ks]
    np.testing.assert_array_equal(out["inputs"], np.array([r[0] for r in rows], out["inputs"].dtype))
    np.testing.assert_array_equal(out["targets"], np.array([r[1] for r in rows], out["targets"].dtype))


def expression_text(tokens, m: int, symbols: str) -> str:
    return "".join(str(t) if t < m else symbols[t - m] for t in tokens)


def test_bracket_labels_are_pythons_evaluation_and_solutions_satisfy_the_equation():
    _, block = draw(ModularArithmeticBrackets(), ModularArithmeticBracketsConfig(L=57), 400)
    for x, y in zip(block["inputs"].tolist(), block["targets"].tolist(), strict=True):
        assert y[-1] == eval(expression_text(x[:-1], 5, "+-*()")) % 5  # noqa: S307 (digits, + - * ( ))
    _, block = draw(SolveEquation(), SolveEquationConfig(L=40), 400)
    for x, y in zip(block["inputs"].tolist(), block["targets"].tolist(), strict=True):
        text = expression_text(x[:38], 5, "+-()x")
        assert x[38:] == [10, x[39], 11] and text.count("x") == 1 and "*" not in text
        assert [d for d in range(5) if eval(text.replace("x", str(d))) % 5 == x[39]] == [y[-1]]  # noqa: S307


def test_reverse_and_stack_answers_against_their_definitions():
    _, block = draw(ReverseString(), ReverseStringConfig(L=33), 200)
    x, y = block["inputs"].astype(int), block["targets"].astype(int)
    assert (y[:, 33:] == x[:, 32::-1]).all() and (x[:, 33:] == 2).all() and (y[:, :33] == -100).all()
    assert stats.chisquare(np.bincount(x[:, :33].ravel(), minlength=2)).pvalue > 1e-3
    _, block = draw(StackManipulation(), StackManipulationConfig(L=20), 3000)
    x, y = block["inputs"].astype(int), block["targets"].astype(int)
    assert (x[:, 20:] == 5).all() and (y[:, :20] == -100).all()
    ends = (y == 2).argmax(axis=1)
    assert ((y == 2).sum(axis=1) == 1).all() and all((y[i, ends[i] + 1:] == -100).all() for i in range(3000))
    # the stack's length s is uniform in 1..L-1: the first action is at position s
    first_action = (x[:, :20] >= 2).argmax(axis=1)
    assert stats.chisquare(np.bincount(first_action, minlength=20)[1:]).pvalue > 1e-3
    actions = x[:, :20][x[:, :20] >= 2]
    assert stats.chisquare(np.bincount(actions - 2, minlength=3)).pvalue > 1e-3


def left_length_law(length: int) -> np.ndarray:
    """P(an expression of `length` tokens opens with k brackets), k = 0..length, from the paper's recursion."""
    @__import__("functools").cache
    def law(n: int) -> tuple[float, ...]:
        p = [0.0] * (n + 1)
        if n <= 2:
            p[0] = 1.0
        elif n <= 4:
            p[1] = 1.0
        else:
            for left in range(1, n - 3):
                for k, q in enumerate(law(left)):
                    p[k + 1] += q / (n - 4)
        return tuple(p)
    return np.array(law(length))


def test_bracket_nesting_law_matches_the_recursion_exactly():
    """How many '(' open an expression (the depth of its leftmost branch) against the exact law of the paper's
    recursion (left length uniform in 1..n-4); chi-square over 6,000 samples at L = 15."""
    L, n = 15, 6000
    _, block = draw(ModularArithmeticBrackets(), ModularArithmeticBracketsConfig(L=L), n)
    x = block["inputs"].astype(int)
    opening = (x != 8).argmax(axis=1)
    p = left_length_law(L)
    observed = np.bincount(opening, minlength=len(p))
    keep = p * n > 5
    assert observed[p == 0].sum() == 0
    expected = p[keep] / p[keep].sum() * observed[keep].sum()
    assert stats.chisquare(observed[keep], expected).pvalue > 1e-3
    assert math.isclose(p.sum(), 1.0)


@pytest.mark.parametrize("name", DCF)
def test_oracle_solves_from_the_inputs_and_refuses_a_broken_layout(name):
    task = DCF[name]
    config = task.presets[task.default_preset]
    _, block = draw(task, config, 50)
    for i in range(50):
        row = {k: v[i] for k, v in block.items()}
        np.testing.assert_array_equal(task.oracle(config, row)["targets"], row["targets"])
    row = {k: v[0].copy() for k, v in block.items()}
    row["inputs"][-1] = 0  # the (last) query token is gone
    with pytest.raises(VerificationError):
        task.oracle(config, row)


def test_oracles_refuse_malformed_expressions():
    config = ModularArithmeticBracketsConfig(L=5)
    with pytest.raises(VerificationError):  # "(3+4" then a digit: not an expression
        ModularArithmeticBrackets().oracle(config, {"inputs": np.array([8, 3, 5, 4, 4, 11]),
                                                    "targets": np.array([-100] * 5 + [2])})
    with pytest.raises(VerificationError):  # two unknowns
        SolveEquation().oracle(SolveEquationConfig(L=7), {"inputs": np.array([7, 9, 5, 9, 8, 10, 1, 11]),
                                                          "targets": np.array([-100] * 7 + [0])})


def test_generation_works_at_every_length_of_the_train_short_test_long_range():
    for L in list(range(1, 45)) + [100, 257, 500]:
        for task in DCF.values():
            config = dataclasses.replace(task.presets[task.default_preset], L=L)
            _, block = draw(task, config, 2)
            assert block["inputs"].shape == (2, task.spec(config).seq_len)
            row = {"inputs": block["inputs"][1], "targets": block["targets"][1]}
            np.testing.assert_array_equal(task.oracle(config, row)["targets"], row["targets"])


def test_groups_and_bad_configs():
    assert task_groups()["chomsky"][4:8] == list(DCF)
    for cls, changes, field in [(ReverseStringConfig, {"L": 0}, "L"), (StackManipulationConfig, {"L": 2**17}, "L"),
                                (ModularArithmeticBracketsConfig, {"modulus": 1}, "modulus"),
                                (ModularArithmeticBracketsConfig, {"mult": 1}, "mult"),
                                (SolveEquationConfig, {"modulus": 101}, "modulus")]:
        with pytest.raises(ConfigError) as err:
            cls(**changes)
        assert err.value.field == field
