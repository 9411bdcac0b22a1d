"""A BM25 tie-break for the ``lexical`` mode (``--lexical-tiebreak``): an experiment.

Part of ``benchmarks/locomo.py`` (run that script). The engine's lexical
score has no term frequency and no length normalisation, so on short
conversational turns dozens of hits tie, and ties are settled by recency and
id. This module reorders, on the returned hits only (the engine is not
changed), each run of *exactly equal* lexical scores by a second score of the
query's words against the turn's text:

* ``bm25``: BM25 with term-frequency saturation ``k1`` = :data:`K1` and no
  length normalisation (``b`` = 0; length normalisation hurt on this data,
  see docs/benchmarks.md);
* ``idf-mass``: the summed IDF of the distinct query words the turn contains.

Words are bm25s's tokens (its regex, lower case, English stop words); IDF is
BM25's ``log(1 + (n - df + 0.5) / (df + 0.5))`` over the conversation's
turns. The hits come from ``Store.keyword_ranked`` to a depth of
:data:`DEPTH`, so a tie that straddles the cut-off can be settled in favour
of a turn below it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

TIEBREAKS = ("engine", "bm25", "idf-mass")
"""``--lexical-tiebreak`` choices; ``engine`` is the index's own order."""
K1 = 1.2
"""BM25's textbook term-frequency saturation (not fitted here)."""
DEPTH = 200
"""How deep the reordered lexical ranking reaches."""

Tokenize = Callable[[list[str]], list[list[str]]]


class TieBreak:
    """One conversation's token statistics and the second score of one rule.

    >>> tb = TieBreak("bm25", ["a", "b", "c"], [["pool", "pool"], ["pool"], ["tax"]])
    >>> tb.reorder([("a", 0.5), ("b", 0.5), ("c", 0.2)], ["pool", "tax"])
    ['a', 'b', 'c']
    >>> tb.reorder([("c", 0.5), ("b", 0.5)], ["tax"])
    ['c', 'b']
    """

    def __init__(self, rule: str, ids: Sequence[str], tokens: Sequence[Sequence[str]]) -> None:
        if rule not in TIEBREAKS[1:]:
            raise ValueError(f"unknown tie-break {rule!r}; known: {', '.join(TIEBREAKS)}")
        self.rule = rule
        self._tf = {id: Counter(ts) for id, ts in zip(ids, tokens, strict=True)}
        df = Counter(w for ts in tokens for w in set(ts))
        n = len(ids)
        self._idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def score(self, id: str, query: Sequence[str]) -> float:
        """The rule's score of turn ``id`` for the query's tokens (0 for an unknown id)."""
        tf = self._tf.get(id, Counter())
        words = set(query)
        if self.rule == "idf-mass":
            return sum(self._idf[w] for w in words if tf[w])
        return sum(self._idf[w] * tf[w] * (K1 + 1) / (tf[w] + K1) for w in words if tf[w])

    def reorder(self, hits: Sequence[tuple[str, float]], query: Sequence[str]) -> list[str]:
        """``hits`` (id, engine score; best first) with each run of equal scores reordered.

        A stable sort on (engine score, rule score), both descending: hits of
        different engine scores keep their order, and equal rule scores keep
        the engine's.
        """
        order = sorted(hits, key=lambda h: (-h[1], -self.score(h[0], query)))
        return [id for id, _ in order]
