"""`TrainingPolicy` refuses malformed rules when a task module is imported, and its rules cannot be changed later."""

from __future__ import annotations

import pytest

from ssmbench.errors import ConfigError
from ssmbench.registry import get_task
from ssmbench.training_policy import TrainingPolicy


def test_a_misspelt_data_source_or_a_non_integer_group_position_is_refused():
    with pytest.raises(ConfigError, match="training_data: must be 'stream' or 'folder', got 'folders'"):
        TrainingPolicy(training_data="folders")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="groups: maps group names to integer positions, got 'atomic': '3'"):
        TrainingPolicy(groups={"atomic": "3"})  # type: ignore[dict-item]


def test_groups_are_a_read_only_copy():
    declared = {"atomic": 1}
    policy = TrainingPolicy(groups=declared)
    declared["atomic"] = 5
    assert policy.groups == {"atomic": 1}
    with pytest.raises(TypeError):
        policy.groups["atomic"] = 2  # type: ignore[index]


def test_config_dependent_rules_of_the_built_in_tasks():
    shift, listops = get_task("shift"), get_task("listops_subtrees")
    families = {L: shift.policy.paper_rows("shift", shift.Config(L=L)) for L in (4096, 512, 1000)}
    assert families == {4096: "atomic", 512: "atomic512", 1000: "long_shift"}
    assert get_task("cumsum").policy.paper_rows("cumsum", get_task("cumsum").Config(L=1000)) == "atomic"
    short = listops.presets["short"]
    assert listops.policy.breakdowns(short) == {"node_height": 10, "node_op": 4}
    assert listops.policy.paper_config(short) == listops.presets["dlr"]
    assert listops.policy.quick_section("listops_subtrees") == "listops_subtrees"
