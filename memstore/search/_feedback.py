"""A second retrieval round seeded by the first: pseudo-relevance feedback, no model.

A multi-hop question ("What do Melanie's kids like, given where they went
camping?") has evidence in turns that share few words with it: the second
hop shares words with the *first* hop instead, the names and rare words of
the turn the question did match. So, when the first round's answer is not
confident, the Searcher takes the best :data:`FEEDBACK_DOCS` candidates of
the first round (fused, spread and signalled as the results would be), picks
the words those candidates carry that the query does not (:func:`feedback_terms`),
searches the lexical channel again with the query plus those words, and fuses
that ranking in at :data:`FEEDBACK_WEIGHT` x the first lexical round's share.
The first round's scores stay as they were; a candidate only the second round
found enters with the second round's share alone.

A word is worth feeding back when it is distinctive (a high inverse document
frequency, the lexical channel's own weight) and when several of the top
candidates carry it (two turns that name the same place or person are about
the same thing). A word that only one document holds links nothing and is
skipped, as are stop words, single characters, and the query's own words
(compared by their stems).

Deterministic: the terms are ordered by weight, then by the word itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from memstore.lexical import token_weight
from memstore.text import STOP_WORDS, stem, words

__all__ = [
    "FEEDBACK_DOCS",
    "FEEDBACK_TERMS",
    "FEEDBACK_WEIGHT",
    "feedback_query",
    "feedback_terms",
]

FEEDBACK_DOCS: Final = 3
"""The first round's best candidates whose words seed the second round."""
FEEDBACK_TERMS: Final = 5
"""The words, at most, added to the query for the second round."""
FEEDBACK_WEIGHT: Final = 0.5
"""The second round's share relative to the first lexical round's (below it: the
first round asked the user's question, the second a guess at its other hop)."""


def feedback_terms(
    docs: Sequence[Sequence[str]],
    df: Mapping[str, int],
    n_docs: int,
    query: str,
    limit: int = FEEDBACK_TERMS,
) -> list[str]:
    """The at most ``limit`` words of ``docs`` that best extend ``query``, best first.

    ``docs`` are the indexed words of the first round's top candidates, ``df``
    each word's document frequency among ``n_docs`` documents. A word's weight
    is its inverse document frequency (:func:`~memstore.lexical.token_weight`)
    times the number of ``docs`` holding it; ties go to the word that sorts
    first.

    >>> feedback_terms(
    ...     [["caroline", "adoption", "agency", "the"], ["caroline", "agency", "pride"]],
    ...     {"caroline": 40, "adoption": 3, "agency": 4, "the": 90, "pride": 1},
    ...     100,
    ...     "What did Caroline research?",
    ... )
    ['agency', 'adoption']
    """
    asked = {stem(w) for w in words(query)}
    held: dict[str, int] = {}
    for doc in docs:
        for w in set(doc):
            held[w] = held.get(w, 0) + 1
    weighted: list[tuple[float, str]] = []
    for w, n in held.items():
        f = df.get(w, 0)
        if f < 2 or len(w) < 2 or w in STOP_WORDS or stem(w) in asked:
            continue
        weighted.append((-n * token_weight(f, n_docs), w))
    weighted.sort()
    return [w for _, w in weighted[: max(limit, 0)]]


def feedback_query(query: str, terms: Iterable[str]) -> str:
    """The second round's query: ``query`` with ``terms`` appended (``""``: no terms)."""
    extra = " ".join(terms)
    return f"{query} {extra}" if extra else ""
