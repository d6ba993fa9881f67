"""Slow pure-Python references of `flipflop` and the copying tasks, drawing from the same per-sample stream.

Each sampler follows its data card's procedure with the authors' Python operations where they have one: the copying
tasks work on `str` (letters as characters) and use `list.count`, `str.index` and `str.replace` as Jelassi et al.'s
`generate_str_unique_ngram` and `sample_str` do, so a test can ask for byte equality with the Numba kernels, which
implement those operations on id arrays.
"""

from __future__ import annotations

from recall_oracle import PyStream

IGNORE = -100


def flipflop_sample(key: int, L: int, p_ignore: float) -> list[int]:
    """The ids of one FFL(L, p_ignore) row (w r i 0 1 = 0 1 2 3 4), data_cards/flipflop.md."""
    rng = PyStream(key)
    out, register = [], None
    for j in range(L // 2):
        if j in (0, L // 2 - 1):
            op = "w" if j == 0 else "r"
        else:
            u = rng.uniform()
            op = "i" if u < p_ignore else ("w" if u < p_ignore + (1 - p_ignore) / 2 else "r")
        bit = register if op == "r" else rng.randint(2)
        if op == "w":
            register = bit
        out += ["wri".index(op), 3 + bit]
    return out


def letters(ids: list[int]) -> str:
    return "".join(chr(0x4E00 + t) for t in ids)  # one character a letter id, for any vocabulary size


def ids(text: str) -> list[int]:
    return [ord(c) - 0x4E00 for c in text]


def _string(rng: PyStream, length: int, vocab: int) -> str:
    return letters([rng.randint(vocab) for _ in range(length)])


def _keyed_string(rng: PyStream, length: int, n: int, answer: int, vocab: int) -> tuple[str, list[str]]:
    """`generate_str_unique_ngram`, keeping the 10th draw where the authors raise."""
    limit = length - n - answer - 1 if answer > 0 else length - n - 1
    for _ in range(10):
        text = _string(rng, length, vocab)
        grams = [text[i:i + n] for i in range(limit)]
        if any(grams.count(g) == 1 for g in grams):
            break
    return text, grams


def copying_sample(task: str, key: int, vocab: int, low: int, high: int, L: int, n: int = 0, answer_len: int = 0
                   ) -> tuple[list[int], list[int], int, int]:
    """(inputs, targets, length, key position or -1) of one row of `task` (string_copy, prefix_ngram, suffix_ngram,
    duplicate_ngram), as data_cards/<task>.md and `sample_str` describe it."""
    rng = PyStream(key)
    bos, sep, eos, pad = (letters([vocab + k]) for k in range(4))
    length = low + rng.randint(high - low + 1)
    position = -1
    if task == "string_copy":
        text = _string(rng, length, vocab)
        answer = text[:answer_len] if answer_len > 0 else text
        question = bos + text + sep
    elif task == "duplicate_ngram":
        text, grams = _keyed_string(rng, length, n, 0, vocab)
        new = rng.randint(len(grams))
        old = rng.randint(len(grams) - 1)
        old += old >= new
        text = text.replace(grams[old], grams[new])
        question, answer = bos + text + sep, text
    else:
        text, grams = _keyed_string(rng, length, n, answer_len, vocab)
        gram = grams[rng.randint(len(grams) - 1)]
        position = text.index(gram)
        rest = text[position + n:]
        answer = rest[:answer_len] if answer_len > 0 else rest
        question = bos + gram + sep + text + sep if task == "prefix_ngram" else bos + text + sep + gram
    row = ids(question + answer + eos)
    scored = range(len(question) - 1, len(row) - 1)
    targets = [row[t + 1] if t in scored else IGNORE for t in range(L)]
    return row + ids(pad) * (L - len(row)), targets, length, position
