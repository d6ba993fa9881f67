"""The 11 atomic tasks: oracles accept the reference implementation's samples, plus shape and statistics checks."""

from __future__ import annotations

import numpy as np
import pytest

from ssmbench.errors import ConfigError
from ssmbench.generators.shift import shift_amounts
from ssmbench.generators.solve import solve_size
from ssmbench.registry import get_task
from support import ATOMIC, REFERENCE, draw, require_reference, rows

REFERENCE_NAME = {"select": "masked_select", "select_fixed": "masked_select_fixed"}
PAPER_SHAPES = {  # the DLR paper's task shapes at L = 4096 (as the data cards list them): (inputs, targets)
    "shift": ((4096, 3), (4096, 8)), "cumsum": ((4096, 3), (4096, 1)), "cummax": ((4096, 3), (4096, 1)),
    "reverse": ((8192, 3), (4096, 1)), "sort": ((8192, 3), (4096, 1)), "select": ((4160, 4), (32, 1)),
    "select_fixed": ((4160, 4), (32, 1)), "solve": ((4096, 3), (63, 1)), "solve_fixed": ((4096, 3), (63, 1)),
    "context_shift": ((4096, 3), (4096, 1)), "mips": ((4096, 14), (4096, 4)),
}


def config_for(name: str, L: int):
    task = get_task(name)
    return task.Config(L=L)


@pytest.mark.parametrize("name", ATOMIC)
def test_oracle_accepts_reference_samples(name):
    """Every reference sample's targets are recomputed from its inputs by our oracle (FFT noise ~1e-7)."""
    path = require_reference(REFERENCE / "atomic" / f"{REFERENCE_NAME.get(name, name)}_L4096.npz")
    data = np.load(path)
    task, config = get_task(name), config_for(name, 4096)
    assert data["x"].shape[1:] == PAPER_SHAPES[name][0] and data["y"].shape[1:] == PAPER_SHAPES[name][1]
    for x, y in zip(data["x"], data["y"], strict=True):
        want = task.oracle(config, {"inputs": x})["targets"]
        np.testing.assert_allclose(want, y, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ATOMIC)
@pytest.mark.parametrize("L", [4096, 512])
def test_paper_shapes_and_positional_channels(name, L):
    config = config_for(name, L)
    spec = get_task(name).spec(config)
    T = spec.seq_len
    if L == 4096:
        assert (spec.fields["inputs"].shape, spec.fields["targets"].shape) == PAPER_SHAPES[name]
    expected_T = {"reverse": 2 * L, "sort": 2 * L, "select": L + 64, "select_fixed": L + 64}.get(name, L)
    assert T == expected_T
    x = draw(name, config, stop=1)["inputs"][0]
    t = np.arange(T)
    np.testing.assert_array_equal(x[:, -2], np.cos(2 * np.pi * t / T).astype(np.float32))
    np.testing.assert_array_equal(x[:, -1], np.sin(2 * np.pi * t / T).astype(np.float32))
    assert x[0, -2] == 1.0 and x[0, -1] == 0.0


@pytest.mark.parametrize("name", ["shift", "cumsum", "cummax", "reverse", "sort", "select", "context_shift"])
def test_inf_normalised_value_channel(name):
    config = config_for(name, 512)
    x = draw(name, config, stop=3)["inputs"]
    n_values = {"reverse": 512, "sort": 512, "select": 512 + 32}.get(name, 512)
    start = 2 if name == "context_shift" else 0
    assert np.allclose(np.abs(x[:, start:n_values, 0]).max(axis=1), 1.0, atol=1e-7)


