"""Task variants of the authors' pre-paper generators (ag1988/dlr@27e7287): SELECT / SELECT-FIXED `values="zeros"`
and SORT `order="value"`, plus DSS_EXP's older `lin` initialisation. Defaults keep their bytes (test_golden.py)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from ssmbench.errors import ConfigError
from ssmbench.generators.select_fixed import fixed_positions
from ssmbench.registry import get_task
from support import draw

N = 64


@pytest.mark.parametrize("name", ["select", "select_fixed"])
def test_zeros_variant_writes_values_only_at_the_marked_positions(name):
    """The reference's earlier generator, written out independently: M normals inf-normalised among themselves,
    scattered at the sorted marked positions; everything else in the value channel is 0."""
    task = get_task(name)
    config = task.Config(L=96, M=8, values="zeros")
    out = draw(name, config, stop=N)
    x, y = out["inputs"], out["targets"][..., 0]
    for i in range(N):
        marked = np.flatnonzero(x[i, :, 1] == 1.0)
        assert marked.shape == (8,) and marked.max() < 96 + 8
        values = x[i, :, 0]
        np.testing.assert_array_equal(values[marked], y[i])
        assert np.count_nonzero(np.delete(values, marked)) == 0
        assert np.abs(y[i]).max() == 1.0  # inf-normalised over the M tokens, not over L + M
        np.testing.assert_array_equal(task.oracle(config, {"inputs": x[i]})["targets"][:, 0], y[i])
    # the noise variant of the same config: values everywhere, the marked ones not normalised among themselves
    noise = draw(name, dataclasses.replace(config, values="noise"), stop=N)["inputs"][:, :96 + 8, 0]
    assert np.count_nonzero(noise) == noise.size


def test_select_fixed_positions_do_not_depend_on_the_variant():
    task = get_task("select_fixed")
    zeros, noise = task.Config(L=96, M=8, values="zeros"), task.Config(L=96, M=8)
    np.testing.assert_array_equal(fixed_positions(zeros), fixed_positions(noise))
    marks = draw("select_fixed", zeros, stop=4)["inputs"][:, :, 1]
    assert (marks == marks[0]).all() and set(np.flatnonzero(marks[0])) == set(fixed_positions(noise))


def test_zeros_variant_marks_positions_uniformly():
    """Every one of the L + M positions is marked about equally often (topk of uniform noise in the reference)."""
    config = get_task("select").Config(L=24, M=8, values="zeros")
    marks = draw("select", config, stop=4000)["inputs"][:, :32, 1].sum(0)
    expected = 4000 * 8 / 32
    assert np.abs(marks - expected).max() < 5 * math.sqrt(expected)


def test_sort_by_value_variant_is_a_plain_ascending_sort():
    task = get_task("sort")
    config = task.Config(L=50, order="value")
    out = draw("sort", config, stop=16)
    for x, y in zip(out["inputs"], out["targets"], strict=True):
        np.testing.assert_array_equal(y[:, 0], np.sort(x[:50, 0]))
        np.testing.assert_array_equal(task.oracle(config, {"inputs": x})["targets"], y)
    default = draw("sort", task.Config(L=50), stop=16)
    np.testing.assert_array_equal(default["inputs"], out["inputs"])  # same inputs: only the target rule differs
    assert not np.array_equal(default["targets"], out["targets"])


@pytest.mark.parametrize("name,key,bad", [("select", "values", "zero"), ("select_fixed", "values", "Noise"),
                                          ("sort", "order", "ascending")])
def test_unknown_variant_value_is_refused(name, key, bad):
    with pytest.raises(ConfigError, match=key):
        get_task(name).Config(**{key: bad})


def test_cli_refuses_an_unknown_variant_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ssmbench", "generate", "select", "--length", "64", "--n", "8",
                           "-o", "values=zero", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr
    assert "values" in proc.stderr and "zeros" in proc.stderr and "Traceback" not in proc.stderr


def test_dss_exp_lin_2pi_is_the_authors_pre_paper_init():
    from ssmbench.reference_models.dss_exp import DSSExp

    n = 16
    old = DSSExp(4, l_max=32, d_state=n, lambda_init="lin_2pi")
    new = DSSExp(4, l_max=32, d_state=n, lambda_init="lin")
    want = torch.tensor([2 * math.pi * k / n for k in range(n)], dtype=torch.float64)
    torch.testing.assert_close(old.lambda_im.detach().double(), want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(new.lambda_im.detach().double(), want * n / 2, rtol=1e-6, atol=1e-5)
    real = -torch.exp(old.log_lambda_re.detach())
    torch.testing.assert_close(real, torch.full((n,), -0.5))
