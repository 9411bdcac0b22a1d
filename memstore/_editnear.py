"""A query token's one-edit neighbours in the vocabulary: the costliest step of a cold token.

The :class:`~memstore.lexical.Lexicon` matches a token it has not seen yet by
expanding it over its vocabulary, and most of that time (two thirds of a cold
token's expansion on LoCoMo's questions, ``benchmarks/cold_match.py``) goes to
the one-edit rule: the words within one insertion, deletion, substitution or
adjacent transposition of the token, and of each half of it that a joined-word
match could leave (:meth:`~memstore.lexical.Lexicon._edits`). For each such
string ``s`` the neighbours are

* the words one of whose one-character deletions is ``s`` or a deletion of
  ``s`` (a longer word, a substitution, a transposition): the deletion index
  of :mod:`memstore._vocabindex`, probed by hash, every candidate verified by
  :func:`~memstore._matchrule.within_one_edit`;
* ``s`` and each deletion of ``s`` that is a word (a shorter word);
* the words of ASCII digits alone near ``s`` (:func:`digit_words_near`: such
  words have no deletion keys, their edits are generated instead).

:func:`neighbour_sets` runs this for every span of a token at once. Where the
optional extension is built it is one C call (``memstore/_editnear.c``: the
hashes from two prefix sums, a binary search per probe, the verification on
code points, no Python object per probe); :func:`pure_neighbour_sets` is the
same in Python, the oracle a differential test holds the C to, and what runs
under ``MEMSTORE_PURE_PYTHON=1``.

>>> from memstore._vocabindex import VocabIndex
>>> vocab = {"payment": 1, "pay": 1, "1234": 1}
>>> index = VocabIndex()
>>> index.add_many(vocab)
>>> [sorted(near) for near in neighbour_sets("paymnet", [(0, 7), (0, 3), (5, 7)], vocab, index)]
[['payment'], ['pay'], []]
>>> sorted(neighbour_sets("1243", [(0, 4)], vocab, index)[0])
['1234']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memstore import _wordbatch
from memstore._matchrule import LEVEL_EDIT, within_one_edit
from memstore._vocabindex import VocabIndex

__all__ = ["digit_words_near", "edits", "neighbour_sets", "pure_edits", "pure_neighbour_sets"]

_DIGIT_CHARS = "0123456789"
_DIGITS = frozenset(_DIGIT_CHARS)


Pair = tuple[str, str]


def edits(
    tok: str, levels: dict[str, float], vocab: Mapping[str, int], index: VocabIndex
) -> tuple[set[str], list[Pair]]:
    """``tok``'s one-edit neighbours, and the joined pairs it is one edit from, neither word strong.

    ``levels`` holds the token's exact, substring and stem matches (a word
    -> its level), ``vocab`` the vocabulary and ``index`` its
    :class:`~memstore._vocabindex.VocabIndex`. A word is *strong* when it
    ends at :data:`~memstore._matchrule.LEVEL_EDIT` or better (a level of
    ``levels`` that high, or one edit from ``tok``); a pair holding one
    cannot add a document (every document holding the word matches that
    well already), so it is dropped, and a split whose vocabulary half is
    strong is not probed at all.

    ``tok`` is within one edit of ``w1 + w2`` iff, split at some ``k``,
    one half equals its word and the other is within one edit of the
    other word, or the edit is a transposition straddling the split. The
    neighbours of ``tok`` and of every half to probe are
    :func:`neighbour_sets` of their spans. Compiled where
    :mod:`memstore._speedups` is built (and ``vocab`` is a ``dict``), one C
    call for all of it; :func:`pure_edits` otherwise: the same sets (the
    pairs in some order).

    >>> from memstore._vocabindex import VocabIndex
    >>> vocab = {"payment": 1, "api": 1}
    >>> index = VocabIndex()
    >>> index.add_many(vocab)
    >>> near, pairs = edits("paymentapi", {}, vocab, index)
    >>> near, pairs
    (set(), [('payment', 'api')])
    """
    native = _wordbatch.speedups
    if native is not None and isinstance(vocab, dict):
        tables, overlay, live, words = index.probe_view("dels")
        got: tuple[set[str], list[Pair]] = native.edits(
            tok, levels, LEVEL_EDIT, vocab, words, live, tables, overlay
        )
        return got
    return pure_edits(tok, levels, vocab, index)


def pure_edits(
    tok: str, levels: dict[str, float], vocab: Mapping[str, int], index: VocabIndex
) -> tuple[set[str], list[Pair]]:
    """:func:`edits` in Python."""

    def weak(w: str) -> bool:  # w in vocab: not strong in the end
        return levels.get(w, 0.0) < LEVEL_EDIT and not within_one_edit(tok, w)

    n = len(tok)
    # (vocabulary half, the other half's span, the vocabulary half is the left)
    splits: list[tuple[str, tuple[int, int], bool]] = []
    for k in range(n + 1):
        left, right = tok[:k], tok[k:]
        if left in vocab and weak(left):
            splits.append((left, (k, n), True))
        if right in vocab and weak(right):
            splits.append((right, (0, k), False))
    spans = list(dict.fromkeys([(0, n), *(span for _, span, _ in splits)]))
    near_of = dict(zip(spans, pure_neighbour_sets(tok, spans, vocab, index), strict=True))
    near = near_of[0, n]
    strong = near.union(w for w, lv in levels.items() if lv >= LEVEL_EDIT)
    pairs: set[Pair] = set()
    for word, span, is_left in splits:
        for w in near_of[span]:
            if w not in strong:
                pairs.add((word, w) if is_left else (w, word))
    for k in range(1, len(tok)):
        swapped = tok[: k - 1] + tok[k] + tok[k - 1] + tok[k + 1 :]
        left, right = swapped[:k], swapped[k:]
        if left in vocab and right in vocab and left not in strong and right not in strong:
            pairs.add((left, right))
    return near, list(pairs)


def neighbour_sets(
    tok: str, spans: Sequence[tuple[int, int]], vocab: Mapping[str, int], index: VocabIndex
) -> list[set[str]]:
    """For each span ``(a, b)``, the words of ``vocab`` within one edit of ``tok[a:b]``.

    ``vocab`` is the vocabulary (a word -> its document count) and ``index``
    its :class:`~memstore._vocabindex.VocabIndex`. Cost: about
    ``(b - a) ** 2`` per span (its deletions, each a probe of the index and
    a dictionary lookup, and, for a string of digits, its digit edits) plus
    a test per candidate word. Compiled where :mod:`memstore._speedups` is
    built (and ``vocab`` is a ``dict``), :func:`pure_neighbour_sets` otherwise:
    the same sets.
    """
    native = _wordbatch.speedups
    if native is not None and isinstance(vocab, dict):
        tables, overlay, live, words = index.probe_view("dels")
        got: list[set[str]] = native.neighbour_sets(
            tok, list(spans), vocab, words, live, tables, overlay
        )
        return got
    return pure_neighbour_sets(tok, spans, vocab, index)


def pure_neighbour_sets(
    tok: str, spans: Sequence[tuple[int, int]], vocab: Mapping[str, int], index: VocabIndex
) -> list[set[str]]:
    """:func:`neighbour_sets` in Python (the deletion index probed once for all spans)."""
    # A word with one extra character (a deletion of it is s), or a
    # substitution or transposition (a deletion of both agrees).
    found = index.edit_candidates(tok, spans)
    out: list[set[str]] = []
    for (a, b), cands in zip(spans, found, strict=True):
        s = tok[a:b]
        near = {w for w in cands if within_one_edit(s, w)}
        if s in vocab:
            near.add(s)
        for i in range(len(s)):  # a word missing one character
            d = s[:i] + s[i + 1 :]
            if d in vocab:
                near.add(d)
        near.update(digit_words_near(s, vocab))  # generated edits: within one already
        out.append(near)
    return out


def digit_words_near(s: str, vocab: Mapping[str, int]) -> list[str]:
    """Words of ASCII digits alone one insertion, substitution or transposition from ``s``.

    Such words have no deletion-index keys
    (:func:`~memstore._matchrule.indexed_deletions`); the edits are generated
    over the ten digits and looked up in ``vocab`` (a deletion from ``s`` is
    looked up by :func:`pure_neighbour_sets` already). A word of digits alone
    is that far from ``s`` only when ``s`` holds at most one other character:
    then only substituting it can reach one.

    >>> digit_words_near("1x34", {"1234": 1, "1534": 1}), digit_words_near("x8y9", {"1829": 1})
    (['1234', '1534'], [])
    """
    if len(s) > 1 and s.isalpha():  # two letters or more: two characters no digit
        return []
    odd = [i for i, c in enumerate(s) if c not in _DIGITS]
    if len(odd) > 1:
        return []
    if odd:
        head, tail = s[: odd[0]], s[odd[0] + 1 :]
        return [w for w in (head + d + tail for d in _DIGIT_CHARS) if w in vocab]
    found = [s[:i] + d + s[i:] for i in range(len(s) + 1) for d in _DIGIT_CHARS]
    found += [s[:i] + d + s[i + 1 :] for i in range(len(s)) for d in _DIGIT_CHARS]
    found += [s[: i - 1] + s[i] + s[i - 1] + s[i + 1 :] for i in range(1, len(s))]
    return [w for w in found if w in vocab]
