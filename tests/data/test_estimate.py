"""The build-time estimate's model: CPU per sample times samples over the cores in use, plus a fixed cost."""

from __future__ import annotations

import os

from ssmbench.data.build import plan_build
from ssmbench.data.estimate import estimate_build
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
