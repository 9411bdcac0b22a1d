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
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice, repeat
from operator import attrgetter, gt, itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memstore import _wordbatch, limits
from memstore._lexhits import LexicalColumns, LexicalHit, LexicalHits
from memstore._search_snapshot import LinkGraph, SearchSnapshot
from memstore.consolidate import CONSOLIDATION_KINDS
from memstore.item import EXACT_ID_MATCH_SCORE, KIND_WATCH_ITEM, Item
from memstore.rerank import rerank_base_score
from memstore.search._collapse import Collapse
from memstore.search._fusion_rules import RRF_K, SPREAD_DECAY, tie_ranks
from memstore.search._prior import (
    INFO_PRIOR_FUSED,
    INFO_PRIOR_LENGTH,
    SHORT_FACTOR,
    SHORT_WORDS,
    length_credit,
)
from memstore.search._shaping import RECENT_BOOST, RECENT_WINDOW, WATCH_BOOST
from memstore.search._signals import QuerySignals, max_bonus, slot_bonus
from memstore.search._slothits import SlotHits
from memstore.search._types import SearchResult
from memstore.tags import PARTITION_ALL

if TYPE_CHECKING:
    from memstore.search._searcher import Searcher

__all__ = ["LeanFusion", "borrowed_results", "top_slots"]

_HIT = itemgetter(0)
_ID = attrgetter("id")
_SIM = itemgetter(1)
_SCORE = attrgetter("score")
_RECENT_US = RECENT_WINDOW // _dt.timedelta(microseconds=1)
_WIDE = np.dtype(np.intp).itemsize == 8
"""The compiled ``slots_of`` writes 8-byte slots: numpy's ``intp`` here."""


_BORROW: ContextVar[bool] = ContextVar("memstore_borrow_results", default=False)


@contextmanager
def borrowed_results() -> Iterator[None]:
    """Within it, this thread's lean searches return the stored items themselves, not copies.

    For a caller that reads its results at once and hands none of them on
    (the server's recall: :class:`memstore.protocol.verbs.Verbs` renders
    each hit to JSON): the copies :meth:`~memstore.store.Store.search_read`
    makes cost about a tenth of a cold recall's CPU and protect nothing
    there. A stored item refuses attribute changes, but its lists and dicts
    are the store's own: whoever enters this must not change them. Public
    searches (outside it) always get copies, as documented.
    """
    token = _BORROW.set(True)
    try:
        yield
    finally:
        _BORROW.reset(token)


@lru_cache(maxsize=64)
def _base_scores(n: int) -> tuple[float, ...]:
    """:func:`~memstore.rerank.rerank_base_score` of ranks ``0..n-1``, kept."""
    return tuple(rerank_base_score(rank) for rank in range(n))


def _minmax(scores: npt.NDArray[np.float64], best_first: bool = False) -> npt.NDArray[np.float64]:
    """:func:`~memstore.search._fusion_rules.minmax` over an array (the same arithmetic).

    ``best_first``: the scores never increase (a ranking's, as the lexical
    index returns them), so the first is the largest and the last the
    smallest: read there, not found by two passes over the array.
    """
    if scores.size == 0:
        return scores
    if best_first:
        hi, lo = scores[0], scores[-1]
    else:
        hi, lo = scores.max(), scores.min()
    if hi <= lo:
        return np.ones(scores.size, np.float64)
    out: npt.NDArray[np.float64] = (scores - lo) / (hi - lo)
    return out


@dataclass(frozen=True, slots=True)
class _Inbound:
    """A snapshot's link graph as edges grouped by target: ``src -> other``, sorted by ``other``.

    ``starts`` are the offsets of each target's run of edges, ``targets`` the
    target of each run; ``decay_weight`` is ``SPREAD_DECAY x weight`` per edge
    (the factor :meth:`LeanFusion.spread` multiplies a lender's score by).
    """

    src: npt.NDArray[np.intp]
    other: npt.NDArray[np.intp]
    decay_weight: npt.NDArray[np.float64]
    starts: npt.NDArray[np.intp]
    targets: npt.NDArray[np.intp]
    own: npt.NDArray[np.bool_]
    """Per edge: ``src`` holds the link (else ``other``, one of its linkers, does)."""

    @classmethod
    def of(cls, graph: LinkGraph) -> _Inbound:
        n = graph.start.size - 1
        src = np.repeat(np.arange(n, dtype=np.intp), np.diff(graph.start))
        order = np.argsort(graph.other, kind="stable")
        src, other = src[order], graph.other[order]
        decay_weight = SPREAD_DECAY * graph.weight[order]
        first = np.ones(other.size, np.bool_)
        first[1:] = other[1:] != other[:-1]
        starts = np.flatnonzero(first)
        return cls(src, other, decay_weight, starts, other[starts], graph.own[order])


