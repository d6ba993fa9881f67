"""Every numeric option is finite and inside its declared range where it is parsed (issue 37).

`-o train.lr=nan` / `1e400` ended in a JSON "Out of range float" traceback, `-o train.checkpoint_every=-1` was
accepted, `-o train.steps=99999999999999999999` built a list of every step range until the process was killed, and
`-o model.d_model=100000` passed the memory check, then failed allocating 40 GB with a traceback. Now each is one
line naming the key, the value and the range (exit 2), from one declared table (`run_config.BOUNDS`, the
backbone's `models.BACKBONE_BOUNDS`) and the one value parser (`config.parse_value`).
"""

from __future__ import annotations

import dataclasses
import tracemalloc
import typing

import pytest

import ssmbench
from ssmbench.config import parse_value
from ssmbench.errors import ConfigError
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.config.run_config import BOUNDS, COMMAND_ONLY, SECTIONS, RunConfig, check_keys
from ssmbench.harness.feed.batches import TrainFeed
from ssmbench.harness.training import memory

ABSURD = [
    ("train.lr", "nan", "must be a finite number, got 'nan'"),
    ("train.lr", "1e400", "must be a finite number, got '1e400'"),
    ("train.lr", "-inf", "must be a finite number"),
    ("train.lr", "0", "must be > 0, got 0.0"),
    ("train.lr", "1e6", "must be <= 10, got 1000000.0"),
    ("train.lr_ssm", "0", "must be > 0"),
    ("train.weight_decay", "inf", "must be a finite number"),
    ("train.weight_decay", "-0.1", "must be >= 0, got -0.1"),
    ("train.beta2", "1", "must be < 1, got 1.0"),
    ("train.eps", "0", "must be > 0"),
    ("train.grad_clip", "nan", "must be a finite number"),
    ("train.checkpoint_every", "-1", "must be >= 1, got -1"),
    ("train.checkpoint_every", "0", "must be >= 1, got 0"),
    ("train.eval_every", "1e30", "must be <= 1,000,000,000"),
    ("train.log_every", "0", "must be >= 1"),
    ("train.steps", "99999999999999999999", "must be <= 1,000,000,000, got 99,999,999,999,999,999,999"),
    ("train.warmup_steps", "-1", "must be >= 0"),
    ("train.schedule_steps", "0", "must be >= 1"),
    ("train.batch_size", "0", "must be >= 1"),
    ("train.batch_size", "1e12", "must be <= 16,777,216"),
    ("eval.batch_size", "-4", "must be >= 1"),
    ("eval.val_samples", "0", "must be >= 1"),
    ("data.seed", "-1", "must be >= 0, got -1"),
    ("data.workers", "-1", "must be >= 0"),
    ("hardware.threads", "0", "must be >= 1"),
]


@pytest.mark.parametrize("key, raw, problem", ABSURD, ids=[f"{k}={v}" for k, v, _ in ABSURD])
def test_an_absurd_value_is_one_line_naming_the_key_where_it_is_parsed(key, raw, problem):
    """`check_keys` is what `ssmbench eval` runs on its -o keys before torch is imported; `validate` runs the same
    bounds on a resolved config (a --config file's values, config.json of a resumed run)."""
    with pytest.raises(ConfigError) as caught:
        check_keys({key: raw})
    assert caught.value.exit_code == 2 and str(caught.value).startswith(f"{key}: {problem}"), str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("key, value", [("train.lr", float("nan")), ("train.weight_decay", float("inf")),
                                        ("train.checkpoint_every", -1), ("train.steps", 10 ** 20)])
def test_values_that_arrive_as_numbers_are_bounded_too(key, value):
    """A --config JSON file holds numbers (NaN and 1e400 included: Python's json reads them), which the parser
    passes through: `validate` refuses them, before any digest of the config is taken (which raised "Out of range
    float values are not JSON compliant")."""
    cfg = RunConfig(task="cumsum", task_config={"L": 16}, model="dlr").with_overrides({key: value})
    with pytest.raises(ConfigError, match=f"^{key}: must be"):
        cfg.validate()


