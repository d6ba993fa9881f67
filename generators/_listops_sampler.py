"""Shared machinery of the ListOps tasks (`listops_subtrees`, `listops`): vocabulary, tree sampler, schema, oracle.

The process is the one in data_cards/listops_subtrees.md (Generation procedure). A root tree is drawn **structure first**: the leaf/operator decisions and
arities, in preorder, with the tree aborted as soon as its length is certain to reach `max_length` (every pending
child costs at least one token). Leaf values and operators do not influence acceptance, so they are drawn only for
the accepted structure; the accepted trees have exactly the distribution of the plain recursive process.

Both tasks call the same kernel; they differ only in their presets and in where labels go (`label_all`: every
closing bracket, or only the root's). The exact length distribution of the process (`length_pmf`) is computed by a
small dynamic programme over depths; config validation uses it to refuse windows that no tree can hit.
"""

from __future__ import annotations  # noqa: I001  (the ._rng import below must precede numba)

import functools
import math
from collections.abc import Mapping
from typing import Any

from ._rng import randint, rng_state, uniform  # first: sets NUMBA_DISABLE_INTEL_SVML before numba loads

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ssmbench.api import Field, Spec  # noqa: E402
from ssmbench.errors import ConfigError, VerificationError  # noqa: E402

PAD, DIGIT_BASE, OP_BASE, CLOSE = 0, 1, 11, 15
"""Frozen token ids (the vocabulary table of the ListOps data cards): digit d is d + 1, operator code c is 11 + c, `]` is 15."""
VOCAB: tuple[str, ...] = ("<pad>", *(str(d) for d in range(10)), "[MIN", "[MAX", "[MED", "[SM", "]")
OPERATORS: tuple[str, ...] = ("MIN", "MAX", "MED", "SM")
IGNORE_INDEX = -100
MIN_ACCEPTANCE = 1e-7
"""Windows whose per-root acceptance probability is below this are refused (over 10^7 trees per sample)."""
LIMITS = {"max_args": (2, 16), "max_depth": (1, 32), "max_length": (3, 32768)}
"""Parameter ranges: arities fit int8, heights fit int8, lengths fit int16; they also bound `length_pmf`'s cost."""

# --------------------------------------------------------------------------------------------------- numba kernels


@njit(cache=True)
def _sample_structure(state, max_args, max_depth, p, max_length, struct, rem):
    """Draw one root tree's structure into `struct` in preorder (0 = leaf, k = operator with k children).

    Returns its token length, or -1 as soon as the length is certain to reach `max_length`. `bound` is the length
    of the tree drawn so far with every pending child counted as one token, so it only grows, and it is the exact
    length when the root closes. `rem[d]` counts the children still to draw of the open operator at depth d.
    """
    m = 0
    bound = 1
    depth = 1
    while True:
        if depth < max_depth and uniform(state) <= p:  # operator node (a leaf iff u > non_leaf_prob)
            k = 2 + randint(state, max_args - 1)
            struct[m] = k
            m += 1
            bound += k + 1
            if bound >= max_length:
                return -1
            rem[depth] = k
            depth += 1
        else:
            struct[m] = 0
            m += 1
            while True:  # a node at `depth` is complete: move to its next sibling or close its parent
                if depth == 1:
                    return bound
                rem[depth - 1] -= 1
                if rem[depth - 1] > 0:
                    break
                depth -= 1


@njit(cache=True)
def _median(hist, count):
    """Median of `count` digits given as a histogram, truncated toward zero (MED(8, 3) = 5)."""
    lo_rank = (count - 1) // 2
    hi_rank = count // 2
    seen = 0
    lo = -1
    for d in range(10):
        seen += hist[d]
        if lo < 0 and seen > lo_rank:
            lo = d
        if seen > hi_rank:
            return (lo + d) // 2
    return lo