def _inbound(snap: SearchSnapshot, relations: Collection[str]) -> _Inbound:
    """The snapshot's graph along ``relations`` grouped by target, built on first use.

    Kept in the snapshot's :attr:`~memstore._search_snapshot.SearchSnapshot.of_graph`:
    it holds the graph's edges alone, so a snapshot derived with the same
    edges (new slots without any) carries it over.
    """
    key = frozenset(relations)
    got = snap.of_graph.get(key)
    if not isinstance(got, _Inbound):
        got = _Inbound.of(snap.graph(key))
        snap.of_graph[key] = got
    return got


def _linker_cap(
    snap: SearchSnapshot,
    lends: npt.NDArray[np.bool_],
    base: npt.NDArray[np.float64],
    reach: int,
) -> npt.NDArray[np.intp] | None:
    """Per lender, the largest id rank of a linker it may lend to; ``None``: every one.

    :data:`~memstore.limits.SPREAD_REACH` over arrays, stopping
    where :meth:`~memstore.store.Store.neighbours` stops for the general path:
    lenders in score order (ties by id) read all their linkers (any relation,
    any state) while the count stays within ``reach``, the first to pass it
    its first ones by id up to ``reach``, those after it none.
    """
    if not reach:
        return None
    start, ranks = snap.linkers()
    lenders = np.flatnonzero(lends)
    counts = start[lenders + 1] - start[lenders]
    if int(counts.sum()) <= reach:
        return None
    order = np.lexsort((snap.id_rank[lenders], -base[lenders]))
    lenders, read = lenders[order], np.cumsum(counts[order])
    at = int(np.searchsorted(read, reach, side="right"))  # the first lender past the bound
    left = reach - (int(read[at - 1]) if at else 0)
    cap = np.full(len(snap), len(snap), np.intp)  # above every rank: all its linkers
    cut = lenders[at]
    cap[cut] = ranks[start[cut] + left - 1] if left else -1
    cap[lenders[at + 1 :]] = -1
    return cap


def _hit_columns(
    hits: Sequence[LexicalHit],
) -> tuple[npt.NDArray[np.float64], Sequence[str], bool]:
    """Lexical hits' scores and ids as columns, and whether they are the index's own
    (:class:`~memstore._lexindex.LexicalHits`: read as they are, best first) rather than
    built here from the hits one by one."""
    if isinstance(hits, LexicalHits) and len(hits.ids) == len(hits):
        return hits.scores, hits.ids, True
    return np.fromiter(map(_SCORE, hits), np.float64, len(hits)), list(map(_ID, hits)), False


def slots_of(
    ids: Sequence[str], slot: dict[str, int], size: int
) -> tuple[npt.NDArray[np.intp], bool]:
    """Each of ``ids``' slot in ``slot`` below ``size`` (-1: not held), and whether all are held.

    ``slot`` is a snapshot's ``id -> slot`` dictionary, which may also hold a
    later snapshot's ids (at ``size`` or past): those are not held. A
    channel's couple of hundred hits per search pass here: the compiled
    ``slots_of`` (:mod:`memstore._speedups`) writes the array in one C loop,
    where :func:`_slots_of` (its oracle) builds a tuple of Python ints first.

    >>> slots, every = slots_of(["b", "z", "a"], {"a": 0, "b": 1, "c": 2}, 2)
    >>> slots.tolist(), every
    ([1, -1, 0], False)
    """
    native = _wordbatch.speedups
    if native is not None and _WIDE:
        raw, every = native.slots_of(ids, slot, size)
        return np.frombuffer(raw, np.intp), every
    return _slots_of(ids, slot, size)


