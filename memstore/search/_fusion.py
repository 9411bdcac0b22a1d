"""The general path's fusion: each channel's hits in, the fused candidates out, as objects.

Used when the lean path (:mod:`memstore.search._lean`) cannot run: a host
visibility predicate, host hooks on items, ``explain=True``, a store read
hook, or a store too large to snapshot right after a write. It keeps per-id
dictionaries and reads items through the searcher as they are needed.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memstore import limits
from memstore._lexindex import LexicalHit
from memstore._search_snapshot import item_words
from memstore.item import Item
from memstore.search._fusion_rules import RRF_K, SPREAD_DECAY, minmax, tie_ranks
from memstore.search._prior import (
    INFO_PRIOR_FUSED,
    INFO_PRIOR_LENGTH,
    length_credit,
    short_factors,
)
from memstore.search._signals import QuerySignals, item_bonus, max_bonus
from memstore.search._types import Explanation

if TYPE_CHECKING:
    from memstore.search._searcher import Searcher

__all__ = ["Candidate", "Fusion"]


@dataclass
class Candidate:
    """A readable candidate in fused order: its item, fused score, and where it came from."""

    item: Item
    fused: float = 0.0
    explanation: Explanation | None = None
    via: str = ""


class Fusion:
    """One search's candidates: what each channel contributes, then the fused order.

    A rank fusion (RRF) reads each semantic hit's item as it arrives, because
    a hit the caller cannot read takes no rank. A score fusion keeps ids and
    scores only, and reads items in fused order, as many as the results can
    use: a pool of hundreds costs a handful of reads.
    """

    def __init__(
        self,
        searcher: Searcher,
        kind: str,
        partition: str,
        explain: bool,
        by_score: bool,
        subject: str = "",
    ) -> None:
        self._searcher = searcher
        self._kind = kind
        self._subject = subject
        self._partition = partition
        self._explain = explain
        self._by_score = by_score
        self._lexical_weight = searcher.config.lexical_weight
        self._scores: dict[str, float] = {}
        self._explanations: dict[str, Explanation] = {}
        self._items: dict[str, Item] = {}
        self._unreadable: set[str] = set()
        self._read_s = 0.0
        self._semantic = False
        self._spread: dict[str, tuple[float, str]] = {}
        self._signals: QuerySignals | None = None
        self._short_prior = searcher.config.info_prior == INFO_PRIOR_FUSED
        self._length_prior = searcher.config.info_prior == INFO_PRIOR_LENGTH
        self._length_weight = searcher.config.length_weight

    def words(self, ids: Sequence[str]) -> npt.NDArray[np.int64]:
        """Each id's word count (the information prior's), 0 for an id no one holds.

        Read from the stored item (or the host's ``hydrate``) whether or not
        the caller may see it, as the lean path reads the snapshot's column:
        an unreadable hit still takes part in normalising its channel.
        """
        store, hydrate = self._searcher.store(), self._searcher.config.hydrate
        out = np.zeros(len(ids), np.int64)
        for i, id in enumerate(ids):
            item = store.get(id)
            if item is None and hydrate is not None:
                item = hydrate(id)
            if item is not None:
                out[i] = item_words(item)
        return out

    def _factors(self, scores: dict[str, float]) -> dict[str, float]:
        """Each candidate's information-prior multiplier (``info_prior="fused"``), or none."""
        if not (self._short_prior and self._semantic and scores):
            return {}
        ids = list(scores)
        return dict(zip(ids, short_factors(self.words(ids)).tolist(), strict=True))

    def _credits(self, scores: dict[str, float]) -> dict[str, float]:
        """Each candidate's length-prior addition (``info_prior="length"``), or none."""
        if not (self._length_prior and self._semantic and scores):
            return {}
        ids = list(scores)
        adds = length_credit(self.words(ids), self._length_weight)
        return dict(zip(ids, adds.tolist(), strict=True))

    def observe_hydrate(self) -> None:
        """Report the time spent reading items as the ``hydrate`` phase, once per search.

        Only a search that ran the semantic channel has the phase (the seed's
        rule: the fast path never hydrates); reading the fast path's few
        results is part of the call, not of a phase.
        """
        if self._semantic:
            self._searcher.stats.observe("search.phase.hydrate", self._read_s)

    def _read(self, id: str) -> Item | None:
        item = self._items.get(id)
        if item is None and id not in self._unreadable:
            item = self._searcher._hydrate(id, self._kind, self._partition, self._subject)
            if item is None:
                self._unreadable.add(id)
            else:
                self._items[id] = item
        return item

    def add_lexical(self, hits: Sequence[LexicalHit], items: Sequence[Item | None] | None) -> None:
        """The lexical channel's hits, best first, and each one's item when it was read already."""
        norms = minmax([h.score for h in hits]) if self._by_score else []
        weight = self._lexical_weight
        # Items with equal lexical scores share the best rank of their tie
        # ("1224" ranking): the order within a tie is only recency, so it must
        # not weigh in a rank fusion; the semantic channel breaks the tie
        # instead. A score fusion gives a tie one normalised score anyway.
        rank = 0
        for i, h in enumerate(hits):
            if i and h.score < hits[i - 1].score:
                rank = i
            item = items[i] if items is not None else None
            if item is not None:
                self._items[h.id] = item
            self._scores[h.id] = weight * norms[i] if self._by_score else 1.0 / (RRF_K + rank + 1)
            if self._explain:  # the shared rank of a tie: the one a rank fusion uses
                exp = Explanation(["lexical"], lexical_rank=rank, lexical_score=h.score)
                if self._by_score:
                    exp.lexical_norm = norms[i]
                self._explanations[h.id] = exp

    def add_feedback(self, hits: Sequence[LexicalHit], weight: float) -> None:
        """A second lexical round's hits, best first, fused in at ``weight`` x the first's share.

        Scored as :meth:`add_lexical` scores its hits (the tie's shared rank, or
        the normalised score), times ``weight``, and added to what a candidate
        holds already. Items are read only if they reach the results.
        """
        ids, scores = [h.id for h in hits], np.array([h.score for h in hits], np.float64)
        self.add_channel(ids, scores, weight * self._lexical_weight, weight, "feedback")

    def add_channel(
        self,
        ids: Sequence[str],
        scores: npt.NDArray[np.float64],
        share: float,
        rank_weight: float,
        channel: str,
    ) -> None:
        """Another ranking (ids and scores, best first), added to what each candidate holds.

        A score fusion adds ``share`` x the hit's normalised score (the first
        lexical channel and the semantic one have ``lexical_weight`` and the
        rest); a rank fusion ``rank_weight / (RRF_K + rank + 1)``, equal scores
        sharing the best rank of their tie. Items are read only if they reach
        the results; an explanation lists ``channel``.
        """
        raw: list[float] = scores.tolist()
        norms = minmax(raw) if self._by_score else []
        ranks = tie_ranks(raw)
        for i, id in enumerate(ids):
            add = share * norms[i] if self._by_score else rank_weight / (RRF_K + ranks[i] + 1)
            self._scores[id] = self._scores.get(id, 0.0) + add
            if self._explain:
                exp = self._explanations.get(id)
                if exp is None:
                    exp = self._explanations[id] = Explanation()
                exp.channels.append(channel)
                if channel == "bm25":
                    exp.bm25_score = raw[i]
                    exp.bm25_norm = norms[i] if self._by_score else None

    def ids(self, ordered: Sequence[Candidate]) -> list[str]:
        """The ids of candidates :meth:`ordered` returned."""
        return [c.item.id for c in ordered]

    def add_semantic(self, hits: Sequence[tuple[Any, float]], channel: str) -> None:
        """The vector index's hits, best first: ``(entry, similarity)``."""
        t0 = time.perf_counter()
        self._semantic = True
        if self._by_score:
            norms = minmax([sim for _, sim in hits])
            weight = 1.0 - self._lexical_weight
            ranked = [(e.id, sim, weight * n) for (e, sim), n in zip(hits, norms, strict=True)]
        else:
            readable = [(e.id, sim) for e, sim in hits if self._read(e.id) is not None]
            ranked = [(id, sim, 1.0 / (RRF_K + r + 1)) for r, (id, sim) in enumerate(readable)]
        for rank, (id, sim, add) in enumerate(ranked):
            self._scores[id] = self._scores.get(id, 0.0) + add
            if self._explain:
                exp = self._explanations.get(id)
                if exp is None:
                    exp = self._explanations[id] = Explanation()
                exp.channels.append(channel)
                exp.semantic_rank = rank
                exp.similarity = sim
                if self._by_score:
                    exp.semantic_norm = norms[rank]
        self._read_s += time.perf_counter() - t0

    def spread(self, relations: Collection[str]) -> None:
        """Lend each candidate's score to the items it is linked to by ``relations``.

        An item gains :data:`SPREAD_DECAY` x link weight x the score of its best
        linked candidate (ties: the smaller id), on top of its own score, which
        may be none. Scores are read as the channels left them, so the order in
        which candidates are visited does not matter and calling it again
        recomputes the same loan. The graph alone is read, not the items: a
        neighbour is read only if it reaches the results. At most
        :data:`~memstore.limits.SPREAD_REACH` linkers are read,
        the best candidates' first.
        """
        self._spread = {}
        base = self._scores
        if not relations or not base:
            return
        loans: dict[str, tuple[float, str]] = {}
        lenders = sorted((id for id, s in base.items() if s > 0.0), key=lambda i: (-base[i], i))
        store, reach = self._searcher.store(), limits.SPREAD_REACH
        for src, others in store.neighbours(lenders, relations, reach=reach).items():
            score = base[src]
            if score <= 0.0:
                continue
            for other, weight in others:
                add = SPREAD_DECAY * weight * score
                held = loans.get(other)
                if held is None or add > held[0] or (add == held[0] and src < held[1]):
                    loans[other] = (add, src)
        self._spread = loans

    def signal(self, signals: QuerySignals | None) -> None:
        """The query's signals, added to every readable candidate's score by :meth:`ordered`."""
        self._signals = signals

    def _signal_scores(
        self,
        scores: dict[str, float],
        need: int,
        factors: dict[str, float],
        credits: dict[str, float],
    ) -> dict[str, float]:
        """``scores`` with each readable candidate's signal bonus, for those that can still place.

        The bonus is the item's, so candidates are read in score order; once a
        candidate could not reach the best ``need`` even with the largest bonus
        (:func:`~memstore.search._signals.max_bonus`), neither can any after it,
        and they keep their scores unread (they are never returned).
        ``factors``: the information prior's multipliers (at most 1, applied
        after the bonus; empty: none), which keep that bound. ``credits``: the
        length prior's additions (at least 0, added after the bonus; empty:
        none): candidates are then visited in order of score plus credit, the
        bound applied to that sum.
        """
        sig = self._signals
        assert sig is not None
        most = max_bonus(sig)
        pre = {id: s + credits[id] for id, s in scores.items()} if credits else scores
        out = {id: s * factors[id] for id, s in scores.items()} if factors else dict(pre)
        best: list[float] = []  # the top ``need`` readable scores with their bonus, a min-heap
        for id in sorted(pre, key=lambda i: (-pre[i], i)):
            if len(best) >= need and pre[id] + most < best[0]:
                break
            item = self._read(id)
            if item is None:
                continue
            bonus = item_bonus(sig, item)
            out[id] = scores[id] + bonus
            if factors:
                out[id] *= factors[id]
            if credits:
                out[id] += credits[id]
            if len(best) < need:
                heapq.heappush(best, out[id])
            elif out[id] > best[0]:
                heapq.heapreplace(best, out[id])
            if self._explain and bonus:
                exp = self._explanations.get(id)
                if exp is None:
                    exp = self._explanations[id] = Explanation()
                exp.signal_score = bonus
        return out

    def ordered(self, need: int) -> list[Candidate]:
        """The best ``need`` readable candidates, best first (ties by id)."""
        t0 = time.perf_counter()
        scores = dict(self._scores)
        for id, (add, _) in self._spread.items():
            scores[id] = scores.get(id, 0.0) + add
        factors, credits = self._factors(scores), self._credits(scores)
        if self._signals is not None:
            scores = self._signal_scores(scores, need, factors, credits)
        elif factors:
            scores = {id: s * factors[id] for id, s in scores.items()}
        elif credits:
            scores = {id: s + credits[id] for id, s in scores.items()}
        out: list[Candidate] = []
        for id in sorted(scores, key=lambda i: (-scores[i], i)):
            item = self._read(id)
            if item is None:
                continue
            exp = self._explanations.get(id)
            loan = self._spread.get(id)
            if self._explain and loan is not None:
                if exp is None:
                    exp = self._explanations[id] = Explanation()
                if "spread" not in exp.channels:
                    exp.channels.append("spread")
                exp.spread_score, exp.spread_from = loan
            out.append(Candidate(item, scores[id], exp))
            if len(out) >= need:
                break
        self._read_s += time.perf_counter() - t0
        return out