def test_shift_columns_are_exact_shifts():
    config = get_task("shift").Config(L=1000, num_shifts=8)  # non-divisible L: integer lags
    assert shift_amounts(config).tolist() == [j * 1000 // 8 for j in range(8)]
    for row in rows(draw("shift", config, stop=2)):
        v, y = row["inputs"][:, 0], row["targets"]
        assert np.array_equal(y[:, 0], v)
        for j, s in enumerate(shift_amounts(config)):
            assert (y[:s, j] == 0).all() and np.array_equal(y[s:, j], v[:1000 - s])


def test_reverse_and_sort_targets():
    for name in ("reverse", "sort"):
        for row in rows(draw(name, config_for(name, 300), stop=3)):
            x, y = row["inputs"][:, 0], row["targets"][:, 0]
            assert (x[300:] == 0).all()
            if name == "reverse":
                assert np.array_equal(y, x[:300][::-1])
            else:
                assert y[0] == x[0] and sorted(y.tolist()) == sorted(x[:300].tolist())
                assert (np.diff(np.abs(y.astype(np.float64) - x[0])) >= 0).all()


def test_sort_ties_keep_index_order():
    """Equal distances (x0 +- d) must come out in index order: compare with a stable argsort by brute force."""
    from ssmbench.generators._kernels import stable_order_by_distance

    v = np.array([0.5, 0.7, 0.3, 0.7, 0.3, 0.5, -0.1], dtype=np.float32)
    order = np.empty(len(v), dtype=np.int64)
    stable_order_by_distance(v, v[0], order)
    d = np.abs(v.astype(np.float64) - 0.5)
    expected = sorted(range(len(v)), key=lambda i: (d[i], i))
    assert order.tolist() == expected
    rng = np.random.default_rng(0)
    for _ in range(20):
        w = rng.choice(np.linspace(-1, 1, 9).astype(np.float32), size=257)
        stable_order_by_distance(w, w[3], order := np.empty(257, np.int64))
        assert order.tolist() == np.argsort(np.abs(w.astype(np.float64) - w[3]), kind="stable").tolist()


@pytest.mark.parametrize("name", ["select", "select_fixed"])
def test_select_markers_and_targets(name):
    config = get_task(name).Config(L=200, M=16)
    for row in rows(draw(name, config, stop=4)):
        x, y = row["inputs"], row["targets"][:, 0]
        marks = np.flatnonzero(x[:, 1])
        assert len(marks) == 16 and marks.max() < 216 and (x[216:, :2] == 0).all()
        assert np.array_equal(y, x[marks, 0])


def test_select_consecutive_block():
    config = get_task("select").Config(L=50, M=8, consecutive=True)
    for row in rows(draw("select", config, stop=20)):
        marks = np.flatnonzero(row["inputs"][:, 1])
        assert np.array_equal(marks, np.arange(marks[0], marks[0] + 8)) and marks[0] <= 50


@pytest.mark.parametrize("name", ["solve", "solve_fixed"])
@pytest.mark.parametrize("L", [8, 80, 512, 4096])
def test_solve_structure(name, L):
    N = solve_size(L)
    assert N * N + 2 * N <= L < (N + 1) ** 2 + 2 * (N + 1)
    for row in rows(draw(name, config_for(name, L), stop=2)):
        v = row["inputs"][:, 0].astype(np.float64)
        M = v[: N * (N + 1)].reshape(N, N + 1)
        A, B, X = M[:, :N], M[:, N], row["targets"][:, 0].astype(np.float64)
        assert np.abs(A @ A.T - np.eye(N)).max() < 1e-5
        assert abs(np.linalg.norm(X) - 1) < 1e-6
        assert np.abs(A @ X - B).max() < 1e-5
        assert (v[N * (N + 1):] == 0).all() and (v[-N:] == 0).all()


def test_solve_sizes_match_tasks_md():
    assert [solve_size(L) for L in (512, 1024, 4096, 8192, 16384)] == [21, 31, 63, 89, 127]


def test_haar_orthogonal_is_haar():
    """For a Haar O(n) matrix, n * A_00^2 ~ Beta(1/2, (n-1)/2) scaled; check its mean 1 and a KS test."""
    from scipy import stats

    from ssmbench.generators.solve import haar_orthogonal

    n, vals = 5, []
    for k in range(2000):
        a = np.empty((n, n))
        haar_orthogonal(np.uint64(k * 2654435761 + 1), n, a)
        vals.append(a[0, 0] ** 2)
    assert stats.kstest(vals, stats.beta(0.5, (n - 1) / 2).cdf).pvalue > 1e-3


def test_context_shift_range_and_target():
    config = config_for("context_shift", 6)
    out = draw("context_shift", config, stop=400)
    assert set(out["shift"].tolist()) == {0, 1, 2, 3}  # s in {0 .. L-3}, every value reachable
    for row in rows(out)[:20]:
        s, x, y = int(row["shift"]), row["inputs"][:, 0], row["targets"][:, 0]
        assert np.array_equal(y[s:], x[: 6 - s]) and (y[:s] == 0).all()
        assert abs(x[0] - np.cos(2 * np.pi * s / 6)) < 1e-6 and abs(x[1] - np.sin(2 * np.pi * s / 6)) < 1e-6


def _mips_brute(x, D, causal):
    q, k, v = (x[:, i * D:(i + 1) * D].astype(np.float64) for i in range(3))
    L = len(q)
    out = np.empty((L, D), np.float32)
    for i in range(L):
        stop = i + 1 if causal else L
        scores = [float(np.dot(q[i], k[j])) for j in range(stop)]
        out[i] = v[int(np.argmax(scores))]
    return out


@pytest.mark.parametrize("D,causal", [(4, True), (4, False), (3, True), (2, False)])
def test_mips_matches_brute_force(D, causal):
    config = get_task("mips").Config(L=70, D=D, causal=causal)
    for row in rows(draw("mips", config, stop=3)):
        assert np.array_equal(row["targets"], _mips_brute(row["inputs"], D, causal))


def test_mips_near_ties_follow_float64_and_lowest_index():
    """Constructed ties: duplicate keys (exact ties -> lowest j) and keys one float32 ulp apart."""
    from ssmbench.generators import mips as m
    from ssmbench.generators.mips import _fill_mips  # noqa: F401  (kernel under test via the task)

    L, D = 40, 4
    rng = np.random.default_rng(1)
    vec = rng.standard_normal((3, L, D))
    vec /= np.linalg.norm(vec, axis=2, keepdims=True)
    q, k, v = vec.astype(np.float32)
    k[10] = k[3]  # exact duplicate of an earlier key
    q[20:] = k[3]  # queries aligned with that key: tie between j = 3 and j = 10
    k[30] = np.nextafter(k[3], np.float32(2))  # one ulp away: float32 near-tie
    x = np.concatenate([q, k, v, np.zeros((L, 2), np.float32)], axis=1)
    kt32 = np.ascontiguousarray(k.T)
    winners = np.empty(8, np.int64)
    got = np.empty(L, np.int64)
    for i0 in range(0, L, 8):
        m._argmax_block(kt32, q, k.astype(np.float64), q.astype(np.float64), i0, True, winners)
        got[i0:i0 + 8] = winners
    want = np.array([int(np.argmax(k[: i + 1].astype(np.float64) @ q[i].astype(np.float64))) for i in range(L)])
    assert np.array_equal(got, want)
    assert np.array_equal(_mips_brute(x, D, True), v[want])


def test_fixed_variants_share_objects_across_seeds_and_splits():
    for name, field in (("select_fixed", "positions"), ("solve_fixed", "A")):
        task = get_task(name)
        config = task.Config(L=80)
        a = task.fixed_arrays(config)[field]
        b = draw(name, config, split="test", stop=2, seed=7)
        c = draw(name, config, split="train", stop=2, seed=0)
        if name == "select_fixed":
            assert np.array_equal(np.flatnonzero(b["inputs"][0, :, 1]), a)
            assert np.array_equal(b["inputs"][1, :, 1], c["inputs"][0, :, 1])
        else:
            N = a.shape[0]
            stored = b["inputs"][0, : N * (N + 1), 0].reshape(N, N + 1)[:, :N]
            assert np.array_equal(stored, a)
        other = task.fixed_arrays(task.Config(L=80, fixed_seed=1))[field]
        assert not np.array_equal(a, other)
    variable = draw("select", get_task("select").Config(L=80), stop=2)["inputs"]
    assert not np.array_equal(variable[0, :, 1], variable[1, :, 1])


@pytest.mark.parametrize("name,L", [("solve", 7), ("context_shift", 3), ("shift", 4), ("cumsum", 0),
                                    ("mips", 2**20 + 1)])
def test_invalid_lengths_raise_with_bound(name, L):
    with pytest.raises(ConfigError) as err:
        get_task(name).Config(L=L)
    assert err.value.field == "L" and name in str(err.value)
