"""Compute the value of a ListOps expression, labelled at the root's closing bracket (LRA ListOps)

The classic Long Range Arena ListOps task (data_cards/listops.md), built from the same sampler, vocabulary and
schema as `listops_subtrees`: expressions with 500 < length < 2000 tokens (`lra` preset), padded to 2048. `targets`
is -100 everywhere except at the root's `]` (position lengths - 1), which holds the value of the whole expression
(0-9, equal to `root_value`), so token accuracy equals sequence accuracy. Per-node heights and operators are stored
as in `listops_subtrees`. De-duplication and the 96/2/2 split are the same.

Example:
    The expression ``[MAX 2 6 [MED [SM 3 1 6 ] 8 3 ] 4 5 ]``::

        position  0    1 2 3    4   5 6 7 8 9 10 11 12 13 14
        inputs    12   3 7 13   14  4 2 7 15 9 4 15 5  6  15
        targets   -    - - -    -   - - - -  - - -  -  -  6      (- is -100)

    >>> import numpy as np
    >>> ids = np.array([12, 3, 7, 13, 14, 4, 2, 7, 15, 9, 4, 15, 5, 6, 15] + [0] * 17, dtype=np.uint8)
    >>> row = ListOps().oracle(ListOpsConfig(min_length=10, max_length=20, pad_to=32), {"inputs": ids})
    >>> np.flatnonzero(row["targets"] >= 0).tolist(), int(row["targets"][14]), int(row["root_value"])
    ([14], 6, 6)
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ssmbench.api import Spec, Task, TaskConfig, TrainingPolicy

from . import _listops_dedup as _dedup
from . import _listops_sampler as _lo


@dataclass(frozen=True)
class ListOpsConfig(TaskConfig):
    min_length: int = 500
    """Accept a tree only if min_length < token length (exclusive bound)."""
    max_length: int = 2000
    """Accept a tree only if token length < max_length (exclusive bound)."""
    max_args: int = 10
    """Operator arity is uniform in 2..max_args."""
    max_depth: int = 10
    """Nodes at this depth (root = 1) are always digits, so heights are at most max_depth - 1."""
    non_leaf_prob: float = 0.25
    """Probability that a node above max_depth is an operator (a leaf iff u > non_leaf_prob)."""
    pad_to: int = 0
    """Padded sequence length; 0 = max_length rounded up to a multiple of 256 (2048 for lra)."""

    def __post_init__(self) -> None:
        _lo.check_config(self)


@typing.final
class ListOps(Task[ListOpsConfig]):
    """Compute the value of a ListOps expression, labelled at the root's closing bracket (LRA ListOps)"""

    name: ClassVar[str] = "listops"
    hf_task_category: ClassVar[str] = "text-classification"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = ListOpsConfig
    presets: ClassVar[dict[str, ListOpsConfig]] = {"lra": ListOpsConfig()}
    default_preset: ClassVar[str] = "lra"
    default_n: ClassVar[int] = 100_000
    default_split: ClassVar[Mapping[str, float]] = {"train": 0.96, "val": 0.02, "test": 0.02}
    preset_option: ClassVar[typing.Literal["length", "size", "preset"]] = "preset"
    deduplicate: ClassVar[bool] = True
    dedup_fields: ClassVar[tuple[str, ...]] = ("inputs", "lengths")
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(training_data="folder", paper_family="lra_listops")
    """The DLR paper did not train on LRA ListOps: no paper row matches "lra_listops"."""
    _label_all: ClassVar[bool] = False
    """Label only the root's `]` (the one difference from `listops_subtrees`)."""

    def spec(self, config: ListOpsConfig) -> Spec:
        return _lo.build_spec(config, self._label_all)

    def generate(self, config: ListOpsConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        return _lo.sample_batch(config, keys, self._label_all)[0]

    def oracle(self, config: ListOpsConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return _lo.evaluate_tokens(config, sample["inputs"], self._label_all)

    def statistics(self, config: ListOpsConfig, block: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return _lo.statistics(config, block)

    def statistics_markdown(self, config: ListOpsConfig, stats: Mapping[str, Mapping[str, list]]) -> str:
        return _lo.statistics_markdown(config, stats)

    def dedup_hashes(self, config: ListOpsConfig, block: Mapping[str, np.ndarray]) -> np.ndarray:
        return _dedup.dedup_hashes(block["inputs"], block["lengths"])

    def select_survivors(self, config: ListOpsConfig, hashes: np.ndarray, needed: int) -> np.ndarray:
        return _dedup.select_survivors(hashes, needed)

    def dedup_report(self, config: ListOpsConfig, hashes: np.ndarray, split_sizes: Mapping[str, int]
                     ) -> dict[str, Any]:
        return _dedup.dedup_report(hashes, split_sizes)
