"""The lean hybrid path: fusion, spreading and rerank over arrays; items read only at the end.

The general path (:mod:`memstore.search._fusion`, :mod:`memstore.search._shaping`)
keeps a dictionary per candidate, walks the link graph per candidate, and
reads (copies) every candidate it orders. With the default rules none of that
needs an item: whether a candidate is readable (active, not past its
deadline, not private, of a searchable kind, in the caller's partition),
what it lends its neighbours, and what the rerank multiplies it by are all
per-slot facts of the store's :class:`~memstore._search_snapshot.SearchSnapshot`.
So :class:`LeanFusion` scores the pool in numpy, computes the readable mask
once per query, spreads along the snapshot's compressed link rows, and
:meth:`LeanFusion.results` copies only the items returned (plus, for the
near-duplicate collapse, a look at the stored knowledge cells in the pool).

Every number is computed by the same IEEE operations in the same order as
the general path, ties break by id the same way, so the two return the same
results; ``tests/test_search_differential.py`` holds them to it.

It runs when nothing needs an item mid-way: no ``explain``, no host
``visible``/``doc_visible``/``hydrate``/``state``/``anchor``/``collapse_key``,
no ``source_relation``, no ``live`` source on a full search, no store ``read``
hook (it may amend items), and a snapshot the store judged worth building.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Collection, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memstore._lexindex import LexicalHit
from memstore._search_snapshot import SearchSnapshot
from memstore.consolidate import CONSOLIDATION_KINDS
from memstore.item import EXACT_ID_MATCH_SCORE, KIND_WATCH_ITEM, Item
from memstore.neardup import near_duplicate_memory
from memstore.rerank import rerank_base_score
from memstore.search._fusion_rules import RRF_K, SPREAD_DECAY, tie_ranks
from memstore.search._shaping import RECENT_BOOST, RECENT_WINDOW, WATCH_BOOST
from memstore.search._signals import QuerySignals, slot_bonus
from memstore.search._types import SearchResult
from memstore.tags import PARTITION_ALL

if TYPE_CHECKING:
    from memstore.search._searcher import Searcher

__all__ = ["LeanFusion"]

_HIT = itemgetter(0)
_ID = attrgetter("id")
_SIM = itemgetter(1)
_SCORE = attrgetter("score")
_RECENT_US = RECENT_WINDOW // _dt.timedelta(microseconds=1)


def _minmax(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """:func:`~memstore.search._fusion_rules.minmax` over an array (the same arithmetic)."""
    if scores.size == 0:
        return scores
    hi, lo = scores.max(), scores.min()
    if hi <= lo:
        return np.ones(scores.size, np.float64)
    out: npt.NDArray[np.float64] = (scores - lo) / (hi - lo)
    return out


class LeanFusion:
    """One search's candidates as slots of a snapshot: channels in, fused order and results out."""

    def __init__(
        self,
        searcher: Searcher,
        snap: SearchSnapshot,
        now_us: int,
        kind: str,
        partition: str,
        by_score: bool,
    ) -> None:
        self._searcher = searcher
        self._snap = snap
        self._now_us = now_us
        self._by_score = by_score
        self._lexical_weight = searcher.config.lexical_weight
        n = len(snap)
        self._base = np.zeros(n, np.float64)
        self._scored = np.zeros(n, np.bool_)
        self._loan_to = np.zeros(0, np.intp)
        self._loan_add = np.zeros(0, np.float64)
        self._final = self._base
        self._signals: QuerySignals | None = None
        self._semantic = False
        self._read_s = 0.0
        # What the general path's item reads decide, once for the whole pool.
        alive = snap.live
        hidden = () if kind else tuple(searcher.store().vocabulary().non_searchable)
        readable = snap.readable_mask(
            kind, hidden, None if partition == PARTITION_ALL else partition
        )
        if now_us >= snap.first_deadline_us:  # some item may be past its deadline
            unexpired = snap.deadline_us > now_us
            alive, readable = alive & unexpired, readable & unexpired
        self._alive = alive
        """Takes part in spreading, as either end (the store's ``neighbours`` rule)."""
        self._readable = readable

    def _slots(self, ids: Sequence[str]) -> npt.NDArray[np.intp]:
        """Each id's slot, -1 for an id the store does not hold (never readable)."""
        get = self._snap.slot.get
        return np.fromiter(map(get, ids, repeat(-1, len(ids))), np.intp, len(ids))

    def observe_hydrate(self) -> None:
        """The ``hydrate`` phase, as the general path reports it (semantic searches only)."""
        if self._semantic:
            self._searcher.stats.observe("search.phase.hydrate", self._read_s)

    def add_lexical(self, hits: Sequence[tuple[LexicalHit, Item | None]]) -> None:
        """The lexical channel's hits, best first (no item is read on this path)."""
        lex = list(map(_HIT, hits))
        scores = list(map(_SCORE, lex))
        if self._by_score:
            vals = self._lexical_weight * _minmax(np.array(scores, np.float64))
        else:
            vals = 1.0 / (RRF_K + np.array(tie_ranks(scores), np.intp) + 1)
        slots = self._slots(list(map(_ID, lex)))
        known = slots >= 0
        slots = slots[known]
        self._base[slots] = vals[known]
        self._scored[slots] = True

    def add_semantic(self, hits: Sequence[tuple[Any, float]], channel: str) -> None:
        """The vector index's hits, best first: ``(entry, similarity)``."""
        del channel  # named in explanations only, which this path does not build
        t0 = time.perf_counter()
        self._semantic = True
        slots = self._slots(list(map(_ID, map(_HIT, hits))))
        if self._by_score:
            adds = (1.0 - self._lexical_weight) * _minmax(
                np.fromiter(map(_SIM, hits), np.float64, len(hits))
            )
            known = slots >= 0
            slots, adds = slots[known], adds[known]
        else:
            slots = slots[slots >= 0]
            slots = slots[self._readable[slots]]
            adds = 1.0 / (RRF_K + np.arange(slots.size, dtype=np.intp) + 1)
        self._base[slots] += adds
        self._scored[slots] = True
        self._read_s += time.perf_counter() - t0

    def spread(self, relations: Collection[str]) -> None:
        """Each candidate lends ``SPREAD_DECAY x weight x score`` to its live neighbours.

        A neighbour keeps the largest loan, as
        :meth:`memstore.search._fusion.Fusion.spread` does (which also names
        the lender, for explanations; this path needs the amount alone).
        """
        self._loan_to = np.zeros(0, np.intp)
        self._loan_add = np.zeros(0, np.float64)
        base = self._base
        if not relations or not self._scored.any():
            return
        sources = np.flatnonzero(self._scored & self._alive & (base > 0.0))
        src, other, weight = self._snap.graph(relations).edges(sources)
        add = (SPREAD_DECAY * weight) * base[src]
        keep = self._alive[other]
        src, other, add = src[keep], other[keep], add[keep]
        if other.size == 0:
            return
        order = np.lexsort((-add, other))
        first = np.ones(order.size, np.bool_)
        tos = other[order]
        first[1:] = tos[1:] != tos[:-1]
        best = order[first]
        self._loan_to, self._loan_add = other[best], add[best]

    def signal(self, signals: QuerySignals | None) -> None:
        """The query's signals, added to every readable candidate's score by :meth:`ordered`."""
        self._signals = signals

    def ordered(self, need: int) -> list[int]:
        """The best ``need`` readable candidates' slots, best first (ties by id)."""
        t0 = time.perf_counter()
        final = self._base.copy()
        final[self._loan_to] += self._loan_add
        self._final = final
        cand = self._scored.copy()
        cand[self._loan_to] = True
        slots = np.flatnonzero(cand & self._readable)
        if self._signals is not None:
            final[slots] += slot_bonus(self._signals, self._snap, slots)
        order = np.lexsort((self._snap.id_rank[slots], -final[slots]))[:need]
        self._read_s += time.perf_counter() - t0
        out: list[int] = slots[order].tolist()
        return out

    # ------------------------------------------------------------ results

    def results(
        self, ordered: list[int], query: str, limit: int, *, full: bool, shaped: bool
    ) -> list[SearchResult]:
        """The fused order shaped (or not) into at most ``limit`` results; reads only those."""
        snap = self._snap
        fused: list[float] = self._final[ordered].tolist() if ordered else []
        if full:
            exact = query.strip()
            hit = snap.slot.get(exact) if exact else None
            if hit is not None and self._readable[hit]:
                pairs = [(s, f) for s, f in zip(ordered, fused, strict=True) if s != hit]
                ordered = [hit, *(s for s, _ in pairs)]
                fused = [EXACT_ID_MATCH_SCORE, *(f for _, f in pairs)]
        if not shaped:
            return self._read(ordered[:limit], fused[:limit], [0] * min(limit, len(ordered)))
        at = np.array(ordered, np.intp)
        watch = (snap.kind[at] == snap.kind_code.get(KIND_WATCH_ITEM, -1)).tolist()
        recent = (snap.has_update[at] & (snap.updated_us[at] >= self._now_us - _RECENT_US)).tolist()
        scores: list[float] = []
        for rank, f in enumerate(fused):
            if f >= EXACT_ID_MATCH_SCORE:
                scores.append(EXACT_ID_MATCH_SCORE)
                continue
            score = rerank_base_score(rank)
            if watch[rank]:  # readable, so active
                score *= WATCH_BOOST
            if recent[rank]:
                score *= RECENT_BOOST
            scores.append(score)
        ids = snap.ids
        order = sorted(range(len(ordered)), key=lambda i: (-scores[i], ids[ordered[i]]))
        # The near-duplicate collapse: knowledge cells against earlier survivors of their kind.
        items = snap.items
        survivors: list[int] = []
        counts: dict[int, int] = {}
        for i in order:
            it = items[ordered[i]]
            if it.kind in CONSOLIDATION_KINDS:
                for j in survivors:
                    other = items[ordered[j]]
                    if other.kind == it.kind and near_duplicate_memory(other, it)[1]:
                        counts[j] = counts.get(j, 0) + 1 + counts.get(i, 0)
                        break
                else:
                    survivors.append(i)
            else:
                survivors.append(i)
        top = survivors[: max(limit, 0)]
        return self._read(
            [ordered[i] for i in top], [scores[i] for i in top], [counts.get(i, 0) for i in top]
        )

    def _read(
        self, slots: Sequence[int], scores: Sequence[float], collapsed: Sequence[int]
    ) -> list[SearchResult]:
        ids = [self._snap.ids[s] for s in slots]
        got = {it.id: it for it in self._searcher.store().search_read(ids)}
        return [
            SearchResult(got[id], score, n)
            for id, score, n in zip(ids, scores, collapsed, strict=True)
            if id in got
        ]
