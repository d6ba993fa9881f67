"""De-duplication of ListOps candidates by expression and by operator template (data_cards/listops_subtrees.md, Generation procedure).

Candidate c is drawn from its own key, so candidates are independent of the worker count. Finalize (in the core)
calls `select_survivors` on their 128-bit hashes: a candidate is dropped when its expression or its template equals
that of a lower-index candidate already kept, which keeps the lowest candidate index of every duplicate group.
Survivors are then assigned in candidate order to train, val and test. Everything here is sort-based NumPy over
fixed-width hashes; token rows are touched only to confirm hash matches.

>>> h = np.array([[1, 1, 5, 5], [2, 2, 6, 6], [1, 1, 5, 5], [3, 3, 6, 6], [4, 4, 7, 7]], dtype=np.uint64)
>>> select_survivors(h, needed=10).tolist()   # 2 repeats expression 0; 3 repeats template 1
[0, 1, 4]
>>> select_survivors(h, needed=2).tolist()
[0, 1]
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

DIGIT_MAX = 10
"""Token ids 1..10 are digits; ids above are operators and `]`, id 0 is padding (the cards' vocabulary)."""
KEPT, EXPRESSION_DUPLICATE, TEMPLATE_DUPLICATE = 0, 1, 2


def _digest(data: bytes, person: bytes) -> np.ndarray:
    return np.frombuffer(hashlib.blake2b(data, digest_size=16, person=person).digest(), dtype="<u8")


def expression_and_template(row: np.ndarray, length: int | None = None) -> tuple[bytes, bytes]:
    """Token bytes of an expression (padding dropped) and of its template (digits dropped too)."""
    row = np.asarray(row, dtype=np.uint8).reshape(-1)
    expr = row[:length] if length is not None else row[row != 0]
    return expr.tobytes(), expr[expr > DIGIT_MAX].tobytes()


def dedup_hashes(inputs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(n, 4) uint64: blake2b-128 of each expression (columns 0-1) and of its template (columns 2-3)."""
    inputs = np.asarray(inputs)
    out = np.empty((inputs.shape[0], 4), dtype=np.uint64)
    for i in range(inputs.shape[0]):
        expr, template = expression_and_template(inputs[i], int(lengths[i]))
        out[i, :2] = _digest(expr, b"listops-expr")
        out[i, 2:] = _digest(template, b"listops-tmpl")
    return out


def _groups(h: np.ndarray, key: Callable[[int], bytes] | None) -> np.ndarray:
    """Group id per row of an (n, 2) hash array; with `key`, rows with equal hashes but different bytes split."""
    _, inverse, counts = np.unique(h, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    if key is None or counts.max(initial=1) == 1:
        return inverse
    next_id = len(counts)
    for g in np.flatnonzero(counts > 1):  # confirm every hash match by a full comparison
        members = np.flatnonzero(inverse == g)
        first_of: dict[bytes, int] = {}
        for c in members:
            data = key(int(c))
            if data not in first_of:  # the first distinct byte string keeps id g, later ones get fresh ids
                first_of[data] = g if not first_of else next_id
                next_id += bool(len(first_of) > 1)
            inverse[c] = first_of[data]
    return inverse


def classify_candidates(hashes: np.ndarray, tokens: Any = None, lengths: np.ndarray | None = None) -> np.ndarray:
    """Fate of every candidate in index order: KEPT, EXPRESSION_DUPLICATE or TEMPLATE_DUPLICATE.

    A candidate is dropped when its expression or its template equals that of a lower-index kept candidate. A
    dropped candidate counts as an expression duplicate when an earlier candidate has the identical expression
    (an exact repeat), otherwise as a template duplicate.

    Args:
        hashes: (n, 4) uint64 from `dedup_hashes`.
        tokens: optional, to confirm hash matches by full comparison: an (n, T) token array, or a callable
            c -> token row of candidate c (read lazily, only for candidates whose hashes match another's).
        lengths: optional (n,) true lengths for `tokens`; without them padding (id 0) is stripped.
    """
    hashes = np.asarray(hashes, dtype=np.uint64)
    if hashes.ndim != 2 or hashes.shape[1] != 4:
        raise ValueError(f"hashes must have shape (n, 4), got {hashes.shape}")
    n = hashes.shape[0]
    fate = np.full(n, KEPT, dtype=np.int8)
    if n == 0:
        return fate
    expr_key = tmpl_key = None
    if tokens is not None:
        row = tokens if callable(tokens) else (lambda c: np.asarray(tokens)[c])

        def parts(c: int) -> tuple[bytes, bytes]:
            return expression_and_template(row(c), None if lengths is None else int(lengths[c]))

        expr_key, tmpl_key = (lambda c: parts(c)[0]), (lambda c: parts(c)[1])
    expr = _groups(hashes[:, :2], expr_key)
    tmpl = _groups(hashes[:, 2:], tmpl_key)
    shared = (np.bincount(expr)[expr] > 1) | (np.bincount(tmpl)[tmpl] > 1)
    expr_seen = np.zeros(expr.max() + 1, dtype=bool)
    expr_taken = np.zeros(expr.max() + 1, dtype=bool)
    tmpl_taken = np.zeros(tmpl.max() + 1, dtype=bool)
    for c in np.flatnonzero(shared):  # usually empty; ascending index order = "already kept" semantics
        e, t = expr[c], tmpl[c]
        if expr_taken[e] or tmpl_taken[t]:
            fate[c] = EXPRESSION_DUPLICATE if expr_seen[e] else TEMPLATE_DUPLICATE
        else:
            expr_taken[e] = tmpl_taken[t] = True
        expr_seen[e] = True
    return fate


def select_survivors(hashes: np.ndarray, needed: int, tokens: Any = None,
                     lengths: np.ndarray | None = None) -> np.ndarray:
    """Indices of the first `needed` surviving candidates, ascending (fewer if the candidates run out).

    A candidate survives unless its expression or its template equals that of a lower-index survivor, so the
    lowest candidate index of every duplicate group is kept. `tokens`/`lengths` as in `classify_candidates`.
    """
    if needed < 0:
        raise ValueError(f"needed must be >= 0, got {needed}")
    kept = np.flatnonzero(classify_candidates(hashes, tokens, lengths) == KEPT)
    return kept[:needed].astype(np.int64)


def dedup_report(hashes: np.ndarray, split_sizes: Mapping[str, int], tokens: Any = None,
                 lengths: np.ndarray | None = None) -> dict[str, Any]:
    """Counts for the manifest: candidates used, duplicates dropped, and expressions/templates shared across splits.

    Survivors are assigned in order to the splits of `split_sizes` (e.g. {"train": 96000, "val": 2000, ...}).
    Only candidates up to the last survivor used count. The cross-split counts are 0 by construction; they are
    recomputed from the hashes as a check.
    """
    needed = int(sum(split_sizes.values()))
    fate = classify_candidates(hashes, tokens, lengths)
    kept = np.flatnonzero(fate == KEPT)[:needed]
    used = int(kept[-1]) + 1 if needed and kept.size else 0
    prefix = fate[:used]
    bounds = np.cumsum([0, *split_sizes.values()])
    hashes = np.asarray(hashes, dtype=np.uint64)
    shared = {}
    for cols, what in ((slice(0, 2), "expressions"), (slice(2, 4), "templates")):
        _, first = np.unique(hashes[kept, cols], axis=0, return_index=True)
        split_of = np.searchsorted(bounds, np.arange(kept.size), side="right") - 1
        _, inverse = np.unique(hashes[kept, cols], axis=0, return_inverse=True)
        shared[f"cross_split_shared_{what}"] = int(np.sum(split_of != split_of[first][inverse.reshape(-1)]))
    return {"candidates_used": used, "survivors": int(kept.size), "needed": needed,
            "dropped_expression_duplicates": int(np.sum(prefix == EXPRESSION_DUPLICATE)),
            "dropped_template_duplicates": int(np.sum(prefix == TEMPLATE_DUPLICATE)), **shared}
