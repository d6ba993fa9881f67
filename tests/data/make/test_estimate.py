"""The build-time estimate's model: CPU per sample times samples over the cores in use, plus a fixed cost."""

from __future__ import annotations

import os

from ssmbench.data.make.estimate import estimate_build
from ssmbench.data.make.generate import plan_build
from ssmbench.registry import get_task


def test_time_estimate_is_fixed_cost_plus_cpu_per_sample_over_the_cores_in_use():
    task = get_task("cumsum")
    config = task.Config(L=64)
    small = plan_build("cumsum", config, n=1_000, samples_per_shard=256)
    big = plan_build("cumsum", config, n=100_000, samples_per_shard=256)
    one = estimate_build(task, config, big, workers=1)
    per_sample = one["gen_cpu_per_sample"] + one["write_cpu_per_sample"]
    assert one["gen_cpu_per_sample"] > 0 and one["write_cpu_per_sample"] > 0 and one["fixed_seconds"] > 0
    assert 1.0 <= one["generator_threads_speedup"] <= (os.cpu_count() or 1)
    assert 0 < one["probe_seconds"] < one["fixed_seconds"]  # the probe is part of the fixed cost, not all of it
    # one worker: the generator's threads, then a serial write
    want = one["fixed_seconds"] + 100_000 * (one["gen_cpu_per_sample"] / one["generator_threads_speedup"]
                                             + one["write_cpu_per_sample"])
    assert abs(one["seconds"] - want) <= 1e-6 * want
    # a pool: every sample's CPU spread over min(workers, cores) processes, plus the workers' start-up
    two = estimate_build(task, config, big, workers=2)
    busy = min(2, os.cpu_count() or 1)
    assert two["fixed_seconds"] > one["fixed_seconds"]
    assert abs(two["seconds"] - two["fixed_seconds"] - 100_000 * (two["gen_cpu_per_sample"] +
                                                                  two["write_cpu_per_sample"]) / busy) <= 1e-3
    # the fixed cost does not scale with n; the rest does
    few = estimate_build(task, config, small, workers=1)
    assert few["seconds"] >= few["fixed_seconds"] > 0.5 * one["fixed_seconds"]
    assert few["seconds"] - few["fixed_seconds"] < 0.05 * (one["seconds"] - one["fixed_seconds"]) + 1000 * per_sample


def test_a_cold_numba_cache_adds_its_measured_compile_once_and_a_quiet_build_keeps_it(tmp_path, monkeypatch):
    """A first kernel call that compiles (Numba's cache cold) is injected: it takes 50 CPU-seconds on a fake clock.
    The estimate counts those 50 s once in `seconds` and `fixed_seconds`, not in `probe_seconds` (a --quiet build
    skips the probe, not the compile), not again for a pool's workers (they load what was compiled), says so in
    its human time, and records the measurement under the task, its version and the Numba version; a warm
    estimate then adds nothing and reports the recorded cold cost."""
    import json
    import time

    import numba

    from ssmbench.data.make import estimate

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    task = get_task("cumsum")
    config = task.Config(L=64)
    plan = plan_build("cumsum", config, n=1_000, samples_per_shard=256)
    estimate_build(task, config, plan, workers=1)  # kernels in memory: every later call here is warm
    offset = [0.0]
    monkeypatch.setattr(estimate, "_cpu", lambda: time.process_time() + offset[0])
    real = estimate.load_kernels

    def cold(task, config, keys, say=None):
        seconds, _ = real(task, config, keys, say)
        offset[0] += 50.0  # the clock moves as a 50 s compile would
        return seconds + 50.0, True

    warm1, warm2 = (estimate_build(task, config, plan, workers=w) for w in (1, 2))
    assert warm1["numba_cache"] == "warm" and warm1["compile_seconds"] == 0 and warm1["compile_seconds_cold"] is None
    monkeypatch.setattr(estimate, "load_kernels", cold)
    cold1, cold2 = [], []
    for w, out in ((1, cold1), (2, cold2)):
        offset[0] = 0.0  # each estimate starts from the process's own CPU (its `startup`)
        out.append(estimate_build(task, config, plan, workers=w))
    cold1, cold2 = cold1[0], cold2[0]
    for c, w in ((cold1, warm1), (cold2, warm2)):
        assert c["numba_cache"] == "cold" and 50 <= c["compile_seconds"] < 55
        assert 45 < c["seconds"] - w["seconds"] < 55 and 45 < c["fixed_seconds"] - w["fixed_seconds"] < 55
        assert c["probe_seconds"] < 5 and c["seconds"] - c["probe_seconds"] > 50  # what a --quiet build pays
        assert "of it compiling the cumsum kernels" in c["time_human"] and "cold" in c["time_human"]
    record = json.loads((tmp_path / "cache" / "ssmbench" / "compile-seconds.json").read_text())
    key = f"cumsum v{task.version} numba {numba.__version__}"
    assert sorted(record) == [key, f"{key} load"] and record[key] >= 50 and record[f"{key} load"] < 5
    monkeypatch.setattr(estimate, "load_kernels", real)
    offset[0] = 0.0
    again = estimate_build(task, config, plan, workers=1)
    assert again["compile_seconds"] == 0 and again["compile_seconds_cold"] == record[key]
    assert again["seconds"] < cold1["seconds"] - 45 and "compiling" not in again["time_human"]


