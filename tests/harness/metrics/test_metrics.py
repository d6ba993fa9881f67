"""Metric states and losses of the harness: hand-computed values, edge cases, sharding invariance, sklearn oracles."""

from __future__ import annotations

import doctest
import json
import math
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ssmbench.harness.metrics import losses
from ssmbench.harness.metrics import states as metrics
from ssmbench.harness.metrics.states import ClassificationMetrics, RegressionMetrics

sklearn_metrics = pytest.importorskip("sklearn.metrics")


def t3(rows):
    """Nested list (B, L) or (B, L, D) -> float tensor (B, L, D)."""
    x = torch.tensor(rows, dtype=torch.float64)
    return x[..., None] if x.ndim == 2 else x


def regression(pred, target, mbs, n=None, index=None):
    m = RegressionMetrics(pred.shape[-1], mbs, n if n is not None else pred.shape[0])
    m.update(pred, target, torch.arange(pred.shape[0]) if index is None else index)
    return m.compute()


# ----------------------------------------------------------------------------------------------- regression


def test_r2_by_hand_two_samples():
    # targets 1, 3 | 0, 4: mean 2, VAR = (1 + 1 + 4 + 4) / 4 = 2.5; errors 0, 1 | 1, 0: MSE = 0.5 -> R2 = 0.8
    pred, target = t3([[1, 2], [1, 4]]), t3([[1, 3], [0, 4]])
    r = regression(pred, target, mbs=1)
    assert r["mse"] == 0.5 and r["r2"] == pytest.approx(0.8, rel=1e-15) and r["n"] == 4 and r["n_samples"] == 2
    # batch {0}: var 1, mse 0.5 -> 0.5; batch {1}: var 4, mse 0.5 -> 0.875; mean 0.6875
    assert r["r2_batchavg"] == pytest.approx(0.6875, rel=1e-15) and r["n_batches_batchavg"] == 2
    # one virtual batch of both samples = the exact value
    assert regression(pred, target, mbs=2)["r2_batchavg"] == pytest.approx(0.8, rel=1e-15)


def test_r2_per_channel_by_hand():
    # channel 0: y 1, 3 / p 1, 2 -> var 1, mse 0.5 -> 0.5; channel 1: y 0, 2 / p 0, 0 -> var 1, mse 2 -> -1
    # all entries: y 1, 0, 3, 2 (mean 1.5, var 1.25), squared errors 0, 0, 1, 4 (mse 1.25) -> 0
    pred, target = t3([[[1, 0], [2, 0]]]), t3([[[1, 0], [3, 2]]])
    r = regression(pred, target, mbs=1)
    assert r["r2_per_channel"] == pytest.approx([0.5, -1.0], rel=1e-15)
    assert r["r2"] == pytest.approx(0.0, abs=1e-15) and r["mse"] == 1.25 and r["n"] == 4


def test_constant_targets_follow_scikit_learn_and_the_floor_per_batch():
    """Exact R² of a constant target is scikit-learn's r2_score (force_finite): 0.0 unless the prediction is exact,
    then 1.0; the paper's per-batch R² floors the variance instead."""
    from sklearn.metrics import r2_score

    target = torch.full((6, 50, 2), 0.5)
    pred = target + 2.0**-10  # squared error 2^-20 everywhere
    r = regression(pred, target, mbs=3)
    flat_y, flat_p = target.reshape(-1).numpy(), pred.reshape(-1).numpy()
    assert r["r2"] == r2_score(flat_y, flat_p) == 0.0 and r["r2_per_channel"] == [0.0, 0.0]
    assert regression(target.clone(), target, mbs=3)["r2"] == r2_score(flat_y, flat_y) == 1.0
    assert r["mse"] == 2.0**-20
    assert r["r2_batchavg"] == pytest.approx(1 - 2.0**-20 / 1e-5, rel=1e-12) and r["n_batches_batchavg"] == 2
    # 0.1 is not a binary fraction: VAR computed from sums is rounding noise, still a constant target
    target = torch.full((64, 1000, 1), 0.1, dtype=torch.float32)
    assert regression(target + 0.01, target, mbs=8)["r2"] == 0.0


