"""The information prior (``SearchConfig.info_prior``): few words, a small handicap;
or, in its third form, more words, a small credit.

A store of agent memory holds turns like "Later, take care!" or "Sounds
good!": they carry almost no information, and an embedding model puts such
generic text close to many queries (a *hub*), so on vector similarity alone
it can take a top place from an item that actually answers. The prior
handicaps a candidate by how little its text says, measured by its word
count (:func:`~memstore._search_snapshot.item_words`: the words of its
title and content, counted once per item: a column of the store's
search snapshot, :attr:`~memstore._search_snapshot.SearchSnapshot.words`),
so applying it is one array operation per query. Three forms:

* :data:`INFO_PRIOR_SEMANTIC`: each semantic hit's similarity ``s`` becomes
  ``s + PRIOR_WEIGHT * ln(1 + words)`` before the channel is normalised (and,
  in a rank fusion, ranked). The lexical channel is left alone: a short item
  that matches the query's words earned its place.
* :data:`INFO_PRIOR_FUSED`: when the semantic channel ran, a candidate of at
  most :data:`SHORT_WORDS` words has its final fused score (after spreading
  and the query signals) multiplied by :data:`SHORT_FACTOR`. It still lends
  its full score to its linked neighbours (a short question often sits just
  before its answer).
* :data:`INFO_PRIOR_LENGTH`: when the semantic channel ran, every candidate's
  final fused score (where ``"fused"`` applies its multiplier) gains
  ``c * ln(1 + words)``, ``c`` being ``SearchConfig.length_weight``
  (:data:`LENGTH_WEIGHT` unless set): not a handicap for the few shortest
  items but a preference for longer ones over the whole range of lengths,
  the form a learned rerank's item-length feature took. It too is added
  after spreading, so neighbours borrow the score without it.

:data:`INFO_PRIOR_OFF` (the default) leaves every score as it was. The
constants were fixed before measuring (:data:`LENGTH_WEIGHT`: fitted on a
grid fixed before measuring); see docs/benchmarks.md, "An information prior"
and "A length prior fitted leave-one-out", for the figures and the decisions
on the default.

>>> from memstore import Item
>>> item_words(Item(kind="event", title="Trip", content="Later, take care!"))
4
>>> short_factors(np.array([3, 8, 9]))
array([0.9, 0.9, 1. ])
>>> length_credit(np.array([0, 9]), 0.01).round(4)
array([0.   , 0.023])
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from memstore._search_snapshot import item_words

__all__ = [
    "INFO_PRIORS",
    "INFO_PRIOR_FUSED",
    "INFO_PRIOR_LENGTH",
    "INFO_PRIOR_OFF",
    "INFO_PRIOR_SEMANTIC",
    "LENGTH_WEIGHT",
    "PRIOR_WEIGHT",
    "SHORT_FACTOR",
    "SHORT_WORDS",
    "item_words",
    "length_credit",
    "semantic_prior",
    "short_factors",
]

INFO_PRIOR_OFF: Final = "off"
"""No prior: scores as the channels give them (the default)."""
INFO_PRIOR_SEMANTIC: Final = "semantic"
"""The semantic channel's similarity plus ``PRIOR_WEIGHT * ln(1 + words)``."""
INFO_PRIOR_FUSED: Final = "fused"
"""The fused score of a candidate of at most ``SHORT_WORDS`` words times ``SHORT_FACTOR``."""
INFO_PRIOR_LENGTH: Final = "length"
"""Every fused score plus ``SearchConfig.length_weight * ln(1 + words)``."""
INFO_PRIORS: Final = (INFO_PRIOR_OFF, INFO_PRIOR_SEMANTIC, INFO_PRIOR_FUSED, INFO_PRIOR_LENGTH)
"""Every value ``SearchConfig.info_prior`` accepts."""

_ENTRY = itemgetter(0)
_SIM = itemgetter(1)

PRIOR_WEIGHT: Final = 0.05
"""Cosine credit per unit of ``ln(1 + words)``: a 30-word item gains about 0.10
over a 3-word one (the constant of a dense-only probe on LoCoMo dev, taken over)."""
SHORT_WORDS: Final = 8
"""Items of at most this many words are "short" for :data:`INFO_PRIOR_FUSED`."""
SHORT_FACTOR: Final = 0.9
"""What a short item's fused score is multiplied by (:data:`INFO_PRIOR_FUSED`)."""
LENGTH_WEIGHT: Final = 0.08
"""Fused-score credit per unit of ``ln(1 + words)`` (:data:`INFO_PRIOR_LENGTH`; the default
of ``SearchConfig.length_weight``): a 40-word item gains about 0.10 over a 10-word one.
Fitted on LoCoMo dev, all five conversations, over a grid fixed beforehand
(``python benchmarks/fit_length_prior.py --data .../locomo/dev.json``; it is the
grid's largest value, picked on every leave-one-out fold too)."""


def semantic_prior(
    hits: Sequence[tuple[Any, float]], words: npt.NDArray[np.int64]
) -> list[tuple[Any, float]]:
    """``hits`` (``(entry, similarity)``, best first) with the prior added, best first again.

    ``words[i]`` is hit ``i``'s word count. The sort is stable, so hits whose
    scores tie keep the index's order. Both search paths call this one
    function, so they see the same floats.
    """
    if not hits:
        return []
    sims = np.fromiter(map(_SIM, hits), np.float64, len(hits))
    scored = sims + PRIOR_WEIGHT * np.log1p(words.astype(np.float64))
    order = np.argsort(-scored, kind="stable")  # negation is exact: best first, ties kept
    entries = itemgetter(*order.tolist())(list(map(_ENTRY, hits)))
    if len(hits) == 1:
        entries = (entries,)
    return list(zip(entries, scored[order].tolist(), strict=True))


def short_factors(words: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Each candidate's multiplier under :data:`INFO_PRIOR_FUSED`: ``SHORT_FACTOR`` or 1.0."""
    out: npt.NDArray[np.float64] = np.where(words <= SHORT_WORDS, SHORT_FACTOR, 1.0)
    return out


def length_credit(words: npt.NDArray[np.int64], weight: float) -> npt.NDArray[np.float64]:
    """Each candidate's addition under :data:`INFO_PRIOR_LENGTH`: ``weight * ln(1 + words)``.

    At least 0 (``weight`` is), so a fused score only rises. Both search
    paths call this one function on the same word counts, so they add the
    same floats.
    """
    out: npt.NDArray[np.float64] = weight * np.log1p(words.astype(np.float64))
    return out
