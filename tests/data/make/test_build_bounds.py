"""`generate`'s sizes are bounded where they are parsed (issue 37, item 3): `--n 99999999999999 --dry-run` planned
every shard of it until the process was killed; `--samples-per-shard 0` was taken for "automatic"."""

from __future__ import annotations

import pytest

from ssmbench.data.make.generate import plan_build
from ssmbench.errors import ConfigError
from ssmbench.registry import get_task


@pytest.mark.parametrize("kwargs, line", [
    ({"n": 99_999_999_999_999}, "--n: must be <= 1,000,000,000, got 99,999,999,999,999"),
    ({"n": 0}, "--n: must be at least 1, got 0"),
    ({"samples_per_shard": 0}, "--samples-per-shard: must be >= 1, got 0"),
    ({"n": 10 ** 9, "samples_per_shard": 1}, "--samples-per-shard: 1 gives 1,000,000,000 shards, more than 1,000,000"),
])
def test_absurd_build_sizes_are_one_line_before_any_shard_is_planned(kwargs, line):
    config = get_task("cumsum").Config(L=64)
    with pytest.raises(ConfigError) as caught:
        plan_build("cumsum", config, **kwargs)
    assert str(caught.value).startswith(line) and caught.value.exit_code == 2, str(caught.value)


def test_a_billion_samples_with_automatic_shards_is_planned():
    """The bound is no obstacle to a large build: its automatic shards stay few."""
    plan = plan_build("cumsum", get_task("cumsum").Config(L=64), n=10 ** 9)
    assert sum(plan.sizes.values()) == 10 ** 9 and len(plan.shards) < 10 ** 5