def test_empty_split_and_no_updates():
    empty = RegressionMetrics(3, 4, 0).compute()
    assert math.isnan(empty["r2"]) and math.isnan(empty["mse"]) and math.isnan(empty["r2_batchavg"])
    assert empty["n"] == 0 and empty["n_samples"] == 0 and empty["n_batches_batchavg"] == 0
    untouched = RegressionMetrics(3, 4, 10).compute()
    assert math.isnan(untouched["r2"]) and untouched["n_batches_batchavg"] == 0
    c = ClassificationMetrics(3, 2, 0, kind="segmentation").compute()
    assert all(math.isnan(c[k]) for k in ("accuracy", "macro_f1", "macro_accuracy", "macro_f1_batchavg",
                                          "macro_accuracy_batchavg"))
    assert c["n"] == 0 and c["n_batches_batchavg"] == 0 and c["confusion"] == [[0] * 3] * 3
    tok = ClassificationMetrics(10, 32, 5, kind="token").compute()
    assert math.isnan(tok["accuracy_batchavg"]) and tok["n_batches_batchavg"] == 0


def test_regression_remainder_batch_is_dropped():
    # 5 samples, batches of 2: {0,1}, {2,3}; sample 4 (a huge error) counts only in the exact metrics
    target = t3([[1, 3], [0, 4], [1, 3], [0, 4], [0, 1]])
    pred = t3([[1, 2], [1, 4], [1, 2], [1, 4], [100, -100]])
    r = regression(pred, target, mbs=2)
    assert r["n_batches_batchavg"] == 2 and r["r2_batchavg"] == pytest.approx(0.8, rel=1e-14)
    assert r["mse"] == pytest.approx((4 * 0.5 * 2 + 100**2 + 101**2) / 10, rel=1e-15)


def numpy_regression(p, y, mbs):
    """Independent oracle: exact metrics on flattened entries, per-batch R2 over consecutive sample batches."""
    p, y = p.numpy().astype(np.float64), y.numpy().astype(np.float64)
    r2 = 1 - np.mean((p - y) ** 2) / np.var(y)
    per_batch = [1 - np.mean((p[i:i + mbs] - y[i:i + mbs]) ** 2) / max(np.var(y[i:i + mbs]), 1e-5)
                 for i in range(0, len(y) - mbs + 1, mbs)]
    return r2, np.mean((p - y) ** 2), np.mean(per_batch), len(per_batch)


def test_regression_against_numpy_any_order_and_any_sharding():
    g = torch.Generator().manual_seed(0)
    n, mbs = 37, 4
    y = torch.randn(n, 9, 3, generator=g)
    p = y + 0.5 * torch.randn(n, 9, 3, generator=g)
    r2, mse, r2b, nb = numpy_regression(p, y, mbs)
    one = regression(p, y, mbs)
    assert one["r2"] == pytest.approx(r2, rel=1e-12) and one["mse"] == pytest.approx(mse, rel=1e-12)
    assert one["r2_batchavg"] == pytest.approx(r2b, rel=1e-12) and one["n_batches_batchavg"] == nb == 9
    # shuffled order, ragged real batches, samples spread over 3 "ranks" whose states are summed
    order = torch.randperm(n, generator=g)
    ranks = [RegressionMetrics(3, mbs, n) for _ in range(3)]
    for k, chunk in enumerate(order.split([5, 1, 7, 3, 11, 2, 8])):
        ranks[k % 3].update(p[chunk], y[chunk], chunk)
    merged = RegressionMetrics(3, mbs, n)
    merged.load_state_tensors([sum(ts) for ts in zip(*(m.state_tensors() for m in ranks), strict=True)])
    got = merged.compute()
    for key in ("r2", "mse", "r2_batchavg"):
        assert got[key] == pytest.approx(one[key], rel=1e-12)
    assert got["r2_per_channel"] == pytest.approx(one["r2_per_channel"], rel=1e-12)
    assert (got["n"], got["n_samples"], got["n_batches_batchavg"]) == (one["n"], n, nb)
    # before the sum a rank knows only its own samples and the virtual batches it saw in full
    alone = ranks[0].compute()
    assert alone["n_samples"] < n and alone["n_batches_batchavg"] < nb


