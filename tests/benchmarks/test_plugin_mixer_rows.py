"""The plug-in mixer of the recall rows (benchmarks/plugins/taylor_attention.py): its parallel form equals the slow
linear-RNN form over the explicit Taylor features, it is causal, and the harness trains it from its `module:Class`
string like a user's own file (docs/results.md, the zoology and MAD rows)."""

from __future__ import annotations

import pytest
import torch

import ssmbench
from support import REPO, load_file

plugin = load_file(REPO / "benchmarks" / "plugins" / "taylor_attention.py", "taylor_attention_plugin")
NAME = "benchmarks.plugins.taylor_attention:TaylorAttention"  # what users type: found from the working directory


def test_feature_map_inner_product_is_the_second_order_taylor_expansion_of_exp():
    a, b = torch.randn(5, 7, dtype=torch.float64), torch.randn(5, 7, dtype=torch.float64)
    s = (a * b).sum(-1)
    got = (plugin.taylor_features(a) * plugin.taylor_features(b)).sum(-1)
    torch.testing.assert_close(got, 1 + s + s * s / 2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_heads, d_feature, chunk", [(1, 4, 256), (2, 8, 256), (2, 4, 5), (1, 4, 8)])
def test_parallel_and_chunked_forms_equal_the_recurrent_form(n_heads, d_feature, chunk):
    torch.manual_seed(0)
    layer = plugin.TaylorAttention(16, l_max=24, n_heads=n_heads, d_feature=d_feature, chunk=chunk).double()
    x = torch.randn(3, 24, 16, dtype=torch.float64)
    torch.testing.assert_close(layer(x), layer.recurrent_forward(x), rtol=1e-10, atol=1e-10)


def test_outputs_before_a_cut_do_not_see_inputs_after_it():
    torch.manual_seed(1)
    layer = plugin.TaylorAttention(8, l_max=20, n_heads=2, d_feature=4).double()
    x = torch.randn(2, 20, 8, dtype=torch.float64)
    y = x.clone()
    y[:, 11:] = torch.randn(2, 9, 8, dtype=torch.float64)
    torch.testing.assert_close(layer(x)[:, :11], layer(y)[:, :11], rtol=0, atol=1e-12)
    assert not torch.allclose(layer(x)[:, 11:], layer(y)[:, 11:])


def test_refuses_to_run_bidirectional_and_an_uneven_head_split():
    with pytest.raises(ValueError, match="causal only"):
        plugin.TaylorAttention(8, l_max=4, bidirectional=True)
    with pytest.raises(ValueError, match="not divisible"):
        plugin.TaylorAttention(10, l_max=4, n_heads=3)


def test_the_harness_trains_it_on_mqar_from_its_module_string(tmp_path):
    r = ssmbench.evaluate(NAME, "mqar", overrides={
        "task.L": 32, "task.num_kv_pairs": 2, "task.vocab_size": 16, "model.d_model": 16, "model.n_heads": 2,
        "train.steps": 6, "train.eval_every": 3, "train.log_every": 3, "eval.val_samples": 16,
        "eval.test_samples": 16, "eval.metric_batch_size": 8, "data.workers": 0}, out=tmp_path / "run", quiet=True)
    assert 0.0 <= r.metrics["test"]["accuracy"] <= 1.0
    assert r.config.model == NAME and (tmp_path / "run" / "metrics.json").exists()