def _slots_of(
    ids: Sequence[str], slot: dict[str, int], size: int
) -> tuple[npt.NDArray[np.intp], bool]:
    """:func:`slots_of` in Python and numpy: the oracle of the compiled loop."""
    n = len(ids)
    if n > 1 and len(slot) == size:  # every id held, the common case: one pass in C
        try:
            return np.fromiter(itemgetter(*ids)(slot), np.intp, n), True
        except KeyError:
            pass
    out = np.fromiter(map(slot.get, ids, repeat(-1, n)), np.intp, n)
    if len(slot) != size:  # ``slot`` also holds a later snapshot's ids: not this one's
        out[out >= size] = -1
    return out, n == 0 or bool(out.min() >= 0)


def _best(
    slots: npt.NDArray[np.intp],
    scores: npt.NDArray[np.float64],
    id_rank: npt.NDArray[np.intp],
    need: int,
) -> list[int]:
    """The best ``need`` of ``slots`` by ``scores`` descending, ties by ``id_rank``."""
    if slots.size > 2 * need > 0:
        # Only a candidate scoring at least the need-th best score can place: sort those.
        floor = np.partition(scores, slots.size - need)[slots.size - need]
        keep = scores >= floor
        slots, scores = slots[keep], scores[keep]
    order = np.lexsort((id_rank[slots], -scores))[:need]
    out: list[int] = slots[order].tolist()
    return out


def top_slots(
    base: npt.NDArray[np.float64],
    scored: npt.NDArray[np.bool_],
    readable: npt.NDArray[np.bool_],
    loan_to: npt.NDArray[np.intp],
    loan_add: npt.NDArray[np.float64],
    id_rank: npt.NDArray[np.intp],
    need: int,
) -> tuple[list[int], list[float]]:
    """The best ``need`` readable candidates (scored or lent to) and their fused scores.

    A slot's fused score is ``base`` plus its loan (``loan_to``/``loan_add``);
    the order is by score descending, ties by ``id_rank``. The compiled
    ``lean_top`` (:mod:`memstore._speedups`) scans the masks and sorts the few
    hundred candidates in one call, where :func:`_top_slots` (its oracle) makes
    a dozen array passes over the whole snapshot; a NaN score leaves it to the oracle.

    >>> top_slots(np.array([0.5, 0.0, 0.9, 0.5]), np.array([True, False, True, True]),
    ...           np.array([True, True, True, True]), np.array([1]), np.array([0.7]),
    ...           np.array([3, 2, 1, 0]), 3)
    ([2, 1, 3], [0.9, 0.7, 0.5])
    """
    native = _wordbatch.speedups
    if native is not None and _WIDE and need > 0:
        got: tuple[list[int], list[float]] | None = native.lean_top(
            base, scored, readable, loan_to, loan_add, id_rank, need
        )
        if got is not None:
            return got
    return _top_slots(base, scored, readable, loan_to, loan_add, id_rank, need)