def test_state_tensors_are_float64_or_int64_and_checked_on_load():
    m = RegressionMetrics(2, 4, 10)
    assert {t.dtype for t in m.state_tensors()} <= {torch.float64, torch.int64}
    with pytest.raises(ValueError, match="expected"):
        m.load_state_tensors([t.float() for t in m.state_tensors()])
    with pytest.raises(ValueError):
        m.load_state_tensors(m.state_tensors()[:1])


def test_bad_indices_and_double_counting_are_refused():
    m = RegressionMetrics(1, 2, 4)
    x = torch.zeros(2, 3, 1)
    with pytest.raises(ValueError, match="outside"):
        m.update(x, x, torch.tensor([3, 4]))
    with pytest.raises(ValueError, match="must both be"):
        m.update(x, torch.zeros(2, 3, 2), torch.tensor([0, 1]))
    m.update(x, x, torch.tensor([0, 1]))
    m.update(x, x, torch.tensor([1, 2]))  # sample 1 again (an evaluation that pads)
    with pytest.raises(ValueError, match="more than once"):
        m.compute()


# ----------------------------------------------------------------------------------------- classification


def test_token_accuracy_by_hand():
    target = torch.tensor([[1, -100, 2], [-100, -100, -100], [0, 0, 1]])
    pred = torch.tensor([[1, 7, 2], [3, 3, 3], [0, 1, 1]])  # predictions at unlabelled positions do not count
    m = ClassificationMetrics(10, 1, 3, kind="token")
    m.update(pred, target, torch.arange(3))
    r = m.compute()
    # labelled: 5, correct: 4; per batch: 1 - 0/2, 1 - 0/max(0, 1e-4), 1 - 1/3
    assert r["accuracy"] == 0.8 and r["n"] == 5
    assert r["accuracy_batchavg"] == pytest.approx((1 + 1 + 2 / 3) / 3, rel=1e-15) and r["n_batches_batchavg"] == 3
    m2 = ClassificationMetrics(10, 2, 3, kind="token")  # batch {0, 1} only: sample 2 is the dropped remainder
    m2.update(F.one_hot(pred, 10).float() * 5.0, target, torch.arange(3))  # logits take the argmax path
    r2 = m2.compute()
    assert r2["accuracy_batchavg"] == 1.0 and r2["n_batches_batchavg"] == 1 and r2["confusion"] == r["confusion"]


