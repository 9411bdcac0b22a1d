"""BM25: a second way of scoring a query's words, beside the lexicon's match levels.

The lexicon's own score (:mod:`memstore.lexical`) rates how well each query
token matches a document (exact, prefix, stem, one edit, substring, fuzzy),
weighted by the token's distinctiveness. It has no document-length
normalisation: a one-line turn and a long paragraph that hold the same query
words score the same, and on short conversational texts dozens of hits tie.
BM25 (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25
and Beyond", 2009) weighs the same exact words differently: a word found in a
short document counts for more than the same word in a long one::

    score(d) = sum over query words w in d of
               idf(w) * (k1 + 1) / (1 + k1 * (1 - b + b * |d| / avgdl))
    idf(w)   = ln(1 + (N - df(w) + 0.5) / (df(w) + 0.5))

with ``|d|`` the document's words, ``avgdl`` their mean over the live
documents, ``N`` the live documents and ``df(w)`` those holding ``w``. Each
word counts once per document (term frequency 1, "binary" BM25): the
lexicon's postings say which documents hold a word, not how often, and on
the short texts an agent's memory holds a word rarely repeats.

The hybrid search fuses this score as a third channel at a small share
(:data:`~memstore.search._fusion_rules.BM25_WEIGHT`) when it runs the
semantic channel: see :meth:`memstore.search.Searcher.hybrid_search`.

>>> import numpy as np
>>> lengths = DocLengths()
>>> texts = [" red fox ", " red fox jumps over the lazy dog ", ""]
>>> alive = np.array([True, True, False])
>>> dl, avgdl = lengths.of(texts, alive, generation=1)
>>> dl.tolist(), avgdl
([2, 7, 0], 4.5)
>>> red = np.array([0, 1, 2], np.int32)  # slot 2 is dead
>>> words = live_tokens([red], [1.0], alive, lengths.factors(texts, alive, generation=1))
>>> cand, scores, covered = bm25(words, cap=3)
>>> cand.tolist(), [round(s, 3) for s in scores.tolist()], covered.tolist()
([0, 1], [1.294, 0.815], [1, 1])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import repeat

import numpy as np
import numpy.typing as npt

__all__ = ["K1", "B", "DocLengths", "Token", "bm25", "idf", "live_tokens"]

K1 = 1.2
"""BM25's saturation constant: with term frequency 1, how much a short document is
favoured over a long one is ``(k1 + 1)`` at most (the textbook 1.2, not fitted)."""
B = 0.75
"""BM25's length normalisation: 0 ignores document length, 1 scales by it fully (textbook)."""

_SPARSE = 8
"""Below ``capacity / _SPARSE`` postings, a query's slots are grouped by a sort (the rule
:mod:`memstore._lexscore` follows)..."""
_DENSE_CAP = 16_384
"""...unless the capacity is at most this: arrays that small cost less than the sort."""

_Ix = npt.NDArray[np.intp]
_F64 = npt.NDArray[np.float64]
_I32 = npt.NDArray[np.int32]


