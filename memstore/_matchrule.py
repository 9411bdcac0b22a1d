"""The lexical match rule, one query token against one document's words.

What a token *matches* and how well (the levels, best first: exact, prefix,
same stem, one edit, inner substring, fuzzy), a token's weight, and
:func:`score_document`: the brute-force scorer the
:class:`~memstore.lexical.Lexicon`'s index-driven matching must agree with
(and the scorer of items no index holds). :mod:`memstore.lexical` re-exports
all of it; its module docstring describes the rule in full.

>>> word_level("pay", "payment"), word_level("paymnet", "payment")
(0.9, 0.8)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from memstore.text import stem, trigrams

__all__ = [
    "FUZZY_MAX",
    "FUZZY_MIN_DICE",
    "FUZZY_MIN_LEN",
    "LEVEL_EDIT",
    "LEVEL_EXACT",
    "LEVEL_PREFIX",
    "LEVEL_STEM",
    "LEVEL_SUBSTRING",
    "MAX_EDIT_CHARS",
    "TITLE_WEIGHT",
    "deletions",
    "indexed_deletions",
    "is_confident",
    "score_document",
    "token_weight",
    "trigram_dice",
    "within_one_edit",
    "word_level",
]

LEVEL_EXACT = 1.0
"""A token equal to a word."""
LEVEL_PREFIX = 0.9
"""A token of three or more characters that starts a word ("pay" in "payment")."""
LEVEL_STEM = 0.85
"""A token of three or more characters sharing a word's stem ("camping" and "camped")."""
LEVEL_EDIT = 0.8
"""A token one edit from a word, or from two adjacent words joined."""
LEVEL_SUBSTRING = 0.6
"""A token inside a word; the lowest level that counts as covering the token."""
FUZZY_MAX = 0.5
"""Level of a perfect fuzzy match; a fuzzy match scores ``FUZZY_MAX * dice``."""
FUZZY_MIN_DICE = 0.5
"""Trigram Dice coefficient a fuzzy match needs."""
FUZZY_MIN_LEN = 4
"""Shortest token the fuzzy channel considers (shorter ones have too few trigrams)."""
TITLE_WEIGHT = 0.25
"""Extra weight of a token matched in the title, relative to anywhere in the text."""


MAX_EDIT_CHARS = 64
"""Longest token that gets one-edit and joined-word matches; a longer one matches exactly,
as a substring or by stem only. Listing a token's one-edit neighbours costs about its
length squared (every deletion, every digit edit, per split), so a 10,000-character
token took seconds; no real word or pair of words comes near 64 characters. The
brute-force rule here (private items) applies the same cap, so both rank alike."""


def within_one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are at most one edit apart (OSA distance <= 1).

    An edit is an insertion, deletion, substitution or adjacent transposition.

    >>> within_one_edit("payment", "paymnet"), within_one_edit("pay", "play")
    (True, True)
    >>> within_one_edit("pay", "yap")
    False
    """
    if a == b:
        return True
    la, lb = len(a), len(b)
    if la > lb:
        a, b, la, lb = b, a, lb, la
    if lb - la > 1:
        return False
    i = 0
    while i < la and a[i] == b[i]:
        i += 1
    if la == lb:
        if a[i + 1 :] == b[i + 1 :]:
            return True
        return i + 1 < la and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2 :] == b[i + 2 :]
    return a[i:] == b[i + 1 :]


def deletions(s: str) -> set[str]:
    """Every string one character deletion from ``s`` makes (the deletion index's keys)."""
    return {s[:i] + s[i + 1 :] for i in range(len(s))}


def indexed_deletions(w: str) -> set[str]:
    """The deletion-index keys of vocabulary word ``w``.

    None for a word of ASCII digits alone (ids, counts, builds: most of a large
    vocabulary): its one-edit neighbours are generated at query time over the
    ten digits instead (:func:`~memstore._editnear.digit_words_near`),
    which finds the same words and keeps indexing (and restore) cheaper.
    """
    if w.isascii() and w.isdigit():
        return set()
    return deletions(w)


def trigram_dice(tg: frozenset[str], w: str) -> float:
    """The trigram Dice coefficient of a token's trigrams ``tg`` and word ``w``."""
    wg = trigrams(w)
    return 2.0 * len(tg & wg) / (len(tg) + len(wg))


def word_level(tok: str, w: str) -> float:
    """The match level of query token ``tok`` against one document word (0 = none)."""
    if tok == w:
        return LEVEL_EXACT
    best = 0.0
    if tok in w:
        best = LEVEL_PREFIX if len(tok) >= 3 and w.startswith(tok) else LEVEL_SUBSTRING
    if best < LEVEL_STEM and len(tok) > 2 and stem(tok) == stem(w):
        best = LEVEL_STEM
    if best < LEVEL_EDIT and 2 < len(tok) <= MAX_EDIT_CHARS and within_one_edit(tok, w):
        best = LEVEL_EDIT
    return best


def token_weight(df: int, n_docs: int) -> float:
    """A token's distinctiveness: BM25's idf of the number of documents it matches."""
    return math.log1p((n_docs - df + 0.5) / (df + 0.5))


def is_confident(covered: int, n_tokens: int) -> bool:
    """Whether a hit covering ``covered`` of ``n_tokens`` tokens is a confident answer.

    Every token, or all but one for three tokens or more.
    """
    if n_tokens == 0:
        return False
    return covered >= (n_tokens if n_tokens < 3 else n_tokens - 1)


def score_document(
    tokens: Sequence[str],
    weights: Sequence[float],
    doc_words: Sequence[str],
    title_words: Iterable[str],
    fuzzy_ok: Sequence[bool],
) -> tuple[float, int, bool]:
    """Score one document by brute force: ``(score, tokens_covered, used_fuzzy)``.

    The reference the index-driven scorer must agree with, and the scorer for
    items no index holds (private items). ``fuzzy_ok[i]`` says whether token
    ``i`` may use the fuzzy channel (it is no word of the vocabulary).
    """
    total_w = sum(weights)
    if total_w <= 0.0:
        return 0.0, 0, False
    title_set = set(title_words)
    acc = title_acc = 0.0
    covered = 0
    used_fuzzy = False
    joined = [doc_words[i] + doc_words[i + 1] for i in range(len(doc_words) - 1)]
    for tok, w, fz in zip(tokens, weights, fuzzy_ok, strict=True):
        best = max((word_level(tok, dw) for dw in doc_words), default=0.0)
        if (
            best < LEVEL_EDIT
            and 2 < len(tok) <= MAX_EDIT_CHARS
            and any(within_one_edit(tok, j) for j in joined)
        ):
            best = LEVEL_EDIT
        if best >= LEVEL_SUBSTRING:
            covered += 1
            title_level = max((word_level(tok, tw) for tw in title_set), default=0.0)
            if title_level >= LEVEL_SUBSTRING:
                title_acc += w * title_level
        elif fz and len(tok) >= FUZZY_MIN_LEN:
            tg = trigrams(tok)
            dice = max((trigram_dice(tg, dw) for dw in doc_words if len(dw) >= 3), default=0.0)
            if dice >= FUZZY_MIN_DICE:
                best = FUZZY_MAX * dice
                used_fuzzy = True
        acc += w * best
    return (acc + TITLE_WEIGHT * title_acc) / ((1.0 + TITLE_WEIGHT) * total_w), covered, used_fuzzy