@njit(cache=True)
def _fill_tree(state, struct, label_all, tokens, targets, heights, ops, f_op, f_k, f_rem, f_min, f_max, f_sum,
               f_h, f_hist):
    """Walk an accepted structure, drawing operators and digits; write tokens and per-node rows. Returns root value."""
    pos = 0
    top = -1
    j = 0
    while True:
        k = struct[j]
        j += 1
        if k > 0:
            op = randint(state, 4)
            tokens[pos] = OP_BASE + op
            pos += 1
            top += 1
            f_op[top] = op
            f_k[top] = k
            f_rem[top] = k
            f_min[top] = 9
            f_max[top] = 0
            f_sum[top] = 0
            f_h[top] = 0
            f_hist[top, :] = 0
            continue
        v = randint(state, 10)
        tokens[pos] = DIGIT_BASE + v
        pos += 1
        h = 0
        while top >= 0:  # hand the finished child (v, h) to its parent; close every parent that is now complete
            f_min[top] = min(f_min[top], v)
            f_max[top] = max(f_max[top], v)
            f_sum[top] += v
            f_hist[top, v] += 1
            f_h[top] = max(f_h[top], h)
            f_rem[top] -= 1
            if f_rem[top] > 0:
                break
            op = f_op[top]
            if op == 0:
                v = f_min[top]
            elif op == 1:
                v = f_max[top]
            elif op == 2:
                v = _median(f_hist[top], f_k[top])
            else:
                v = f_sum[top] % 10
            h = f_h[top] + 1
            tokens[pos] = CLOSE
            if label_all or top == 0:
                targets[pos] = v
            heights[pos] = h
            ops[pos] = op
            pos += 1
            top -= 1
        if top < 0:
            return v


@njit(cache=True, parallel=True)
def _generate_kernel(keys, max_args, max_depth, p, min_length, max_length, label_all,
                     tokens, targets, heights, ops, lengths, root_value, outcomes):
    """Row i of every output from keys[i] alone. outcomes[i] = rejected roots (single digit, too short, too long)."""
    for i in prange(keys.shape[0]):
        state = rng_state(keys[i])
        struct = np.empty(max_length, dtype=np.int8)
        rem = np.empty(max_depth + 1, dtype=np.int64)
        while True:
            n = _sample_structure(state, max_args, max_depth, p, max_length, struct, rem)
            if n < 0:
                outcomes[i, 2] += 1
            elif n == 1:
                outcomes[i, 0] += 1
            elif n <= min_length:
                outcomes[i, 1] += 1
            else:
                break
        tokens[i, :] = PAD
        targets[i, :] = IGNORE_INDEX
        heights[i, :] = -1
        ops[i, :] = -1
        f = np.empty((7, max_depth), dtype=np.int64)  # per open operator: op, arity, remaining, min, max, sum, height
        f_hist = np.empty((max_depth, 10), dtype=np.int64)
        root_value[i] = _fill_tree(state, struct, label_all, tokens[i], targets[i], heights[i], ops[i],
                                   f[0], f[1], f[2], f[3], f[4], f[5], f[6], f_hist)
        lengths[i] = n


# ------------------------------------------------------------------------------ exact length law and validation


def max_tree_length(max_args: int, max_depth: int) -> int:
    """Longest expression the depth limit allows: every node above the deepest level an operator of max arity."""
    longest = 1
    for _ in range(max_depth - 1):
        longest = 2 + max_args * longest
    return longest


@functools.lru_cache(maxsize=32)
def length_pmf(max_args: int, max_depth: int, non_leaf_prob: float, max_length: int) -> np.ndarray:
    """P(a root tree has exactly l tokens) for l < max_length (index l), by a dynamic programme over depths.

    A subtree whose root sits r levels above the depth limit has law P_r: P_1 = point mass at 1, and
    P_r = (1 - p) [l = 1] + p / (max_args - 1) * sum_{k=2..max_args} (P_{r-1} convolved k times)(l - 2).
    Convolutions are truncated at max_length (lengths only add up), done by FFT; the result is exact up to float
    rounding (about 1e-15 per entry). The mass missing from the sum is P(length >= max_length).
    """
    size = max_length
    nfft = 1 << (2 * size - 1).bit_length()
    law = np.zeros(size)
    law[1] = 1.0
    for _ in range(max_depth - 1):
        spectrum = np.fft.rfft(law, nfft)
        power = law.copy()
        total = np.zeros(size)
        for _k in range(2, max_args + 1):
            power = np.fft.irfft(np.fft.rfft(power, nfft) * spectrum, nfft)[:size]
            np.maximum(power, 0.0, out=power)
            total += power
        new = np.zeros(size)
        new[1] = 1.0 - non_leaf_prob
        new[2:] = non_leaf_prob / (max_args - 1) * total[:size - 2]
        converged = np.abs(new - law).max() < 1e-15
        law = new
        if converged:  # deeper limits no longer change lengths below max_length
            break
    law.setflags(write=False)
    return law