def idf(n: int, df: int) -> float:
    """BM25's inverse document frequency of a word in ``df`` of ``n`` documents (always > 0).

    >>> round(idf(100, 1), 3), round(idf(100, 99), 3)
    (4.21, 0.015)
    """
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class DocLengths:
    """The words of each slot's document, counted when first asked for, and BM25's
    length factor of each.

    Counted from the lexicon's per-slot texts (``" w1 w2 ... "``, see
    :class:`~memstore.lexical.Lexicon`), so writes pay nothing: slots only grow,
    and a read counts the ones added since the last read. A compaction
    renumbers slots: :meth:`reset` and the next read counts them all again.
    Not thread-safe on its own: the lexicon calls it under its lock.
    """

    __slots__ = ("_factors", "_lengths", "_mean", "_upto")

    def __init__(self) -> None:
        self._lengths: _I32 = np.zeros(0, np.int32)
        self._upto = 0
        self._mean: tuple[int, float] = (-1, 0.0)
        self._factors: tuple[int, _F64] = (-1, np.zeros(0, np.float64))

    def reset(self) -> None:
        """Forget every count (slots were renumbered)."""
        self._lengths = np.zeros(0, np.int32)
        self._upto = 0
        self._mean = (-1, 0.0)
        self._factors = (-1, np.zeros(0, np.float64))

    def of(
        self, texts: Sequence[str], alive: npt.NDArray[np.bool_], generation: int
    ) -> tuple[_I32, float]:
        """Each slot's word count (a read-only view) and the mean over the live slots.

        ``texts``: the slots' space-padded word strings; ``alive``: which
        slots hold a document (at least ``len(texts)`` entries);
        ``generation``: the lexicon's, which every write changes (the mean is
        kept until it does). A dead slot's count is whatever it was: callers
        mask dead slots out.
        """
        n = len(texts)
        if self._upto < n:
            grown = np.zeros(max(n, 2 * self._lengths.size), np.int32)
            grown[: self._upto] = self._lengths[: self._upto]
            spaces = np.fromiter(map(str.count, texts[self._upto : n], repeat(" ")), np.int32)
            # " w1 w2 " holds one more space than words; an empty text (a dead slot) none.
            grown[self._upto : n] = np.maximum(spaces - 1, 0)
            self._lengths, self._upto = grown, n
        lengths = self._lengths[:n]
        if self._mean[0] != generation:
            live = lengths[alive[:n]]
            self._mean = (generation, float(live.mean()) if live.size else 0.0)
        view = lengths.view()
        view.flags.writeable = False
        return view, self._mean[1]

    def factors(self, texts: Sequence[str], alive: npt.NDArray[np.bool_], generation: int) -> _F64:
        """Each slot's length factor ``(k1 + 1) / (1 + k1 * (1 - b + b * |d| / avgdl))``
        (read-only), kept until the generation changes."""
        if self._factors[0] != generation:
            lengths, avgdl = self.of(texts, alive, generation)
            ratio = lengths * (B / avgdl) if avgdl > 0 else np.full(lengths.size, B)
            out = np.asarray((K1 + 1.0) / (1.0 + K1 * ((1.0 - B) + ratio)), np.float64)
            out.flags.writeable = False
            self._factors = (generation, out)
        return self._factors[1]


Token = tuple[_Ix, _F64, float]
"""A query word for scoring: its live documents' slots (increasing), each one's length
factor, and the word's idf."""


def live_tokens(
    postings: Sequence[_I32], idfs: Sequence[float], alive: npt.NDArray[np.bool_], factors: _F64
) -> list[Token]:
    """Each word's live slots (8-byte, as the compiled rank reads them) with their length
    factors, and its idf; words no live document holds are left out."""
    out: list[Token] = []
    for p, w in zip(postings, idfs, strict=True):
        live = p[alive[p]].astype(np.intp)
        if live.size:
            out.append((live, factors[live], w))
    return out


def bm25(tokens: Sequence[Token], cap: int) -> tuple[_Ix, _F64, _Ix]:
    """Every slot holding a query word, its BM25 score, and how many query words it holds.

    ``tokens``: from :func:`live_tokens`; ``cap``: the slots' range. A slot's
    score sums ``idf x factor`` over its words in token order, as the compiled
    rank sums ``weight x level`` (the same floating-point result, bit for bit).
    The slots come back ascending. Term frequency is taken as 1 (see the
    module docstring).
    """
    if not tokens:
        return np.zeros(0, np.intp), np.zeros(0, np.float64), np.zeros(0, np.intp)
    slots = np.concatenate([s for s, _, _ in tokens])
    vals = np.concatenate([w * f for _, f, w in tokens])
    if slots.size * _SPARSE < cap and cap > _DENSE_CAP:  # few postings in a large index
        order = np.argsort(slots, kind="stable")
        ordered = slots[order]
        first = np.empty(ordered.size, np.bool_)
        first[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        group = np.cumsum(first) - 1
        cand = ordered[first]
        scores = np.bincount(group, vals[order], cand.size)
        covered = np.bincount(group, minlength=cand.size)
    else:  # one pass over the slots' range
        counts = np.bincount(slots, minlength=cap)
        cand = np.flatnonzero(counts)
        scores = np.bincount(slots, vals, cap)[cand]
        covered = counts[cand]
    return cand, np.asarray(scores, np.float64), np.asarray(covered, np.intp)