def _top_slots(
    base: npt.NDArray[np.float64],
    scored: npt.NDArray[np.bool_],
    readable: npt.NDArray[np.bool_],
    loan_to: npt.NDArray[np.intp],
    loan_add: npt.NDArray[np.float64],
    id_rank: npt.NDArray[np.intp],
    need: int,
) -> tuple[list[int], list[float]]:
    """:func:`top_slots` in numpy: the oracle of the compiled pass."""
    final = base.copy()
    final[loan_to] += loan_add
    cand = scored.copy()
    cand[loan_to] = True
    cand &= readable
    slots = np.flatnonzero(cand)
    out = _best(slots, final[slots], id_rank, need)
    scores: list[float] = final[out].tolist()
    return out, scores


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
        self._short_prior = searcher.config.info_prior == INFO_PRIOR_FUSED
        self._length_prior = searcher.config.info_prior == INFO_PRIOR_LENGTH
        self._length_weight = searcher.config.length_weight
        n = len(snap)
        self._base = np.zeros(n, np.float64)
        self._scored = np.zeros(n, np.bool_)
        self._loan_to = np.zeros(0, np.intp)
        self._loan_add = np.zeros(0, np.float64)
        self._final: npt.NDArray[np.float64] | None = self._base
        """The fused scores (base, loans, bonus) :meth:`ordered` left (``None``: unmade)."""
        self._top: tuple[list[int], list[float]] | None = None
        """The compiled pass's last answer: its slots and their fused scores."""
        self._signals: QuerySignals | None = None
        self._lexical_raw: npt.NDArray[np.float64] | None = None
        """Each slot's raw lexical score where :attr:`_lexical_found` (else unset memory)."""
        self._lexical_found: npt.NDArray[np.bool_] | None = None
        """Whether the lexical channel found each slot."""
        self._semantic = False
        self._read_s = 0.0
        self._read_slots: tuple[list[SearchResult], list[int]] | None = None
        """The last :meth:`results` list and its slots (for :meth:`lexical_scores`)."""
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

    def _slots(self, ids: Sequence[str]) -> tuple[npt.NDArray[np.intp], bool]:
        """Each id's slot, -1 for an id the store does not hold (never readable), and
        whether it holds them all (then no slot needs masking): :func:`slots_of`."""
        return slots_of(ids, self._snap.slot, len(self._snap))

    def _held(self, slots: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.intp], bool]:
        """:meth:`_slots` of values already looked up in :attr:`slot` (-1: not held)."""
        size = len(self._snap)
        if slots.size == 0:
            return slots, True
        if int(slots.max()) >= size:  # a later snapshot's ids: not this one's
            slots = np.where(slots >= size, -1, slots)
        return slots, bool(slots.min() >= 0)

    def observe_hydrate(self) -> None:
        """The ``hydrate`` phase, as the general path reports it (semantic searches only)."""
        if self._semantic:
            self._searcher.stats.observe("search.phase.hydrate", self._read_s)

    def _hit_slots(
        self, hits: Sequence[LexicalHit]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.intp], bool, bool]:
        """Lexical hits' scores and slots (:meth:`_slots`), and whether the scores are the
        index's own ranking (best first: :func:`_hit_columns`). Hits handed over as columns
        (:class:`~memstore._lexhits.LexicalColumns`) are placed by their lexicon slots, no id read
        for a hit the index's :class:`~memstore._lexhits.SlotMap` has placed before."""
        if isinstance(hits, LexicalColumns):
            slots, every = hits.snapshot_slots(self._snap.slot, len(self._snap))
            return hits.scores, slots, every, True
        raw, ids, ranked = _hit_columns(hits)
        slots, every = self._slots(ids)
        return raw, slots, every, ranked

    def add_lexical(self, hits: Sequence[LexicalHit], items: Sequence[Item | None] | None) -> None:
        """The lexical channel's hits, best first (``items`` is ``None``: none is read here)."""
        del items
        raw, slots, every, ranked = self._hit_slots(hits)
        if self._by_score:
            vals = self._lexical_weight * _minmax(raw, ranked)
        else:
            vals = 1.0 / (RRF_K + np.array(tie_ranks(raw.tolist()), np.intp) + 1)
        if not every:
            known = slots >= 0
            slots, vals, raw = slots[known], vals[known], raw[known]
        self._base[slots] = vals
        self._scored[slots] = True
        # Not filled: only the slots marked found are ever read (a fill of the whole
        # snapshot's floats cost more than the rest of this step).
        lexical_raw = np.empty(len(self._snap), np.float64)
        lexical_raw[slots] = raw
        found = np.zeros(len(self._snap), np.bool_)
        found[slots] = True
        self._lexical_raw, self._lexical_found = lexical_raw, found

    def add_feedback(self, hits: Sequence[LexicalHit], weight: float) -> None:
        """A second lexical round's hits, fused in at ``weight`` x the first's share
        (:meth:`memstore.search._fusion.Fusion.add_feedback`, the same arithmetic)."""
        raw, slots, every, _ = self._hit_slots(hits)
        self._add_slots(slots, every, raw, weight * self._lexical_weight, weight)

    def add_channel(
        self,
        ids: Sequence[str],
        scores: npt.NDArray[np.float64],
        share: float,
        rank_weight: float,
        channel: str,
    ) -> None:
        """Another ranking, best first (``scores`` never increase), added to what each
        candidate holds (:meth:`memstore.search._fusion.Fusion.add_channel`, the same
        arithmetic)."""
        del channel  # only an explanation names it, and this path explains nothing
        self._add_slots(*self._slots(ids), scores, share, rank_weight)

    def _add_slots(
        self,
        slots: npt.NDArray[np.intp],
        every: bool,
        scores: npt.NDArray[np.float64],
        share: float,
        rank_weight: float,
    ) -> None:
        """:meth:`add_channel` of the hits' slots (:meth:`_slots`)."""
        if self._by_score:
            vals = share * _minmax(scores, True)
        else:
            vals = rank_weight / (RRF_K + np.array(tie_ranks(scores.tolist()), np.intp) + 1)
        if not every:
            known = slots >= 0
            slots, vals = slots[known], vals[known]
        self._base[slots] += vals
        self._scored[slots] = True

    def words(self, ids: Sequence[str]) -> npt.NDArray[np.int64]:
        """Each id's word count, from the snapshot's column (0 for an id it does not hold)."""
        slots, every = self._slots(ids)
        if every:
            out: npt.NDArray[np.int64] = self._snap.words[slots]
            return out
        return np.where(slots >= 0, self._snap.words[np.maximum(slots, 0)], 0)

    def ids(self, ordered: Sequence[int]) -> list[str]:
        """The ids of the slots :meth:`ordered` returned."""
        names = self._snap.ids
        return [names[s] for s in ordered]

    def lexical_scores(self, results: Sequence[SearchResult]) -> dict[str, float]:
        """The lexical channel's raw score of each of ``results`` it found (for relevance)."""
        if self._lexical_raw is None or self._lexical_found is None or not results:
            return {}
        ids = [r.item.id for r in results]
        last = self._read_slots
        if last is not None and last[0] is results and len(last[1]) == len(results):
            slots, every = np.array(last[1], np.intp), True  # :meth:`_read` knew them
        else:
            slots, every = self._slots(ids)
        found = self._lexical_found[slots]
        if not every:
            found &= slots >= 0
        raw: list[float] = np.where(found, self._lexical_raw[slots], np.nan).tolist()
        return {id: v for id, v in zip(ids, raw, strict=True) if v == v}  # NaN: not found

    def lexical_column(self) -> npt.NDArray[np.float64] | None:
        """Each slot's raw lexical score, NaN where the channel did not find it (``None``:
        no lexical channel yet); made on request, for checks: a search reads ten of them."""
        if self._lexical_raw is None or self._lexical_found is None:
            return None
        return np.where(self._lexical_found, self._lexical_raw, np.nan)

    @property
    def slot(self) -> dict[str, int]:
        """The snapshot's ``id -> slot`` dictionary, for an index that hands over slots
        (:class:`~memstore.search._slothits.SlotHits`): read, never changed."""
        return self._snap.slot

    def add_semantic(self, hits: Sequence[tuple[Any, float]], channel: str) -> None:
        """The vector index's hits, best first: ``(entry, similarity)``, or as
        :class:`~memstore.search._slothits.SlotHits` over :attr:`slot` (no pair read)."""
        del channel  # named in explanations only, which this path does not build
        t0 = time.perf_counter()
        self._semantic = True
        if isinstance(hits, SlotHits):
            slots, every = self._held(hits.slots)
            sims = hits.sims
        else:
            slots, every = self._slots(list(map(_ID, map(_HIT, hits))))
            sims = np.fromiter(map(_SIM, hits), np.float64, len(hits))
        if self._by_score:
            adds = (1.0 - self._lexical_weight) * _minmax(sims)
            if not every:
                known = slots >= 0
                slots, adds = slots[known], adds[known]
        else:
            if not every:
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
        the lender, for explanations; this path needs the amount alone). The
        graph's edges are grouped by target once per snapshot
        (:class:`_Inbound`), so a query is a handful of array operations over
        them: every edge's loan (``-inf`` where either end may not take part,
        or the lender is past :data:`~memstore.limits.SPREAD_REACH` linkers:
        :func:`_linker_cap`), then the largest per target.
        """
        self._loan_to = np.zeros(0, np.intp)
        self._loan_add = np.zeros(0, np.float64)
        base = self._base
        if not relations or not self._scored.any():
            return
        inbound = _inbound(self._snap, relations)
        if inbound.starts.size == 0:
            return
        lends = self._scored & self._alive & (base > 0.0)
        ok = lends[inbound.src] & self._alive[inbound.other]
        cap = _linker_cap(self._snap, lends, base, limits.SPREAD_REACH)
        if cap is not None:
            ok &= inbound.own | (self._snap.id_rank[inbound.other] <= cap[inbound.src])
        add = np.where(ok, inbound.decay_weight * base[inbound.src], -np.inf)
        best = np.maximum.reduceat(add, inbound.starts)
        got = best > -np.inf
        self._loan_to, self._loan_add = inbound.targets[got], best[got]

    def signal(self, signals: QuerySignals | None) -> None:
        """The query's signals, added to every readable candidate's score by :meth:`ordered`."""
        self._signals = signals

    def ordered(self, need: int) -> list[int]:
        """The best ``need`` readable candidates' slots, best first (ties by id)."""
        t0 = time.perf_counter()
        short = self._short_prior and self._semantic
        lengthy = self._length_prior and self._semantic
        if self._signals is None and not short and not lengthy:
            # The common case, no score changed after the loans: one compiled pass.
            snap = self._snap
            top = top_slots(
                self._base,
                self._scored,
                self._readable,
                self._loan_to,
                self._loan_add,
                snap.id_rank,
                need,
            )
            self._final, self._top = None, top
            self._read_s += time.perf_counter() - t0
            return top[0]
        final = self._base.copy()
        final[self._loan_to] += self._loan_add
        self._final, self._top = final, None
        cand = self._scored.copy()
        cand[self._loan_to] = True
        cand &= self._readable
        slots = np.flatnonzero(cand)
        credit = None
        if lengthy:
            credit = length_credit(self._snap.words[slots], self._length_weight)
        if self._signals is not None:
            near = self._may_place(slots, need, SHORT_FACTOR if short else 1.0, credit)
            final[near] += slot_bonus(self._signals, self._snap, near)
        if short:  # the information prior, after the bonus: (score + bonus) x factor
            few = slots[self._snap.words[slots] <= SHORT_WORDS]
            final[few] *= SHORT_FACTOR
        elif credit is not None:  # the length prior, after the bonus: score + bonus + credit
            final[slots] += credit
        out = _best(slots, final[slots], self._snap.id_rank, need)
        self._read_s += time.perf_counter() - t0
        return out

    def _fused(self, ordered: list[int]) -> list[float]:
        """The fused scores of ``ordered`` (slots :meth:`ordered` gave): those it kept with
        them when they are its last list, else read from the final scores (made now when
        the compiled pass left them unmade: the base scores plus the loans)."""
        top = self._top
        if top is not None and top[0] is ordered:
            return top[1]
        final = self._final
        if final is None:
            final = self._base.copy()
            final[self._loan_to] += self._loan_add
            self._final = final
        out: list[float] = final[ordered].tolist()
        return out

    def _may_place(
        self,
        slots: npt.NDArray[np.intp],
        need: int,
        factor: float,
        credit: npt.NDArray[np.float64] | None = None,
    ) -> npt.NDArray[np.intp]:
        """The candidates among ``slots`` that the signals' bonus could lift into the best ``need``.

        A bonus only adds, at most :func:`~memstore.search._signals.max_bonus`, so
        the ``need``-th best score can only rise: a candidate more than that bonus
        below it cannot place, and reading its facts (a pattern over its text, for
        a "when" question) would only be thrown away. A query of common words
        has thousands of candidates for a pool of a few dozen. The margin keeps
        the cut safely below the bound through the float additions.

        ``factor``: the smallest multiplier the information prior applies after
        the bonus (1.0: none). Scores are not negative, so the ``need``-th best
        after it is at least ``factor`` x the one before: the floor is lowered so.
        ``credit``: the length prior's addition per slot (at least 0, added after
        the bonus; ``None``: none): the bound is then on score plus credit.
        """
        assert self._signals is not None
        if not 0 < need < slots.size:
            return slots
        assert self._final is not None  # :meth:`ordered`'s numpy path set it
        scores = self._final[slots]
        if credit is not None:
            scores = scores + credit
        kth = factor * float(np.partition(scores, slots.size - need)[slots.size - need])
        reach = max_bonus(self._signals)
        floor = kth - reach - 1e-9 * (abs(kth) + reach + 1.0)
        near: npt.NDArray[np.intp] = slots[scores >= floor]
        return near

    # ------------------------------------------------------------ results

    def results(
        self, ordered: list[int], query: str, limit: int, *, full: bool, shaped: bool
    ) -> list[SearchResult]:
        """The fused order shaped (or not) into at most ``limit`` results; reads only those."""
        snap = self._snap
        fused = self._fused(ordered) if ordered else []
        if full:
            exact = query.strip()
            hit = snap.slot_of(exact) if exact else -1
            if hit >= 0 and self._readable[hit]:
                pairs = [(s, f) for s, f in zip(ordered, fused, strict=True) if s != hit]
                ordered = [hit, *(s for s, _ in pairs)]
                fused = [EXACT_ID_MATCH_SCORE, *(f for _, f in pairs)]
        if not shaped:
            return self._read(ordered[:limit], fused[:limit], [0] * min(limit, len(ordered)))
        # The rerank's multipliers, per candidate in plain Python (the pool is a couple
        # of dozen: numpy calls cost more than they save on it), each slot fact gathered
        # in one call: x 1.0 where one does not apply changes no float, so each score is
        # the general path's base x watch x recent, in that order.
        at = np.array(ordered, np.intp)
        kinds_at: list[int] = snap.kind[at].tolist()
        kc = snap.kind_code
        knowledge = {kc[k] for k in CONSOLIDATION_KINDS if k in kc}
        plain = knowledge.isdisjoint(kinds_at)  # no knowledge cell: no watch item, no collapse
        dated = snap.has_update[at]
        base = _base_scores(len(at))
        scores: list[float]
        if plain and not dated.any():  # no multiplier applies: the base scores as they are
            scores = list(base)
        else:
            updated: list[int] = snap.updated_us[at].tolist()
            watch = kc.get(KIND_WATCH_ITEM, -1)  # readable: active
            since = self._now_us - _RECENT_US
            scores = [
                b
                * (WATCH_BOOST if k == watch else 1.0)
                * (RECENT_BOOST if d and u >= since else 1.0)
                for b, k, d, u in zip(base, kinds_at, dated.tolist(), updated, strict=True)
            ]
        if full:  # only an exact id hit scores that high (fused scores are a few weights)
            scores = [
                EXACT_ID_MATCH_SCORE if f >= EXACT_ID_MATCH_SCORE else x
                for x, f in zip(scores, fused, strict=True)
            ]
        top = max(limit, 0)
        if plain and all(map(gt, scores, islice(scores, 1, None))):
            # Strictly decreasing: the order by (-score, id rank) is the order given, and
            # nothing collapses. The common case: no sort, no per-candidate lists.
            return self._read(ordered[:top], scores[:top], [0] * min(top, len(scores)))
        ranks: list[int] = snap.id_rank[at].tolist()
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], ranks[i]))
        # The near-duplicate collapse: knowledge cells against earlier survivors of their kind.
        counts: dict[int, int] = {}
        if plain:
            survivors = order  # no knowledge cell among them: nothing collapses
        else:
            items = snap.items
            survivors = []
            collapse = Collapse()
            kept: list[int] = []  # each knowledge survivor's position in ``order``
            for i in order:
                it = items[ordered[i]]
                if it.kind in CONSOLIDATION_KINDS:
                    into = collapse.into(it)
                    if into is not None:
                        j = kept[into]
                        counts[j] = counts.get(j, 0) + 1 + counts.get(i, 0)
                        continue
                    kept.append(i)
                survivors.append(i)
        picked = survivors[:top]
        return self._read(
            [ordered[i] for i in picked],
            [scores[i] for i in picked],
            [counts.get(i, 0) for i in picked],
        )

    def _read(
        self, slots: list[int], scores: list[float], collapsed: list[int]
    ) -> list[SearchResult]:
        names = self._snap.ids
        ids = [names[s] for s in slots]
        store = self._searcher.store()
        got = (store._search_borrow if _BORROW.get() else store.search_read)(ids)
        if len(got) != len(ids):  # some were deleted since the snapshot: match by id
            by_id = {it.id: it for it in got}
            keep = [i for i, id in enumerate(ids) if id in by_id]
            got = [by_id[ids[i]] for i in keep]
            slots = [slots[i] for i in keep]
            scores = [scores[i] for i in keep]
            collapsed = [collapsed[i] for i in keep]
        # Otherwise the reads are ``ids``' items in order (a read hook, which might
        # replace them, keeps a search off this path).
        out = list(map(SearchResult, got, scores, collapsed))
        self._read_slots = (out, slots)
        return out