def root_outcomes(config: Any) -> dict[str, float]:
    """Exact probabilities of each fate of a root tree, and the median accepted length."""
    pmf = length_pmf(config.max_args, config.max_depth, float(config.non_leaf_prob), config.max_length)
    window = pmf[config.min_length + 1:]
    accept = float(window.sum())
    median = config.min_length + 1 + int(np.searchsorted(np.cumsum(window), accept / 2)) if accept > 0 else 0
    return {"single_digit": float(pmf[1]), "too_short": float(pmf[2:config.min_length + 1].sum()),
            "too_long": max(0.0, 1.0 - float(pmf.sum())), "accepted": accept, "median_length": median}


def pad_length(config: Any) -> int:
    """`pad_to`, or `max_length` rounded up to a multiple of 256 when `pad_to` is 0."""
    return int(config.pad_to) or -(-int(config.max_length) // 256) * 256


def check_config(config: Any) -> None:
    """Validate a ListOps config; raises ConfigError naming the field and the fix."""
    for name in ("min_length", "max_length", "max_args", "max_depth", "pad_to"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(name, f"must be an integer, got {value!r}")
    for name, (lo, hi) in LIMITS.items():
        value = getattr(config, name)
        if not lo <= value <= hi:
            raise ConfigError(name, f"must be in [{lo}, {hi}], got {value}")
    p = config.non_leaf_prob
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
        raise ConfigError("non_leaf_prob", f"must be a probability in [0, 1], got {p!r}")
    lo, hi = config.min_length, config.max_length
    if lo < 1:
        raise ConfigError("min_length", f"must be >= 1 (a lone digit has no closing bracket to label), got {lo}")
    if lo + 1 >= hi:
        raise ConfigError("min_length", f"empty length window: no integer length satisfies {lo} < length < {hi} "
                          f"(both bounds exclusive); set max_length to at least min_length + 2 = {lo + 2}")
    longest = max_tree_length(config.max_args, config.max_depth)
    if longest <= lo:
        raise ConfigError("min_length", f"impossible window: with max_depth={config.max_depth} and "
                          f"max_args={config.max_args} no expression is longer than {longest} tokens, so none "
                          f"satisfies {lo} < length; lower min_length below {longest} or raise max_depth/max_args")
    if config.pad_to != 0 and not hi - 1 <= config.pad_to <= LIMITS["max_length"][1]:
        raise ConfigError("pad_to", f"must be 0 (auto) or in [max_length - 1 = {hi - 1}, 32768] so every accepted "
                          f"sequence fits, got {config.pad_to}")
    accept = root_outcomes(config)["accepted"]
    if accept < MIN_ACCEPTANCE:
        hit = "0" if accept < 1e-12 else f"{accept:.2g}"  # below 1e-12 is FFT round-off of an exact 0
        raise ConfigError("min_length", f"window {lo} < length < {hi} is hit by {hit} of root trees under "
                          f"max_args={config.max_args}, max_depth={config.max_depth}, non_leaf_prob={p} (at least "
                          f"{MIN_ACCEPTANCE:g} needed); widen the window or change the tree parameters")


# ------------------------------------------------------------------------------------------- task building blocks


def build_spec(config: Any, label_all: bool) -> Spec:
    t = pad_length(config)
    where = "every closing bracket `]`" if label_all else "the root's closing bracket (position lengths - 1)"
    vocab_attrs = {"vocab": list(VOCAB), "operators": list(OPERATORS), "pad_id": PAD}
    fields = {
        "inputs": Field("uint8", (t,), "token ids of the prefix expression, right-padded with <pad> = 0; "
                        "vocab[id] is the token", attrs=vocab_attrs),
        "targets": Field("int8", (t,), f"value 0..9 of the subexpression closed at {where}; -100 elsewhere",
                         attrs={"classes": [str(d) for d in range(10)], "ignore_index": IGNORE_INDEX}),
        "lengths": Field("int16", (), "number of real tokens (brackets included)", shuffle=True),
        "node_height": Field("int8", (t,), "height of the subtree closed at each `]` (1 = all arguments are "
                             "digits); -1 elsewhere", attrs={"no_node": -1}),
        "node_op": Field("int8", (t,), "operator code at each `]` (0 MIN, 1 MAX, 2 MED, 3 SM); -1 elsewhere",
                         attrs={"operators": list(OPERATORS), "no_node": -1}),
        "root_value": Field("uint8", (), "value of the whole expression (the LRA ListOps answer)"),
        "roots_drawn": Field("int32", (), "root trees drawn for this sample, the accepted one included "
                             "(acceptance rate = samples / sum)", shuffle=True),
        "candidate_index": Field("int64", (), "index in the de-duplication candidate stream (provenance)",
                                 shuffle=True),
    }
    return Spec(fields=fields, input_kind="tokens", d_input=len(VOCAB), seq_len=t, target_kind="classify",
                d_output=10, l_output=t, ignore_index=IGNORE_INDEX, causal=True, input_scale=None,
                metrics=("token_accuracy",))


def sample_batch(config: Any, keys: np.ndarray, label_all: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Generate rows for `keys`; also returns the (N, 3) rejected-root counts (single digit, too short, too long)."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
    n, t = keys.shape[0], pad_length(config)
    out = {"inputs": np.empty((n, t), np.uint8), "targets": np.empty((n, t), np.int8),
           "node_height": np.empty((n, t), np.int8), "node_op": np.empty((n, t), np.int8),
           "lengths": np.empty(n, np.int16), "root_value": np.empty(n, np.uint8)}
    outcomes = np.zeros((n, 3), np.int64)
    if n:
        _generate_kernel(keys, config.max_args, config.max_depth, float(config.non_leaf_prob), config.min_length,
                         config.max_length, label_all, out["inputs"], out["targets"], out["node_height"],
                         out["node_op"], out["lengths"], out["root_value"], outcomes)
    out["roots_drawn"] = (outcomes.sum(axis=1) + 1).astype(np.int32)
    out["candidate_index"] = np.full(n, -1, np.int64)
    return out, outcomes


def evaluate_tokens(config: Any, tokens: np.ndarray, label_all: bool) -> dict[str, np.ndarray]:
    """Plain-Python oracle: parse one padded token row and recompute every stored per-node field from it."""
    row = [int(x) for x in np.asarray(tokens).reshape(-1)]
    t = len(row)
    n = row.index(PAD) if PAD in row else t
    problems = []
    if any(row[n:]):
        problems.append(f"non-pad token after the first <pad> at {n}")
    if not config.min_length < n < config.max_length:
        problems.append(f"length {n} outside {config.min_length} < length < {config.max_length}")
    targets = np.full(t, IGNORE_INDEX, np.int8)
    heights = np.full(t, -1, np.int8)
    ops = np.full(t, -1, np.int8)
    stack: list[tuple[int, list[int], list[int]]] = []  # (operator code, argument values, argument heights)
    root = None
    for pos in range(n):
        tok = row[pos]
        if root is not None:
            problems.append(f"token at {pos} after the expression ended")
            break
        if OP_BASE <= tok < CLOSE:
            stack.append((tok - OP_BASE, [], []))
            continue
        if DIGIT_BASE <= tok < OP_BASE:
            value, height = tok - DIGIT_BASE, 0
        elif tok == CLOSE and stack and len(stack[-1][1]) >= 2:
            op, args, hs = stack.pop()
            srt = sorted(args)
            mid = len(srt) // 2
            median = srt[mid] if len(srt) % 2 else (srt[mid - 1] + srt[mid]) // 2
            value = (min(args), max(args), median, sum(args) % 10)[op]
            height = 1 + max(hs)
            if label_all or not stack:
                targets[pos] = value
            heights[pos], ops[pos] = height, op
        else:
            problems.append(f"unexpected token id {tok} at {pos}")
            break
        if stack:
            stack[-1][1].append(value)
            stack[-1][2].append(height)
        else:
            root = value
    if root is None or stack:
        problems.append("the expression does not close")
    if problems:
        raise VerificationError("malformed ListOps sequence: " + "; ".join(problems), problems)
    return {"targets": targets, "node_height": heights, "node_op": ops, "lengths": np.int16(n),
            "root_value": np.uint8(root)}


# ---------------------------------------------------------------------------------------------------- statistics


def length_bin_edges(config: Any) -> np.ndarray:
    """Fixed histogram edges for accepted lengths: a 1-2-5 width giving at most 30 bins, aligned to the width."""
    lo, hi = config.min_length + 1, config.max_length
    width = 1
    for exp in range(8):
        for mult in (1, 2, 5):
            width = mult * 10 ** exp
            if math.ceil((hi - (lo // width) * width) / width) <= 30:
                break
        else:
            continue
        break
    first = (lo // width) * width
    return first + width * np.arange(math.ceil((hi - first) / width) + 1)


def statistics(config: Any, block: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Summable counts of one block of samples (the core sums them per split)."""
    lengths = np.asarray(block["lengths"], np.int64)
    targets, heights, ops = block["targets"], block["node_height"], block["node_op"]
    labelled = targets[targets != IGNORE_INDEX]
    return {
        "samples": np.array([lengths.size], np.int64),
        "roots_drawn": np.array([np.asarray(block["roots_drawn"], np.int64).sum()], np.int64),
        "tokens": np.array([lengths.sum()], np.int64),
        "length_hist": np.histogram(lengths, bins=length_bin_edges(config))[0].astype(np.int64),
        "label_counts": np.bincount(labelled.astype(np.int64), minlength=10)[:10].astype(np.int64),
        "labelled_positions": np.array([labelled.size], np.int64),
        "root_value_counts": np.bincount(np.asarray(block["root_value"], np.int64), minlength=10)[:10],
        "height_counts": np.bincount(heights[heights > 0].astype(np.int64), minlength=config.max_depth)
                         [:config.max_depth].astype(np.int64),
        "op_counts": np.bincount(ops[ops >= 0].astype(np.int64), minlength=4)[:4].astype(np.int64),
    }


def _pct(counts: np.ndarray) -> list[str]:
    total = counts.sum()
    return [f"{100.0 * c / total:.1f} %" if total else "-" for c in counts]


def statistics_markdown(config: Any, stats: Mapping[str, Mapping[str, list]]) -> str:
    """Markdown tables of the measured statistics per split, next to the exact expectations of the process."""
    splits = [s for s in ("train", "val", "test") if stats.get(s)] + sorted(
        s for s in set(stats) - {"train", "val", "test"} if stats.get(s))  # empty splits record no statistics
    if not splits:
        return ""
    arr = {s: {k: np.asarray(v, np.int64) for k, v in stats[s].items()} for s in splits}
    exp = root_outcomes(config)
    edges = length_bin_edges(config)
    head = "| | " + " | ".join(splits) + " |\n|---|" + "---|" * len(splits) + "\n"

    def row(label: str, cells: list[str]) -> str:
        return f"| {label} | " + " | ".join(cells) + " |\n"

    def median(hist: np.ndarray) -> str:
        if not hist.sum():
            return "-"
        cum = np.cumsum(hist) / hist.sum()
        b = int(np.searchsorted(cum, 0.5))
        below = cum[b - 1] if b else 0.0
        return f"≈ {edges[b] + (0.5 - below) / (cum[b] - below) * (edges[b + 1] - edges[b]):.0f}"

    first, last = config.min_length + 1, config.max_length - 1
    bins = [f"{max(edges[b], first)}–{min(edges[b + 1] - 1, last)}" for b in range(len(edges) - 1)]
    out = ["### Measured statistics\n",
           f"Expected from the sampling process (exact computation): {100 * exp['accepted']:.3f} % of root trees "
           f"accepted (single digits {100 * exp['single_digit']:.1f} %, too short {100 * exp['too_short']:.1f} %, "
           f"too long {100 * exp['too_long']:.2f} %); median accepted length {exp['median_length']}.\n",
           head + row("samples", [str(arr[s]["samples"][0]) for s in splits])
           + row("acceptance (samples / root trees drawn)",
                 [f"{100 * arr[s]['samples'][0] / max(arr[s]['roots_drawn'][0], 1):.3f} %" for s in splits])
           + row("mean length", [f"{arr[s]['tokens'][0] / max(arr[s]['samples'][0], 1):.1f}" for s in splits])
           + row("median length (from the histogram)", [median(arr[s]["length_hist"]) for s in splits])
           + row("labelled positions per sample",
                 [f"{arr[s]['labelled_positions'][0] / max(arr[s]['samples'][0], 1):.1f}" for s in splits])
           + row("labelled fraction of tokens",
                 [f"{100 * arr[s]['labelled_positions'][0] / max(arr[s]['tokens'][0], 1):.1f} %" for s in splits]),
           "Length histogram (share of samples per length bin, both ends inclusive):\n",
           head + "".join(row(bins[b], [_pct(arr[s]["length_hist"])[b] for s in splits]) for b in range(len(bins))),
           "Labels (share of labelled positions):\n",
           head + "".join(row(str(d), [_pct(arr[s]["label_counts"])[d] for s in splits]) for d in range(10)),
           "Node heights (share of closing brackets):\n",
           head + "".join(row(str(h), [_pct(arr[s]["height_counts"])[h] for s in splits])
                          for h in range(1, config.max_depth) if any(arr[s]["height_counts"][h] for s in splits)),
           "Operators (share of closing brackets):\n",
           head + "".join(row(OPERATORS[o], [_pct(arr[s]["op_counts"])[o] for s in splits]) for o in range(4))]
    return "\n".join(out)
