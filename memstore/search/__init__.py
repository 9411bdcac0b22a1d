"""Hybrid search: lexical first, semantic fused in when lexical is not sure.

A :class:`Searcher` answers a query over a :class:`~memstore.store.Store`:

1. the lexical pass (the store's index, no model call); a *confident* answer
   (the top hit covers every query token) returns at once;
2. otherwise the vector index is searched (one embedding call) with the
   caller's visibility applied inside it, and the two channels are fused: by
   default on their scores (each channel's scores min-max normalised over its
   best :data:`FUSION_POOL` hits, then averaged), or by Reciprocal Rank Fusion
   with ``fusion="rrf"``;
3. the fused list is reranked (state, anchor, watch and recency multipliers),
   near-duplicates are collapsed, and links may expand or replace results.

The package splits along those seams: :mod:`~memstore.search._types`
(config, results, explanations), :mod:`~memstore.search._visibility` (the
default partition rule), :mod:`~memstore.search._fusion_rules` (the fusion
arithmetic), :mod:`~memstore.search._fusion` and :mod:`~memstore.search._shaping`
(the general path, on items), :mod:`~memstore.search._lean` (the same
results over arrays, reading only the items returned), and
:mod:`~memstore.search._searcher` (the call that drives them).

>>> from memstore import Item, Store
>>> store = Store()
>>> _ = store.upsert(Item(kind="stable_fact", title="Ledger pool size",
...                       content="the ledger db pool allows 20 connections", confidence="high"))
>>> searcher = Searcher(SearchConfig(store=store))
>>> [r.item.title for r in searcher.hybrid_search("ledger pool")]
['Ledger pool size']
>>> searcher.stats.snapshot().kw_voice_hits
1
"""

from __future__ import annotations

from memstore.search._fusion_rules import (
    BM25_WEIGHT,
    DEFAULT_FANOUT,
    FUSION_DEPTH,
    FUSION_POOL,
    FUSION_RRF,
    FUSION_SCORE,
    LEXICAL_WEIGHT,
    LONG_QUERY_TOKENS,
    POOL_LIMIT,
    RRF_K,
    SIGNAL_WEIGHT,
    SPREAD_DECAY,
)
from memstore.search._searcher import Searcher
from memstore.search._shaping import (
    ANCHOR_BOOST,
    RECENT_BOOST,
    RECENT_WINDOW,
    STATE_OPEN_BOOST,
    STATE_RESOLVED_PENALTY,
    WATCH_BOOST,
)
from memstore.search._types import Explanation, SearchConfig, SearchResult, VectorIndex
from memstore.search._visibility import default_visible

__all__ = [
    "ANCHOR_BOOST",
    "BM25_WEIGHT",
    "DEFAULT_FANOUT",
    "FUSION_DEPTH",
    "FUSION_POOL",
    "FUSION_RRF",
    "FUSION_SCORE",
    "LEXICAL_WEIGHT",
    "LONG_QUERY_TOKENS",
    "POOL_LIMIT",
    "RECENT_BOOST",
    "RECENT_WINDOW",
    "RRF_K",
    "SIGNAL_WEIGHT",
    "SPREAD_DECAY",
    "STATE_OPEN_BOOST",
    "STATE_RESOLVED_PENALTY",
    "WATCH_BOOST",
    "Explanation",
    "SearchConfig",
    "SearchResult",
    "Searcher",
    "VectorIndex",
    "default_visible",
]