def sklearn_oracle(y, p, mbs, labels):
    """Exact and per-virtual-batch metrics from scikit-learn on the flattened labelled positions."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "y_pred contains classes not in y_true" is the case under test
        def scores(yy, pp):
            keep = yy != -100
            yy, pp = yy[keep], pp[keep]
            return (sklearn_metrics.f1_score(yy, pp, average="macro"),
                    sklearn_metrics.balanced_accuracy_score(yy, pp), sklearn_metrics.accuracy_score(yy, pp))
        exact = scores(y.ravel(), p.ravel())
        per = [scores(y[i:i + mbs].ravel(), p[i:i + mbs].ravel()) for i in range(0, len(y) - mbs + 1, mbs)]
        cm = sklearn_metrics.confusion_matrix(y[y != -100], p[y != -100], labels=labels)
    return exact, np.mean(per, axis=0), cm


@pytest.mark.parametrize("case", ["all_classes", "predicted_not_true", "absent_everywhere"])
def test_segmentation_metrics_match_sklearn(case):
    rng = np.random.default_rng(1)
    n, pixels, mbs, c = 23, 40, 3, 4
    y = rng.choice(3, size=(n, pixels), p=[0.8, 0.15, 0.05])
    p = np.where(rng.random((n, pixels)) < 0.7, y, rng.integers(0, 3, (n, pixels)))
    if case == "all_classes":
        y[0, 0] = 3
    if case == "predicted_not_true":
        p[5, :3] = 3  # class 3 predicted, never true
    y[rng.random((n, pixels)) < 0.1] = -100
    (f1, bal, acc), (f1_b, bal_b, _), cm = sklearn_oracle(y, p, mbs, list(range(c)))
    m = ClassificationMetrics(c, mbs, n, kind="segmentation")
    for chunk in torch.randperm(n).split(4):
        m.update(torch.from_numpy(p[chunk.numpy()]), torch.from_numpy(y[chunk.numpy()]), chunk)
    r = m.compute()
    assert r["confusion"] == cm.tolist()
    assert r["accuracy"] == pytest.approx(acc, rel=1e-12)
    assert r["macro_f1"] == pytest.approx(f1, rel=1e-12)
    assert r["macro_accuracy"] == pytest.approx(bal, rel=1e-12)
    assert r["macro_f1_batchavg"] == pytest.approx(f1_b, rel=1e-12)
    assert r["macro_accuracy_batchavg"] == pytest.approx(bal_b, rel=1e-12)
    assert r["n_batches_batchavg"] == n // mbs
    if case == "absent_everywhere":
        assert math.isnan(r["f1_per_class"][3]) and math.isnan(r["recall_per_class"][3])
    if case == "predicted_not_true":
        assert r["f1_per_class"][3] == 0.0 and math.isnan(r["recall_per_class"][3])


def test_classification_two_ranks_sum_to_one_rank_exactly():
    g = torch.Generator().manual_seed(3)
    n, mbs = 30, 4
    logits = torch.randn(n, 16, 3, generator=g)
    y = torch.randint(0, 3, (n, 16), generator=g)
    one = ClassificationMetrics(3, mbs, n, kind="segmentation")
    one.update(logits, y, torch.arange(n))
    a, b = (ClassificationMetrics(3, mbs, n, kind="segmentation") for _ in range(2))
    a.update(logits[:13], y[:13], torch.arange(13))  # a rank boundary inside virtual batch 3
    b.update(logits[13:], y[13:], torch.arange(13, n))
    merged = ClassificationMetrics(3, mbs, n, kind="segmentation")
    merged.load_state_tensors([x + z for x, z in zip(a.state_tensors(), b.state_tensors(), strict=True)])
    assert merged.compute() == one.compute()  # integer counts: bit-identical, every key


def test_breakdowns_match_a_direct_count():
    rng = np.random.default_rng(7)
    n, pos = 12, 30
    y = rng.integers(0, 10, (n, pos))
    p = np.where(rng.random((n, pos)) < 0.6, y, rng.integers(0, 10, (n, pos)))
    height = np.where(rng.random((n, pos)) < 0.4, rng.integers(1, 15, (n, pos)), -1)
    op = np.where(height > 0, rng.integers(0, 4, (n, pos)), -1)
    y[(height < 0) & (rng.random((n, pos)) < 0.7)] = -100
    y[0, np.flatnonzero(height[0] > 0)[:1]] = -100  # a node position without a label does not count
    m = ClassificationMetrics(10, 5, n, kind="token", breakdowns={"node_height": 15, "node_op": 4})
    for chunk in torch.arange(n).split(5):
        idx = chunk.numpy()
        m.update(torch.from_numpy(p[idx]), torch.from_numpy(y[idx]), chunk,
                 extra={"node_height": torch.from_numpy(height[idx]).to(torch.int8),
                        "node_op": torch.from_numpy(op[idx]).to(torch.int8)})
    tables = m.compute()["breakdowns"]
    for name, field in (("node_height", height), ("node_op", op)):
        expected = {}
        for b in np.unique(field[field >= 0]):
            sel = (field == b) & (y != -100)
            if sel.sum():
                expected[str(b)] = {"correct": int((p[sel] == y[sel]).sum()), "total": int(sel.sum()),
                                    "accuracy": float((p[sel] == y[sel]).mean())}
        assert tables[name] == expected
    with pytest.raises(ValueError, match="missing"):
        m.update(torch.from_numpy(p[:1]), torch.from_numpy(y[:1]), torch.tensor([0]))


def test_classification_input_checks():
    m = ClassificationMetrics(3, 2, 4, kind="segmentation")
    with pytest.raises(ValueError, match="outside"):
        m.update(torch.tensor([[0, 1]]), torch.tensor([[0, 3]]), torch.tensor([0]))
    with pytest.raises(ValueError, match="logits"):
        m.update(torch.zeros(1, 2, 4), torch.tensor([[0, 1]]), torch.tensor([0]))
    with pytest.raises(ValueError, match="kind"):
        ClassificationMetrics(3, 2, 4, kind="pixels")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------- losses


def test_class_weighted_cross_entropy_against_a_slow_loop():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 9, 3, generator=g, requires_grad=True)
    target = torch.tensor([[0, 0, 0, 0, 0, 1, 1, -100, 0], [0, 1, 0, -100, 0, 0, 0, 0, 1]])  # class 2 absent
    nll = -torch.log_softmax(logits.detach().double(), -1)
    per_class = []
    for c in range(3):
        cells = [nll[b, i, c] for b in range(2) for i in range(9) if target[b, i] == c]
        if cells:
            per_class.append(sum(cells) / len(cells))
    slow = sum(per_class) / len(per_class)
    loss = losses.class_weighted_cross_entropy(logits, target)
    assert loss.item() == pytest.approx(slow.item(), rel=1e-6)
    counts = torch.bincount(target[target >= 0], minlength=3).float()
    w = torch.where(counts > 0, 1 / counts.clamp_min(1), 0.0)
    assert loss.item() == pytest.approx(F.cross_entropy(logits.reshape(-1, 3), target.reshape(-1), weight=w).item(),
                                        rel=1e-6)
    loss.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    assert logits.grad[0, 7].abs().sum() == 0  # the ignored position gets no gradient


def test_masked_cross_entropy_and_all_ignored_batches():
    g = torch.Generator().manual_seed(6)
    logits = torch.randn(3, 5, 10, generator=g).to(torch.bfloat16)
    target = torch.full((3, 5), -100)
    target[:, -1] = torch.tensor([4, 0, 9])  # one label per sequence (LRA ListOps)
    nll = -torch.log_softmax(logits.float(), -1)
    slow = (nll[0, 4, 4] + nll[1, 4, 0] + nll[2, 4, 9]) / 3
    assert losses.masked_cross_entropy(logits, target).item() == pytest.approx(slow.item(), rel=1e-6)
    none = torch.full((3, 5), -100)
    x = torch.randn(3, 5, 10, requires_grad=True)
    for fn in (losses.masked_cross_entropy, losses.class_weighted_cross_entropy):
        out = fn(x, none)
        out.backward()
        assert out.item() == 0.0 and x.grad is not None


def test_worked_examples_in_docstrings():
    for module in (metrics, losses):
        result = doctest.testmod(module, raise_on_error=False, verbose=False)
        assert result.failed == 0 and result.attempted > 0


# ------------------------------------------------------------------------------------- all_reduce_metrics

RANK_SCRIPT = textwrap.dedent("""
    import json, sys, torch, torch.distributed as dist
    from ssmbench.harness.metrics.states import ClassificationMetrics, RegressionMetrics, all_reduce_metrics
    rank, store, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    g = torch.Generator().manual_seed(11)
    n = 22
    y, noise = torch.randn(n, 8, 2, generator=g), torch.randn(n, 8, 2, generator=g)
    logits, t = torch.randn(n, 8, 10, generator=g), torch.randint(0, 10, (n, 8), generator=g)
    height = torch.randint(-1, 15, (n, 8), generator=g)
    mine = torch.arange(rank, n, 2)  # interleaved samples: every virtual batch is split between the ranks
    reg = RegressionMetrics(2, 4, n)
    cls = ClassificationMetrics(10, 4, n, kind="token", breakdowns={"node_height": 15})
    reg.update(y[mine] + noise[mine], y[mine], mine)
    cls.update(logits[mine], t[mine], mine, extra={"node_height": height[mine]})
    all_reduce_metrics(reg)
    all_reduce_metrics(cls)
    json.dump({"reg": reg.compute(), "cls": cls.compute()}, open(out, "w"))
    dist.destroy_process_group()
