"""Tag every closing bracket of a long ListOps expression with the value of the subexpression it closes

ListOps-Subtrees (DLR paper section 3.2; data_cards/listops_subtrees.md): a bracketed prefix expression over the digits 0-9 with
the operators MIN, MAX, MED (median, truncated) and SM (sum modulo 10), 7000 < length < 8180 tokens in the `dlr`
preset, padded to 8192. Every `]` carries the value of its subtree (10 classes); every other position carries -100.
Per-node heights and operators are stored for the paper's Figure 2 breakdown. Samples are drawn structure-first
with early abort (`_listops_sampler`) and de-duplicated by expression and operator template (`_listops_dedup`).

Example:
    The paper's expression ``[MAX 2 6 [MED [SM 3 1 6 ] 8 3 ] 4 5 ]``, encoded with the frozen vocabulary::

        position  0    1 2 3    4   5 6 7 8 9 10 11 12 13 14
        token     [MAX 2 6 [MED [SM 3 1 6 ] 8 3  ]  4  5  ]
        inputs    12   3 7 13   14  4 2 7 15 9 4 15 5  6  15
        targets   -    - - -    -   - - - 0  - - 3  -  -  6      (- is -100)
        height    -    - - -    -   - - - 1  - - 2  -  -  3

    >>> import numpy as np
    >>> ids = np.array([12, 3, 7, 13, 14, 4, 2, 7, 15, 9, 4, 15, 5, 6, 15] + [0] * 17, dtype=np.uint8)
    >>> cfg = ListOpsSubtreesConfig(min_length=10, max_length=20, max_depth=4, pad_to=32)
    >>> row = ListOpsSubtrees().oracle(cfg, {"inputs": ids})
    >>> [(int(i), int(row["targets"][i]), int(row["node_height"][i])) for i in np.flatnonzero(row["targets"] >= 0)]
    [(8, 0, 1), (11, 3, 2), (14, 6, 3)]
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
class ListOpsSubtreesConfig(TaskConfig):
    min_length: int = 7000
    """Accept a tree only if min_length < token length (exclusive bound)."""
    max_length: int = 8180
    """Accept a tree only if token length < max_length (exclusive bound)."""
    max_args: int = 9
    """Operator arity is uniform in 2..max_args."""
    max_depth: int = 15
    """Nodes at this depth (root = 1) are always digits, so heights are at most max_depth - 1."""
    non_leaf_prob: float = 0.25
    """Probability that a node above max_depth is an operator (a leaf iff u > non_leaf_prob)."""
    pad_to: int = 0
    """Padded sequence length; 0 = max_length rounded up to a multiple of 256 (8192 for dlr)."""

    def __post_init__(self) -> None:
        _lo.check_config(self)


@typing.final
class ListOpsSubtrees(Task[ListOpsSubtreesConfig]):
    """Tag every closing bracket of a long ListOps expression with the value of the subexpression it closes"""

    name: ClassVar[str] = "listops_subtrees"
    hf_task_category: ClassVar[str] = "token-classification"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = ListOpsSubtreesConfig
    presets: ClassVar[dict[str, ListOpsSubtreesConfig]] = {
        "dlr": ListOpsSubtreesConfig(),
        "short": ListOpsSubtreesConfig(min_length=1500, max_length=2000, max_args=10, max_depth=10),
    }
    default_preset: ClassVar[str] = "dlr"
    default_n: ClassVar[int] = 100_000
    default_split: ClassVar[Mapping[str, float]] = {"train": 0.96, "val": 0.02, "test": 0.02}
    preset_option: ClassVar[typing.Literal["length", "size", "preset"]] = "preset"
    deduplicate: ClassVar[bool] = True
    dedup_fields: ClassVar[tuple[str, ...]] = ("inputs", "lengths")
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(
        training_data="folder", groups={"higher_order": 0}, paper_family="listops",  # Table 6's ListOps rows
        paper_data=lambda config: ListOpsSubtreesConfig(),  # the `dlr` preset
        # Figure 2: accuracy by node height (< max_depth) and by operator
        metric_breakdowns=lambda config: {"node_height": int(config.max_depth), "node_op": 4})
    _label_all: ClassVar[bool] = True
    """Label every `]` (the one difference from `listops`, which labels only the root)."""

    def spec(self, config: ListOpsSubtreesConfig) -> Spec:
        return _lo.build_spec(config, self._label_all)

    def generate(self, config: ListOpsSubtreesConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        return _lo.sample_batch(config, keys, self._label_all)[0]

    def oracle(self, config: ListOpsSubtreesConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return _lo.evaluate_tokens(config, sample["inputs"], self._label_all)

    def statistics(self, config: ListOpsSubtreesConfig, block: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return _lo.statistics(config, block)

    def statistics_markdown(self, config: ListOpsSubtreesConfig, stats: Mapping[str, Mapping[str, list]]) -> str:
        return _lo.statistics_markdown(config, stats)

    def dedup_hashes(self, config: ListOpsSubtreesConfig, block: Mapping[str, np.ndarray]) -> np.ndarray:
        return _dedup.dedup_hashes(block["inputs"], block["lengths"])

    def select_survivors(self, config: ListOpsSubtreesConfig, hashes: np.ndarray, needed: int) -> np.ndarray:
        return _dedup.select_survivors(hashes, needed)

    def dedup_report(self, config: ListOpsSubtreesConfig, hashes: np.ndarray, split_sizes: Mapping[str, int]
                     ) -> dict[str, Any]:
        return _dedup.dedup_report(hashes, split_sizes)
