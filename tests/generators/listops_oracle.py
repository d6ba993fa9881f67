"""Independent test oracles for the ListOps tasks, written from the data cards' procedure without looking at the kernels.

* `decode` / `parse`: token ids -> text tokens -> a tree, by recursive descent over the text; `subtree_rows`
  gives one row per closing bracket (index, value, token length, height, operator), the columns of the reference
  TSV fixtures (`SubTreeInds`, `SubTreeEvals`, `SubTreeLengths`, `SubTreeHeights`, `SubTreeOps`).
* `slow_sample`: the plain recursive process of section 4.2 in pure Python (`random.Random`): children first, then
  the operator, values drawn as the recursion reaches them, a whole new root on rejection. It gives up on a tree
  only once it has actually emitted `max_length` tokens, which cannot change which trees are accepted.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

TOKENS = ["<pad>", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "[MIN", "[MAX", "[MED", "[SM", "]"]
OPS = ["[MIN", "[MAX", "[MED", "[SM"]


def apply(op: str, args: list[int]) -> int:
    if op == "[MIN":
        return min(args)
    if op == "[MAX":
        return max(args)
    if op == "[MED":
        return int(statistics.median(args))  # a float for even counts; int() truncates toward zero
    if op == "[SM":
        return sum(args) % 10
    raise ValueError(op)


@dataclass
class Node:
    op: str | None  # None for a digit
    value: int
    start: int  # index of the first token
    end: int  # index of the last token (the `]` for operators)
    height: int
    children: list[Node] = field(default_factory=list)


def decode(ids) -> list[str]:
    """Token ids -> text tokens, padding (trailing zeros) removed; a zero inside the expression is an error."""
    ids = [int(x) for x in ids]
    while ids and ids[-1] == 0:
        ids.pop()
    if 0 in ids:
        raise ValueError("padding inside the expression")
    return [TOKENS[i] for i in ids]


def parse(tokens: list[str]) -> Node:
    """Recursive descent: expr := DIGIT | OP expr expr* ']' (at least two arguments)."""
    pos = 0

    def expr() -> Node:
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError("unexpected end of expression")
        tok, start = tokens[pos], pos
        pos += 1
        if tok.isdigit():
            return Node(None, int(tok), start, start, 0)
        if tok not in OPS:
            raise ValueError(f"unexpected token {tok!r} at {start}")
        kids = []
        while pos < len(tokens) and tokens[pos] != "]":
            kids.append(expr())
        if pos >= len(tokens) or len(kids) < 2:
            raise ValueError(f"operator at {start} is not closed or has fewer than two arguments")
        pos += 1
        return Node(tok, apply(tok, [k.value for k in kids]), start, pos - 1,
                    1 + max(k.height for k in kids), kids)

    root = expr()
    if pos != len(tokens):
        raise ValueError(f"trailing tokens after position {pos}")
    return root


def subtree_rows(root: Node) -> list[tuple[int, int, int, int, str]]:
    """(index of `]`, value, token length, height, operator) per operator node, in order of the closing brackets."""
    rows = []

    def visit(node: Node) -> None:
        for kid in node.children:
            visit(kid)
        if node.op is not None:
            rows.append((node.end, node.value, node.end - node.start + 1, node.height, node.op))

    visit(root)
    return rows


class _TooLong(Exception):
    pass


def _slow_tree(rng: random.Random, cfg, depth: int, out: list[str]) -> None:
    if len(out) >= cfg.max_length:
        raise _TooLong
    if depth < cfg.max_depth and not rng.random() > cfg.non_leaf_prob:
        start = len(out)
        out.append("?")
        for _ in range(rng.randint(2, cfg.max_args)):
            _slow_tree(rng, cfg, depth + 1, out)
        out[start] = rng.choice(OPS)
        out.append("]")
    else:
        out.append(str(rng.randrange(10)))


def slow_sample(cfg, rng: random.Random) -> tuple[list[str], int]:
    """One accepted expression (text tokens) and the number of root trees drawn for it."""
    tries = 0
    while True:
        tries += 1
        out: list[str] = []
        try:
            _slow_tree(rng, cfg, 1, out)
        except _TooLong:
            continue
        if cfg.min_length < len(out) < cfg.max_length:
            return out, tries
