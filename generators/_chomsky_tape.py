"""The output tape of the Chomsky-hierarchy tasks whose answer is a string (reverse_string, stack_manipulation, ...).

Delétang et al. (ICLR 2023; google-deepmind/neural_networks_chomsky_hierarchy) append to the n input symbols as many
"output" tokens as the answer is long (`experiments/utils.py`, `make_model_with_empty_targets`: T tokens of id =
the number of input symbols, T = the task's `output_length(n)`) and read the answer from the model's outputs at
those T positions. ssmbench stores that tape: `inputs` (n + T,) = the symbol ids, then T query ids; `targets`
(n + T,) = -100 at the symbols, then the answer, with -100 also after a termination token where the paper's
`accuracy_mask` stops scoring (stack_manipulation, binary_addition, binary_multiplication).

>>> spec = tape_spec(3, 3, ("0", "1"), ("0", "1"), "bits", "the reversed string")
>>> spec.seq_len, spec.d_input, spec.d_output, spec.fields["inputs"].attrs["query_id"]
(6, 3, 2, 2)
>>> check_tape_layout("reverse_string", [1, 0, 0, 2, 2, 2], [-100, -100, -100, 0, 0, 1], 3, 2, 2)
([1, 0, 0], [0, 0, 1])
>>> tape_targets(2, [1, 2, 0], scored=2).tolist()
[-100, -100, 1, 2, -100]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ssmbench.api import Field, Spec
from ssmbench.errors import VerificationError

from ._recall import IGNORE_INDEX


def empty_tape(keys: np.ndarray, n: int, T: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(keys as contiguous uint64, the uninitialised `inputs` / `targets` arrays (N, n + T)) of a batch."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
    return keys, {"inputs": np.empty((keys.shape[0], n + T), np.uint8),
                  "targets": np.empty((keys.shape[0], n + T), np.int8)}


def tape_targets(n: int, output: Sequence[int], scored: int | None = None) -> np.ndarray:
    """The targets row (n + T,): -100 at the n symbols, the first `scored` output tokens (all by default), -100."""
    T = len(output)
    scored = T if scored is None else scored
    targets = np.full(n + T, IGNORE_INDEX, np.int8)
    targets[n:n + scored] = np.asarray(output[:scored], np.int8)
    return targets


def tape_spec(n: int, T: int, symbols: Sequence[str], classes: Sequence[str], input_doc: str, target_doc: str
              ) -> Spec:
    """The Spec of n symbols followed by T query tokens, the answer's classes at the query positions."""
    query = len(symbols)
    fields = {
        "inputs": Field("uint8", (n + T,), f"{input_doc}; then {T} query ids {query} (the paper's output tokens)",
                        attrs={"vocab": [*symbols, "<query>"], "query_id": query}),
        "targets": Field("int8", (n + T,), f"{target_doc}, at the {T} query positions; -100 at the symbols",
                         attrs={"classes": list(classes), "ignore_index": IGNORE_INDEX}),
    }
    return Spec(fields=fields, input_kind="tokens", d_input=query + 1, seq_len=n + T, target_kind="classify",
                d_output=len(classes), l_output=n + T, ignore_index=IGNORE_INDEX, causal=True, input_scale=None,
                metrics=("token_accuracy",))


def check_tape_layout(task: str, inputs: Sequence[int], targets: Sequence[int], n: int, n_symbols: int,
                      n_classes: int) -> tuple[list[int], list[int]]:
    """(the string, the stored answer with its -100s) of a sample; VerificationError unless the layout holds."""
    x, y = [int(t) for t in inputs], [int(t) for t in targets]
    problems = []
    if len(x) != len(y) or len(x) < n:
        problems.append(f"inputs ({len(x)}) and targets ({len(y)}) must both hold the {n} symbols and the queries")
    elif any(not 0 <= t < n_symbols for t in x[:n]):
        problems.append(f"a string token is outside 0..{n_symbols - 1}")
    elif any(t != n_symbols for t in x[n:]):
        problems.append(f"the tokens after the string must all be the query id {n_symbols}")
    elif any(t != IGNORE_INDEX for t in y[:n]) or any(not (0 <= t < n_classes or t == IGNORE_INDEX) for t in y[n:]):
        problems.append(f"targets must be -100 at the string and in 0..{n_classes - 1} (or -100) after it")
    if problems:
        raise VerificationError(f"{task} sample is malformed", problems)
    return x[:n], y[n:]
