"""What the Chomsky-hierarchy regular tasks share (parity_check, even_pairs, cycle_navigation, modular_arithmetic).

Delétang et al. (ICLR 2023; google-deepmind/neural_networks_chomsky_hierarchy) give a model the string as one-hot
symbols, then one extra "output" token (id = the number of input symbols: `make_model_with_empty_targets` with
`computation_steps_mult = 0`), and read the one class from the model's output at that last position. ssmbench
stores exactly that tape: `inputs` (n + 1,) = the n symbol ids, then the query id; `targets` (n + 1,) = -100 at the
n symbols and the class at the query position (as LRA ListOps labels its root's closing bracket).

>>> spec = final_label_spec(3, ("0", "1"), ("even", "odd"), "bits", "parity")
>>> spec.seq_len, spec.d_input, spec.d_output, spec.fields["inputs"].attrs["query_id"]
(4, 3, 2, 2)
>>> check_final_layout("parity_check", [1, 0, 1, 2], [-100, -100, -100, 0], 2, 2)
[1, 0, 1]
>>> keys, out = empty_tapes(np.arange(3), 5)
>>> out["inputs"].shape, out["targets"].dtype.name, final_targets(2, 1).tolist()
((3, 6), 'int8', [-100, -100, 1])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ssmbench.api import Field, Spec, TaskConfig
from ssmbench.errors import VerificationError

from ._recall import IGNORE_INDEX, check_int

MAX_STRING = 2**16
"""The longest string (the paper tests up to 500; the bound keeps a sample's tape a few tens of kilobytes)."""
PAPER_TRAIN_LENGTHS = (1, 40)
"""Training lengths of the paper: uniform in 1..40, one length per batch (`experiments/example.py`, Section 4)."""
PAPER_TEST_LENGTHS = (41, 500)
"""Test lengths of the paper: every length 41..500 (Section 4: 'sequences of length 41 to 500')."""


def check_length(value: object) -> int:
    """The string length L (the paper's `length`): an integer in 1 .. MAX_STRING, ConfigError naming `L`."""
    return check_int("L", value, 1, MAX_STRING)


@dataclass(frozen=True)
class StringConfig(TaskConfig):
    """The config of a regular task: its string length L, any length the train-short/test-long protocol asks for."""

    L: int = 40
    """Length of the string (the paper's `length`; it trains on 1..40 and tests on 41..500)."""

    def __post_init__(self) -> None:
        check_length(self.L)


def empty_tapes(keys: np.ndarray, n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(keys as contiguous uint64, the uninitialised `inputs` / `targets` arrays (N, n + 1)) of a batch."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
    return keys, {"inputs": np.empty((keys.shape[0], n + 1), np.uint8),
                  "targets": np.empty((keys.shape[0], n + 1), np.int8)}


def final_targets(n: int, label: int) -> np.ndarray:
    """The targets row (n + 1,) of a string of n symbols: -100, then `label` at the query."""
    targets = np.full(n + 1, IGNORE_INDEX, np.int8)
    targets[-1] = label
    return targets


def final_label_spec(n: int, symbols: Sequence[str], classes: Sequence[str], input_doc: str, target_doc: str
                     ) -> Spec:
    """The Spec of a string of n symbols followed by one query token, with one class label at the query."""
    query = len(symbols)
    fields = {
        "inputs": Field("uint8", (n + 1,), f"{input_doc}; then the query id {query} (the paper's output token)",
                        attrs={"vocab": [*symbols, "<query>"], "query_id": query}),
        "targets": Field("int8", (n + 1,), f"{target_doc}, at the last position (the query); -100 elsewhere",
                         attrs={"classes": list(classes), "ignore_index": IGNORE_INDEX}),
    }
    return Spec(fields=fields, input_kind="tokens", d_input=query + 1, seq_len=n + 1, target_kind="classify",
                d_output=len(classes), l_output=n + 1, ignore_index=IGNORE_INDEX, causal=True, input_scale=None,
                metrics=("token_accuracy", "scaled_accuracy"))


def check_final_layout(task: str, inputs: Sequence[int], targets: Sequence[int], n_symbols: int,
                       n_classes: int) -> list[int]:
    """The string of a stored sample (its symbols before the query); VerificationError unless the layout holds."""
    x, y = [int(t) for t in inputs], [int(t) for t in targets]
    problems = []
    if not x or x[-1] != n_symbols:
        problems.append(f"the last token is {x[-1:]} , not the query id {n_symbols}")
    if any(not 0 <= t < n_symbols for t in x[:-1]):
        problems.append(f"a string token is outside 0..{n_symbols - 1}")
    if any(t != IGNORE_INDEX for t in y[:-1]) or not y or not 0 <= y[-1] < n_classes:
        problems.append(f"targets must be -100 but for one class in 0..{n_classes - 1} at the last position")
    if problems:
        raise VerificationError(f"{task} sample is malformed", problems)
    return x[:-1]