def test_a_dry_run_that_compiles_estimates_the_build_after_it_which_only_loads_the_kernels(tmp_path, monkeypatch):
    """Issue 37: a dry run right after a fresh install compiled (and cached) the kernels in its probe and counted
    that compile in the estimate of the build that followed, which only loaded them (64 s predicted, 23.9 s taken).
    With `later=True` a compiling probe counts the recorded warm load time instead, once: the estimate equals the
    warm one's, give or take the probe's own noise, and its human time says the kernels are cached now; the
    same compile in the build's own estimate (`later=False`) is still counted, once."""
    from ssmbench.data.make import estimate

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    task = get_task("cumsum")
    config = task.Config(L=64)
    plan = plan_build("cumsum", config, n=1_000, samples_per_shard=256)
    estimate_build(task, config, plan, workers=1)  # kernels in memory
    warm = estimate_build(task, config, plan, workers=2, later=True)  # records the warm load
    assert warm["numba_cache"] == "warm"
    assert abs(warm["load_seconds"] - estimate.recorded_compile_seconds(task, "load")) <= 1e-3
    offset = [0.0]
    monkeypatch.setattr(estimate, "_cpu", lambda: __import__("time").process_time() + offset[0])
    real = estimate.load_kernels

    def cold(task, config, keys, say=None):
        seconds, _ = real(task, config, keys, say)
        offset[0] += 50.0
        return seconds + 50.0, True

    monkeypatch.setattr(estimate, "load_kernels", cold)
    dry = estimate_build(task, config, plan, workers=2, later=True)
    offset[0] = 0.0
    build = estimate_build(task, config, plan, workers=2)
    assert dry["numba_cache"] == "cold" and dry["compile_seconds"] >= 50
    assert abs(dry["seconds"] - warm["seconds"]) < 2, (dry["seconds"], warm["seconds"])
    assert abs(dry["load_seconds"] - warm["load_seconds"]) <= 1e-3
    assert "cached them for the build" in dry["time_human"] and "of it compiling" not in dry["time_human"]
    assert 45 < build["seconds"] - dry["seconds"] < 55 and "of it compiling" in build["time_human"]


def _compiling(monkeypatch, task):
    """Make the task's generate start one Numba compile event per call, as a cold cache does."""
    from numba.core import event

    real = type(task).generate

    def generate(self, config, keys):
        event.start_event("numba:compile", data={"dispatcher": None, "args": None, "return_type": None})
        try:
            return real(self, config, keys)
        finally:
            event.end_event("numba:compile", data={"dispatcher": None, "args": None, "return_type": None})

    monkeypatch.setattr(type(task), "generate", generate)


def test_a_compiling_probe_says_so_once_and_a_warm_one_says_nothing(tmp_path, monkeypatch, capsys):
    """Issue 37: a first Pathfinder build sat silent for about 85 s of compiling. The estimate's probe now says
    'compiling the TASK kernels (first run only...)' on stderr when a compile starts, once; a quiet caller
    (`say=None`, the space checks a --quiet build runs too) and a warm cache say nothing."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    task = get_task("cumsum")
    config = task.Config(L=64)
    plan = plan_build("cumsum", config, n=200, samples_per_shard=100)
    estimate_build(task, config, plan, workers=1)
    assert "compiling" not in capsys.readouterr().err  # kernels in memory: nothing compiles
    _compiling(monkeypatch, task)
    estimate_build(task, config, plan, workers=1, say=None)
    assert capsys.readouterr().err == ""
    estimate_build(task, config, plan, workers=1)
    err = capsys.readouterr().err
    assert err.count("compiling the cumsum kernels (first run only") == 1, err


def test_the_build_says_compiling_on_its_progress_bar(tmp_path, monkeypatch, capsys):
    """The build's own compile step (before its first shard, at 0 %) names itself on the progress bar."""
    from ssmbench.data.make.generate import generate_dataset

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    task = get_task("shift")
    _compiling(monkeypatch, task)
    _, config = task, task.Config(L=64)
    generate_dataset("shift", config, out=tmp_path, n=40, samples_per_shard=20, quiet=False)
    err = capsys.readouterr().err
    assert "generate shift-64" in err and "compiling the shift kernels (first run only" in err, err