def test_every_numeric_key_of_every_section_declares_its_range():
    """A numeric key added later without a bound would let an absurd value through again."""
    command_only = {f"{s}.{k}" for s, k in COMMAND_ONLY}  # train.time_limit: its own parser (> 0, finite)
    numeric = []
    for name, section in SECTIONS.items():
        hints = typing.get_type_hints(section)
        for f in dataclasses.fields(section):
            kinds = set(typing.get_args(hints[f.name])) or {hints[f.name]}
            if kinds & {int, float} and f"{name}.{f.name}" not in command_only:
                numeric.append(f"{name}.{f.name}")
    assert numeric and sorted(k for k in numeric if k not in BOUNDS) == []


@pytest.mark.parametrize("raw", ["nan", "NaN", "Infinity", "-Infinity", "1e400"])
def test_the_value_parser_refuses_non_finite_numbers_of_any_type(raw):
    """Also untyped values (a model key whose type the model's signature does not name) read as literals."""
    for typ in (float, float | None, None):
        with pytest.raises(ConfigError, match="model.x: (must be a finite number|cannot parse)"):
            parse_value(raw, typ, "model.x")


@pytest.mark.parametrize("key, raw, problem", [("model.dropout", "nan", "must be a finite number"),
                                                ("model.dropout", "1", "must be < 1"),
                                                ("model.d_model", "0", "must be >= 1"),
                                                ("model.n_layers", "1e9", "must be <= 10,000")])
def test_backbone_sizes_and_rates_are_bounded(key, raw, problem):
    from ssmbench.harness.models.build import build_model

    cfg = RunConfig(task="cumsum", task_config={"L": 16}, model="dlr")
    with pytest.raises(ConfigError, match=f"^{key}: {problem}"):
        build_model("dlr", cfg.spec(), {key: raw})


def test_step_ranges_are_computed_lazily():
    """A billion steps (the most a run may ask for) cost no memory before the first step: the feed's message
    ranges are computed when asked for (an eager list of them filled the memory, issue 37)."""
    tracemalloc.start()
    try:
        feed = TrainFeed("cumsum", {"L": 8}, data_seed=0, batch_size=2, start_step=0, stop_step=10 ** 9,
                         workers=0, steps_per_message=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert len(feed.ranges) == -(-10 ** 9 // 3) and feed.ranges[-1] == (999_999_999, 10 ** 9)
    assert list(feed.ranges[5:7]) == [(15, 18), (18, 21)]
    first = next(iter(feed))
    assert first[0] == 0 and tuple(first[1]["inputs"].shape) == (2, 8, 3)


def test_a_model_too_large_for_the_device_is_refused_before_it_is_built(tmp_path, monkeypatch):
    """`-o model.d_model=100000`: one 100000 x 100000 output projection per layer (40 GB), x 4 with gradients and
    AdamW's moments. The bound counts the parameters on a build on the meta device (nothing allocated), so the run
    is refused in one line before `trainer.setup` builds the model, and no run folder is left."""
    from ssmbench.harness.training import trainer

    def built(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(trainer, "setup", built)
    monkeypatch.setattr(memory, "free_bytes", lambda device: 64 << 30)
    with pytest.raises(ConfigError) as caught:
        ssmbench.evaluate("dlr", "cumsum", length=16, overrides={"model.d_model": 100000}, out=tmp_path / "run",
                          quiet=True)
    message = caught.value.message
    assert message.startswith("model: this run needs at least") and "for the model: its parameters x 4" in message
    assert "64.0 GiB is free" in message and "-o model.d_model=25000" in caught.value.hint
    assert not (tmp_path / "run").exists()


def test_the_model_bound_counts_what_a_real_build_holds():
    """Trainable parameters x 4 plus buffers, as a build on the CPU has them; a factory (a whole model) too."""
    import torch

    from ssmbench.harness.models.build import build_model

    for model in ("dlr", "user_mixers:build_whole"):
        cfg = resolve_run(model, "cumsum", length=32)
        real = build_model(cfg.model, cfg.spec(), dict(cfg.model_overrides))
        want = sum(4 * p.numel() * p.element_size() for p in real.parameters()) + \
            sum(b.numel() * b.element_size() for b in real.buffers())
        assert memory.model_bytes(cfg, cfg.spec()) == want > 0, model
        assert not any(p.device.type == "meta" for p in real.parameters()) and torch.get_default_device().type == "cpu"