""")


def test_all_reduce_metrics_over_two_gloo_processes_equals_one_process(tmp_path):
    from ssmbench.harness.metrics.states import all_reduce_metrics

    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    env = {**os.environ, "PYTHONSAFEPATH": "1", "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, str(script), str(r), str(tmp_path / "store"), str(tmp_path / f"{r}")],
                              env=env, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    for proc in procs:
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-2000:]
    g = torch.Generator().manual_seed(11)
    n = 22
    y, noise = torch.randn(n, 8, 2, generator=g), torch.randn(n, 8, 2, generator=g)
    logits, t = torch.randn(n, 8, 10, generator=g), torch.randint(0, 10, (n, 8), generator=g)
    height = torch.randint(-1, 15, (n, 8), generator=g)
    reg, cls = RegressionMetrics(2, 4, n), ClassificationMetrics(10, 4, n, kind="token", breakdowns={"node_height": 15})
    reg.update(y + noise, y, torch.arange(n))
    cls.update(logits, t, torch.arange(n), extra={"node_height": height})
    all_reduce_metrics(reg)  # no process group here: a no-op
    one = {"reg": reg.compute(), "cls": cls.compute()}
    for r in (0, 1):
        two = json.loads((tmp_path / f"{r}").read_text())
        assert two["cls"] == json.loads(json.dumps(one["cls"]))  # confusion, breakdowns: identical
        for key in ("r2", "mse", "r2_batchavg"):
            assert two["reg"][key] == pytest.approx(one["reg"][key], rel=1e-12)
        assert two["reg"]["n_batches_batchavg"] == one["reg"]["n_batches_batchavg"] == 5


# ---------------------------------------------------------------------------------------------- devices


@pytest.mark.gpu
def test_states_accumulate_on_cuda_like_on_cpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    g = torch.Generator().manual_seed(9)
    y = torch.randn(20, 33, 2, generator=g)
    p = y + torch.randn(20, 33, 2, generator=g)
    cpu, gpu = RegressionMetrics(2, 3, 20), RegressionMetrics(2, 3, 20)
    cpu.update(p, y, torch.arange(20))
    gpu.update(p.cuda().half(), y.cuda().half(), torch.arange(20).cuda())
    cpu_half = RegressionMetrics(2, 3, 20)
    cpu_half.update(p.half(), y.half(), torch.arange(20))
    assert gpu.state_tensors()[0].is_cuda
    assert gpu.compute() == pytest.approx(cpu_half.compute(), rel=1e-12)
    logits = torch.randn(20, 33, 3, generator=g)
    t = torch.randint(0, 3, (20, 33), generator=g)
    c_cpu, c_gpu = (ClassificationMetrics(3, 4, 20, kind="segmentation") for _ in range(2))
    c_cpu.update(logits, t, torch.arange(20))
    c_gpu.update(logits.cuda(), t.cuda(), torch.arange(20).cuda())
    assert c_gpu.compute()["confusion"] == c_cpu.compute()["confusion"]


@pytest.mark.parametrize("kind", ["token", "segmentation"])
def test_vocabulary_sized_outputs_keep_counts_not_a_confusion_matrix(kind, monkeypatch):
    """Above DENSE_CONFUSION_MAX classes (MQAR's 8,192 ids) the state is (K, 3, C) counts; every metric but
    `confusion` equals the dense state's on the same batches, and the state stays summable across ranks."""
    c = metrics.DENSE_CONFUSION_MAX + 44
    gen = torch.Generator().manual_seed(0)
    batches = []
    for start in range(0, 12, 4):
        target = torch.randint(0, 12, (4, 9), generator=gen)  # a few classes, so predictions often hit them
        target[torch.rand(4, 9, generator=gen) < 0.3] = -100
        logits = torch.randn(4, 9, c, generator=gen)
        logits[..., :12] += 2.0
        batches.append((logits, target, torch.arange(start, start + 4)))

    def run() -> tuple[ClassificationMetrics, dict]:
        m = ClassificationMetrics(c, metric_batch_size=4, num_samples=12, kind=kind)
        for logits, target, index in batches:
            m.update(logits, target, index)
        return m, m.compute()

    compact, got = run()
    assert not compact.dense and "confusion" not in got
    assert [t.shape for t in compact.state_tensors()] == [(3,), (3, 3, c)]
    monkeypatch.setattr(metrics, "DENSE_CONFUSION_MAX", c)
    dense, want = run()
    assert dense.dense and len(want.pop("confusion")) == c
    assert got.keys() == want.keys()
    for key in got:
        np.testing.assert_array_equal(np.asarray(got[key], np.float64), np.asarray(want[key], np.float64), key)
    assert 0.0 < got["accuracy"] < 1.0
