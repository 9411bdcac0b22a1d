"""Test oracle: the Searcher exactly as it was before the lean hybrid path (do not edit).

A frozen copy of ``memstore/search.py`` at the commit before the search core
was rebuilt, so a differential test can assert that today's
:class:`memstore.search.Searcher` returns the same ids, in the same order,
with the same scores, on any store. Only this docstring and the doctest
marker changed; its behaviour is the reference.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from memstore._lexindex import LexicalHit
from memstore.consolidate import (
    CONSOLIDATION_KINDS,
    ConsolidationReport,
    consolidate,
)
from memstore.graph import DEFAULT_CONTEXT_DECAY
from memstore.item import (
    EXACT_ID_MATCH_SCORE,
    KIND_WATCH_ITEM,
    SCOPE_PRIVATE,
    STATUS_ACTIVE,
    Item,
)
from memstore.lexical import is_confident
from memstore.neardup import (
    near_duplicate_memory,
)
from memstore.rerank import rerank_base_score
from memstore.stats import (
    FUSED_PATH,
    LEXICAL_PATH,
    STAT_EXHAUSTIVE_FALLBACKS,
    STAT_KEYWORD_HITS,
    STAT_KW_TRIGRAM_HITS,
    STAT_KW_VOICE_HITS,
    STAT_KW_VOICE_MISSES,
    STAT_SEMANTIC_CALLS,
    STAT_SEMANTIC_FALLBACKS,
    STAT_TOTAL,
    SearchStats,
    StatsSink,
)
from memstore.store import Store
from memstore.tags import PARTITION_ALL, SHARED_TAG, partition_from_tags

__all__ = [
    "ANCHOR_BOOST",
    "FUSION_POOL",
    "FUSION_RRF",
    "FUSION_SCORE",
    "LEXICAL_WEIGHT",
    "RECENT_BOOST",
    "RECENT_WINDOW",
    "RRF_K",
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

RRF_K = 60
"""Reciprocal Rank Fusion constant: a hit at rank r adds 1/(RRF_K + r)."""
STATE_OPEN_BOOST = 1.3
"""Multiplier for an item the host knows is still open."""
STATE_RESOLVED_PENALTY = 0.7
"""Multiplier for an item the host knows is resolved."""
ANCHOR_BOOST = 1.7
"""Multiplier for a summary the host keeps refreshed (the largest one)."""
WATCH_BOOST = 1.2
"""Multiplier for an active watch item."""
RECENT_BOOST = 1.1
"""Multiplier for an item updated within :data:`RECENT_WINDOW`."""
RECENT_WINDOW = _dt.timedelta(days=1)
"""How recent an update earns :data:`RECENT_BOOST`."""
LONG_QUERY_TOKENS = 3
"""Above this many query tokens the lexical fast path needs every token covered."""
FUSION_DEPTH = 1
POOL_LIMIT = 10
"""Times the limit each channel contributes to a rank fusion (``fusion="rrf"``)."""
FUSION_SCORE = "score"
"""Fuse the channels on their normalised scores (the default)."""
FUSION_RRF = "rrf"
"""Fuse the channels on their ranks, by Reciprocal Rank Fusion."""
FUSION_POOL = 200
"""Hits each channel contributes to a score fusion (at least; more when the limit asks).

The pool is the channel's sample of its own score distribution: its best hit
normalises to 1 and its weakest to 0, so the pool must reach well past the
results asked for, down to scores that mean "not relevant". A shallow pool
stretches the differences among a few good hits into the whole [0, 1] range.
"""
LEXICAL_WEIGHT = 0.5
"""Share of the lexical channel in a score fusion (the semantic one has the rest).

Equal shares: neither channel is trusted over the other a priori.
"""
DEFAULT_FANOUT = 3
"""Times the limit each channel pulls while source replacement runs."""
SPREAD_DECAY = DEFAULT_CONTEXT_DECAY
"""What one hop keeps of a score spread along a link (times the link's weight).

The store's own spreading activation (:meth:`~memstore.store.Store.context`)
decays by the same factor per hop: a search spreads like a traversal does.
"""

_log = logging.getLogger("memstore")


class _Entry(Protocol):
    """What the searcher reads of a vector index entry."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def tags(self) -> tuple[str, ...]: ...


class VectorIndex(Protocol):
    """The vector index a searcher needs (``memstore_index.CellStore`` is one)."""

    def embed_query(self, query: str) -> npt.NDArray[np.float32]: ...

    def search_vector(
        self,
        vec: npt.ArrayLike,
        k: int,
        *,
        visible: Callable[[Any], bool] | None = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
        exact: bool = False,
    ) -> list[tuple[Any, float]]: ...


def default_visible(item: Item, partition: str) -> bool:
    """The default partition rule: the caller's partition, untagged items, ``shared`` ones.

    :data:`~memstore.tags.PARTITION_ALL` sees every shared item; a private
    item is never visible to a search (no caller identity).
    """
    if item.scope == SCOPE_PRIVATE:
        return False
    if partition == PARTITION_ALL:
        return True
    own = partition_from_tags(item.tags)
    return own in ("", partition) or SHARED_TAG in item.tags


def _default_doc_visible(entry: _Entry, partition: str) -> bool:
    if entry.scope == SCOPE_PRIVATE:
        return False
    if partition == PARTITION_ALL:
        return True
    return entry.partition in ("", partition) or SHARED_TAG in entry.tags


@dataclass
class Explanation:
    """Why a result ranked where it did (``hybrid_search(..., explain=True)``)."""

    channels: list[str] = field(default_factory=list)
    """How it was found: ``lexical``, ``semantic``, ``exhaustive``, ``spread``, ``live``,
    ``exact_id``, ``link``, ``source``."""
    lexical_rank: int | None = None
    lexical_score: float | None = None
    semantic_rank: int | None = None
    similarity: float | None = None
    lexical_norm: float | None = None
    """The lexical score normalised over the lexical pool (score fusion only)."""
    semantic_norm: float | None = None
    """The similarity normalised over the semantic pool (score fusion only)."""
    spread_from: str | None = None
    """The candidate whose link lent this result part of its score (``spread_relations``)."""
    spread_score: float | None = None
    """What that link added to the fused score."""
    fused_score: float | None = None
    base_score: float | None = None
    multipliers: dict[str, float] = field(default_factory=dict)
    collapsed: list[str] = field(default_factory=list)


@dataclass
class SearchResult:
    """One ranked hit.

    ``score`` is the rerank score (base rank score times multipliers) and
    orders results within one call only. ``collapsed_count`` is positive on
    the survivor of a near-duplicate collapse. ``via`` is the id of the direct
    hit whose link surfaced this result (expanded results score 0).
    """

    item: Item
    score: float = 0.0
    collapsed_count: int = 0
    via: str = ""
    explanation: Explanation | None = None


@dataclass
class SearchConfig:
    """What the Searcher asks of its host. ``store`` is required; every other field is optional."""

    store: Store
    cells: Callable[[], VectorIndex | None] | None = None
    """The vector index, read on every call (the host may set it late); ``None``: lexical only."""
    visible: Callable[[Item, str], bool] | None = None
    """Whether a partition may see an item; default :func:`default_visible`."""
    doc_visible: Callable[[Any, str], bool] | None = None
    """The same for an index entry before it is hydrated."""
    hydrate: Callable[[str], Item | None] | None = None
    """Reads an item the store does not hold (kinds kept out of the working set)."""
    live: Callable[[str, str, str, set[str]], list[SearchResult]] | None = None
    """Matches from host state outside the store, for a full search."""
    state: Callable[[Item], tuple[bool, bool]] | None = None
    """``(open, known)`` for kinds with a lifecycle outside the store."""
    anchor: Callable[[Item], bool] | None = None
    """An item the host keeps refreshed as a summary."""
    collapse_key: Callable[[Item], str] | None = None
    """The near-duplicate identity of an item, ``""`` when not eligible."""
    link_expansion: Callable[[], bool] | None = None
    """Turns on one-hop link expansion of results (read on every call)."""
    dirty: Callable[[], None] | None = None
    """Fires after every search, for a stats flush."""
    resolve_strict: Callable[[str], str | None] | None = None
    """Maps a partition name to its canonical name, ``None`` when unknown (consolidate)."""
    stats: StatsSink | None = None
    """Where the counters also go."""
    semantic_gap: float = 0.0
    """Drop semantic matches more than this below the best visible one (0: off)."""
    semantic_cliff: bool = False
    """Keep only the semantic matches above the steepest drop in similarity."""
    always_fuse: bool = False
    """Fuse the semantic channel even when the lexical answer looks confident."""
    no_shaping: bool = False
    """Skip rerank and collapse: results in fused order."""
    source_relation: str = ""
    """Replace a hit that links by this relation with the item it links to."""
    fanout: int = 0
    """Times the limit each channel pulls while source replacement runs (0: 3)."""
    subject_routing: bool = False
    """Send the semantic channel through the subject's own entries, merged with the global."""
    fusion: str = FUSION_SCORE
    """:data:`FUSION_SCORE` (fuse normalised scores, the default) or :data:`FUSION_RRF`."""
    lexical_weight: float = LEXICAL_WEIGHT
    """The lexical channel's share of a score fusion, in [0, 1]."""
    spread_relations: tuple[str, ...] = ()
    """Link relations along which a candidate lends part of its fused score to its neighbours.

    One hop, both ways: an item linked to a candidate by one of these gains
    :data:`SPREAD_DECAY` x the link's weight x the best such candidate's
    score (before spreading), on top of its own. For items that are context
    for each other: consecutive turns of a conversation, steps of one
    procedure. Empty (the default): no spreading.
    """


@dataclass
class _Cand:
    item: Item
    fused: float = 0.0
    explanation: Explanation | None = None
    via: str = ""


class _Fusion:
    """One search's candidates: what each channel contributes, then the fused order.

    A rank fusion (RRF) reads each semantic hit's item as it arrives, because
    a hit the caller cannot read takes no rank. A score fusion keeps ids and
    scores only, and reads items in fused order, as many as the results can
    use: a pool of hundreds costs a handful of reads.
    """

    def __init__(
        self, searcher: Searcher, kind: str, partition: str, explain: bool, by_score: bool
    ) -> None:
        self._searcher = searcher
        self._kind = kind
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
            item = self._searcher._hydrate(id, self._kind, self._partition)
            if item is None:
                self._unreadable.add(id)
            else:
                self._items[id] = item
        return item

    def add_lexical(self, hits: Sequence[tuple[LexicalHit, Item | None]]) -> None:
        """The lexical channel's hits, best first (an item when it was read already)."""
        norms = _minmax([h.score for h, _ in hits]) if self._by_score else []
        weight = self._lexical_weight
        # Items with equal lexical scores share the best rank of their tie
        # ("1224" ranking): the order within a tie is only recency, so it must
        # not weigh in a rank fusion; the semantic channel breaks the tie
        # instead. A score fusion gives a tie one normalised score anyway.
        rank = 0
        for i, (h, item) in enumerate(hits):
            if i and h.score < hits[i - 1][0].score:
                rank = i
            if item is not None:
                self._items[h.id] = item
            self._scores[h.id] = weight * norms[i] if self._by_score else 1.0 / (RRF_K + rank + 1)
            if self._explain:  # the shared rank of a tie: the one a rank fusion uses
                exp = Explanation(["lexical"], lexical_rank=rank, lexical_score=h.score)
                if self._by_score:
                    exp.lexical_norm = norms[i]
                self._explanations[h.id] = exp

    def add_semantic(self, hits: Sequence[tuple[Any, float]], channel: str) -> None:
        """The vector index's hits, best first: ``(entry, similarity)``."""
        t0 = time.perf_counter()
        self._semantic = True
        if self._by_score:
            norms = _minmax([sim for _, sim in hits])
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
        neighbour is read only if it reaches the results.
        """
        self._spread = {}
        base = self._scores
        if not relations or not base:
            return
        loans: dict[str, tuple[float, str]] = {}
        for src, others in self._searcher.store().neighbours(list(base), relations).items():
            score = base[src]
            if score <= 0.0:
                continue
            for other, weight in others:
                add = SPREAD_DECAY * weight * score
                held = loans.get(other)
                if held is None or add > held[0] or (add == held[0] and src < held[1]):
                    loans[other] = (add, src)
        self._spread = loans

    def ordered(self, need: int) -> list[_Cand]:
        """The best ``need`` readable candidates, best first (ties by id)."""
        t0 = time.perf_counter()
        scores = dict(self._scores)
        for id, (add, _) in self._spread.items():
            scores[id] = scores.get(id, 0.0) + add
        out: list[_Cand] = []
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
            out.append(_Cand(item, scores[id], exp))
            if len(out) >= need:
                break
        self._read_s += time.perf_counter() - t0
        return out


class Searcher:
    """Hybrid search over a Store: lexical first, semantic fused in when needed, reranked."""

    def __init__(self, config: SearchConfig, *, stats: SearchStats | None = None) -> None:
        if not isinstance(config.store, Store):
            raise TypeError("SearchConfig.store must be a memstore.Store")
        _check_fusion(config)
        self._cfg = config
        self._stats = stats if stats is not None else SearchStats(config.stats)

    @property
    def stats(self) -> SearchStats:
        """The search statistics (shared with copies made by :meth:`with_`)."""
        return self._stats

    @property
    def config(self) -> SearchConfig:
        return self._cfg

    def store(self) -> Store:
        """The store searched."""
        return self._cfg.store

    def with_(self, mutate: Callable[[SearchConfig], None]) -> Searcher:
        """A searcher over the same store, sharing these statistics, with a changed config.

        This searcher is not modified; swap the copy in when flipping a switch.
        """
        cfg = dataclasses.replace(self._cfg)
        mutate(cfg)
        return Searcher(cfg, stats=self._stats)  # checks the changed config

    # ------------------------------------------------------------- search

    def hybrid_search(
        self,
        query: str,
        kind: str = "",
        subject: str = "",
        partition: str = "",
        limit: int = 10,
        *,
        caller: str | None = None,
        explain: bool = False,
    ) -> list[SearchResult]:
        """Lexical first; semantic fused in by RRF when the lexical answer is not confident.

        A confident lexical hit returns without an embedding call. Results are
        limited to what ``partition`` may see (items tagged for it, untagged
        ones, ``shared`` ones); :data:`~memstore.tags.PARTITION_ALL` lifts the
        filter (read-only operator surfaces only).
        """
        return self._search(query, kind, subject, partition, limit, caller, explain, full=False)

    def hybrid_search_full(
        self,
        query: str,
        kind: str = "",
        subject: str = "",
        partition: str = "",
        limit: int = 10,
        *,
        caller: str | None = None,
        explain: bool = False,
    ) -> list[SearchResult]:
        """:meth:`hybrid_search` that always consults the vector index.

        It also adds the host's live matches and puts an item whose id equals
        the query first (score :data:`~memstore.item.EXACT_ID_MATCH_SCORE`).
        """
        return self._search(query, kind, subject, partition, limit, caller, explain, full=True)

    def _visible(self, item: Item, partition: str) -> bool:
        fn = self._cfg.visible
        return fn(item, partition) if fn is not None else default_visible(item, partition)

    def _search(
        self,
        query: str,
        kind: str,
        subject: str,
        partition: str,
        limit: int,
        caller: str | None,
        explain: bool,
        *,
        full: bool,
    ) -> list[SearchResult]:
        cfg, stats = self._cfg, self._stats
        limit = limit if limit > 0 else 10
        start = time.perf_counter()
        stats.add(STAT_TOTAL)
        fanout = (cfg.fanout or DEFAULT_FANOUT) if cfg.source_relation else 1
        # What the rerank and the link steps receive: each channel's best
        # limit x fanout items (an item ranked 15th by both channels should
        # beat one ranked 8th by only one of them). Never cut for fewer than
        # POOL_LIMIT results (2026-12-03: a small limit is a prefix of a larger one).
        pool = max(limit, POOL_LIMIT) * max(fanout, FUSION_DEPTH)
        cells = cfg.cells() if cfg.cells is not None else None
        by_score = cfg.fusion == FUSION_SCORE and cells is not None
        # A score fusion normalises each channel over a deep pool of scores (see
        # FUSION_POOL); only the items that can reach the results are read.
        depth = max(pool, FUSION_POOL) if by_score else pool
        t0 = time.perf_counter()
        lexical, n_tokens = self._lexical(query, kind, subject, partition, pool, depth)
        stats.observe("search.phase.lexical", time.perf_counter() - t0)
        stats.add(STAT_KEYWORD_HITS)
        if any(h.fuzzy for h, _ in lexical):
            stats.add(STAT_KW_TRIGRAM_HITS)
        # Confident: the top hit covers the query (the store's rule), all of it
        # for a long question (which shares words with almost anything), and
        # stands alone at the top (a shared top spot is a guess).
        confident = (
            bool(lexical)
            and is_confident(lexical[0][0].covered, n_tokens)
            and (n_tokens <= LONG_QUERY_TOKENS or lexical[0][0].covered == n_tokens)
            and (len(lexical) == 1 or lexical[0][0].score > lexical[1][0].score)
        )
        fusion = _Fusion(self, kind, partition, explain, by_score)
        fusion.add_lexical(lexical)
        vec: npt.NDArray[np.float32] | None = None
        fused_path = cells is not None and (full or cfg.always_fuse or not confident)
        if fused_path:
            assert cells is not None
            stats.add(STAT_KW_VOICE_MISSES)
            stats.add(STAT_SEMANTIC_CALLS)
            try:
                vec = self._embed(cells, query)
                sem = self._semantic_hits(cells, vec, kind, subject, partition, depth, False)
                fusion.add_semantic(sem, "semantic")
            except Exception:  # the lexical answer still stands
                _log.warning("memstore: semantic search failed; lexical only", exc_info=True)
                stats.add(STAT_SEMANTIC_FALLBACKS)
        elif confident:
            stats.add(STAT_KW_VOICE_HITS)
        fusion.spread(cfg.spread_relations)
        ordered = fusion.ordered(2 * pool)
        if not ordered and cells is not None:
            try:
                # The query vector of this call's semantic pass when it ran: one
                # embedding per search, even when the exact scan has to step in.
                vec = vec if vec is not None else self._embed(cells, query)
                hits = self._semantic_hits(cells, vec, kind, subject, partition, depth, True)
                fusion.add_semantic(hits, "exhaustive")
                fusion.spread(cfg.spread_relations)
                ordered = fusion.ordered(2 * pool)
                if ordered:
                    stats.add(STAT_EXHAUSTIVE_FALLBACKS)
            except Exception:
                _log.warning("memstore: exhaustive fallback failed", exc_info=True)
        fusion.observe_hydrate()
        if full:
            ordered = self._full_extras(query, kind, partition, ordered, explain)
        t1 = time.perf_counter()
        if cfg.no_shaping:
            results = [
                SearchResult(c.item, c.fused, 0, c.via, c.explanation) for c in ordered[:limit]
            ]
        else:
            if cfg.source_relation:
                ordered = self._replace_sources(ordered, partition, explain)
            results = self._rerank(ordered, limit, explain)
        stats.observe("search.phase.rerank", time.perf_counter() - t1)
        if cfg.link_expansion is not None and cfg.link_expansion():
            results = self._expand(results, partition, limit, explain)
        elapsed = time.perf_counter() - start
        stats.observe(FUSED_PATH if fused_path else LEXICAL_PATH, elapsed)
        stats.observe(f"search.caller.{caller or 'internal'}", elapsed)
        if cfg.dirty is not None:
            cfg.dirty()
        return results

    def _doc_visible(self, partition: str, kind: str) -> Callable[[Any], bool]:
        """What an index entry must pass, checked inside the vector search.

        The engine's own rules first (no private entry, the kind filter or no
        non-searchable kind, not past its deadline), so an entry the caller
        cannot read never takes a slot of the pool nor sets the gap baseline;
        then the host's ``doc_visible`` (without one, partitions are
        restricted by the index's label sets, see ``_semantic_hits``).
        """
        host_fn = self._cfg.doc_visible
        hidden = () if kind else self._cfg.store.vocabulary().non_searchable
        now = self._cfg.store.config.clock()

        def visible(e: Any) -> bool:
            if e.scope == SCOPE_PRIVATE or (kind and e.kind != kind) or e.kind in hidden:
                return False
            deadline = getattr(e, "stale_after", None)
            if deadline is not None and now >= deadline:
                return False
            return host_fn is None or host_fn(e, partition)

        return visible

    def _hydrate(self, id: str, kind: str, partition: str) -> Item | None:
        store = self._cfg.store
        item = store.get(id)
        if item is None and self._cfg.hydrate is not None:
            item = self._cfg.hydrate(id)
        if item is None or item.status != STATUS_ACTIVE:
            return None
        if kind and item.kind != kind:
            return None
        if not kind and store.vocabulary().is_non_searchable(item.kind):
            return None
        return item if self._visible(item, partition) else None

    def _semantic_hits(
        self,
        cells: VectorIndex,
        vec: npt.NDArray[np.float32],
        kind: str,
        subject: str,
        partition: str,
        pool: int,
        exact: bool,
    ) -> list[tuple[Any, float]]:
        cfg = self._cfg
        partitions = None
        if cfg.doc_visible is None and partition != PARTITION_ALL:
            partitions = (partition, "") if partition else ("",)
        visible = self._doc_visible(partition, kind)

        t0 = time.perf_counter()
        hits = cells.search_vector(
            vec,
            pool,
            visible=visible,
            subject=subject if cfg.subject_routing and subject else None,
            partitions=partitions,
            exact=exact,
        )
        self._stats.observe("search.phase.index", time.perf_counter() - t0)
        return _cut(hits, cfg.semantic_gap, cfg.semantic_cliff)

    def _embed(self, cells: VectorIndex, query: str) -> npt.NDArray[np.float32]:
        t0 = time.perf_counter()
        vec = cells.embed_query(query)
        self._stats.observe("search.phase.embed", time.perf_counter() - t0)
        return vec

    def _lexical(
        self, query: str, kind: str, subject: str, partition: str, pool: int, depth: int
    ) -> tuple[list[tuple[LexicalHit, Item | None]], int]:
        """The lexical channel's best hits the caller may see, and the number of query tokens.

        Under the default partition rule the index filters partitions itself,
        so ``depth`` hits come back as scores alone, and their items are read
        only if they reach the results. A host ``visible`` predicate needs the
        items: the best ``4 x pool`` hits are read and filtered here (the head
        the results come from); a deeper pool adds the rest as scores alone,
        to normalise over, and each of those is checked when it is read.
        """
        cfg, store = self._cfg, self._cfg.store
        if cfg.visible is None:
            index_partition = None if partition == PARTITION_ALL else partition
            hits, n = store.keyword_ranked(query, kind, subject, depth, partition=index_partition)
            return [(h, None) for h in hits], n
        head = 4 * pool
        wide, n = store.keyword_ranked(query, kind, subject, max(head, depth))
        out: list[tuple[LexicalHit, Item | None]] = []
        for h in wide[:head]:
            item = store.get(h.id)
            if item is not None and self._visible(item, partition):
                out.append((h, item))
        out = out[:pool] if depth <= pool else out
        out.extend((h, None) for h in wide[head:depth])
        return out, n

    def _full_extras(
        self, query: str, kind: str, partition: str, ordered: list[_Cand], explain: bool
    ) -> list[_Cand]:
        cfg = self._cfg
        if cfg.live is not None:
            exclude = {c.item.id for c in ordered}
            for r in cfg.live(query, kind, partition, exclude):
                if r.item.id not in exclude:
                    ordered.append(
                        _Cand(r.item, r.score, Explanation(["live"]) if explain else None)
                    )
        exact = query.strip()
        hit = self._hydrate(exact, kind, partition) if exact else None
        if hit is not None:
            ordered = [c for c in ordered if c.item.id != hit.id]
            c = _Cand(hit, EXACT_ID_MATCH_SCORE, Explanation(["exact_id"]) if explain else None)
            ordered.insert(0, c)
        return ordered

    # -------------------------------------------------------------- shaping

    def _multipliers(self, item: Item, now: _dt.datetime) -> dict[str, float]:
        cfg = self._cfg
        out: dict[str, float] = {}
        if cfg.state is not None:
            is_open, known = cfg.state(item)
            if known:
                out["state"] = STATE_OPEN_BOOST if is_open else STATE_RESOLVED_PENALTY
        if cfg.anchor is not None and cfg.anchor(item):
            out["anchor"] = ANCHOR_BOOST
        if item.kind == KIND_WATCH_ITEM and item.status == STATUS_ACTIVE:
            out["watch"] = WATCH_BOOST
        if item.updated_at is not None and now - item.updated_at <= RECENT_WINDOW:
            out["recency"] = RECENT_BOOST
        return out

    def rerank(self, items: Sequence[Item], limit: int) -> list[SearchResult]:
        """Score items in relevance order (index 0 best), collapse near-duplicates, truncate.

        The score is :func:`~memstore.rerank.rerank_base_score` of the input rank
        times the state, anchor, watch and recency multipliers. Two collapse
        passes follow: the host's ``collapse_key``, then near-duplicate
        knowledge. Deterministic: stable sorts with an id tie-break.
        """
        return self._rerank([_Cand(it) for it in items], limit, explain=False)

    def _rerank(self, ordered: Sequence[_Cand], limit: int, explain: bool) -> list[SearchResult]:
        now = self._cfg.store.config.clock()
        scored: list[SearchResult] = []
        for rank, c in enumerate(ordered):
            if c.fused >= EXACT_ID_MATCH_SCORE:
                scored.append(SearchResult(c.item, EXACT_ID_MATCH_SCORE, 0, c.via, c.explanation))
                continue
            base = rerank_base_score(rank)
            mult = self._multipliers(c.item, now)
            score = base
            for m in mult.values():
                score *= m
            if c.explanation is not None:
                c.explanation.fused_score = c.fused
                c.explanation.base_score = base
                c.explanation.multipliers = mult
            scored.append(SearchResult(c.item, score, 0, c.via, c.explanation))
        scored.sort(key=lambda r: (-r.score, r.item.id))
        return self._collapse(scored)[: max(limit, 0)]

    def _collapse(self, results: list[SearchResult]) -> list[SearchResult]:
        key_fn = self._cfg.collapse_key
        if key_fn is not None:
            kept: list[SearchResult] = []
            by_key: dict[str, SearchResult] = {}
            for r in results:
                key = key_fn(r.item)
                if key and key in by_key:
                    _absorb(by_key[key], r)
                    continue
                if key:
                    by_key[key] = r
                kept.append(r)
            results = kept
        survivors: list[SearchResult] = []
        for r in results:
            if r.item.kind in CONSOLIDATION_KINDS:
                for s in survivors:
                    if s.item.kind == r.item.kind and near_duplicate_memory(s.item, r.item)[1]:
                        _absorb(s, r)
                        break
                else:
                    survivors.append(r)
            else:
                survivors.append(r)
        return survivors

    def _replace_sources(self, ordered: list[_Cand], partition: str, explain: bool) -> list[_Cand]:
        relation = self._cfg.source_relation
        out: list[_Cand] = []
        claimed: set[str] = set()
        for c in ordered:
            source_id = next((lk.to_id for lk in c.item.links if lk.relation == relation), "")
            source = self._hydrate(source_id, "", partition) if source_id else None
            if source is None:
                if c.item.id not in claimed:
                    claimed.add(c.item.id)
                    out.append(c)
                continue
            if source.id in claimed:
                continue  # a better-ranked hit already brought this source
            claimed.add(source.id)
            exp = None
            if explain:
                exp = Explanation(["source"])
                if c.explanation is not None:
                    exp = dataclasses.replace(
                        c.explanation, channels=[*c.explanation.channels, "source"]
                    )
            out.append(_Cand(source, c.fused, exp, via=c.item.id))
        return out

    def _expand(
        self, results: list[SearchResult], partition: str, limit: int, explain: bool
    ) -> list[SearchResult]:
        seen = {r.item.id for r in results}
        extra: list[SearchResult] = []
        for r in results:
            for link in r.item.links:
                if len(extra) >= limit:
                    break
                if link.to_id in seen:
                    continue
                target = self._hydrate(link.to_id, "", partition)
                if target is None:
                    continue
                seen.add(target.id)
                exp = Explanation(["link"]) if explain else None
                extra.append(SearchResult(target, 0.0, 0, r.item.id, exp))
        return results + extra

    # --------------------------------------------------------- consolidate

    def consolidate(self, partition: str, apply: bool = False) -> ConsolidationReport:
        """Group a partition's knowledge cells into near-duplicate clusters; optionally retire.

        See :func:`memstore.consolidate.consolidate`: the keeper of each cluster
        is the most trusted cell; ``apply`` supersedes the others; an empty,
        ``*`` or unknown partition fails closed with ``error`` set.
        """
        return consolidate(
            self._cfg.store, partition, apply, self._cfg.visible, self._cfg.resolve_strict
        )


def _check_fusion(cfg: SearchConfig) -> None:
    """Reject a fusion this searcher does not know, naming the accepted ones."""
    if cfg.fusion not in (FUSION_SCORE, FUSION_RRF):
        raise ValueError(
            f"SearchConfig.fusion {cfg.fusion!r} is unknown; use {FUSION_SCORE!r} or {FUSION_RRF!r}"
        )
    if not 0.0 <= cfg.lexical_weight <= 1.0:
        raise ValueError(f"SearchConfig.lexical_weight {cfg.lexical_weight!r} is not in [0, 1]")


def _minmax(scores: Sequence[float]) -> list[float]:
    """Scores rescaled to [0, 1] over their own range: best 1, weakest 0.

    A channel's raw scores are on its own scale (a lexical share of the query,
    a cosine), so a fusion first puts both on the same one. When every score
    is equal (or there is one) nothing tells them apart: all are 1.

    >>> _minmax([2.0, 1.5, 1.0]), _minmax([0.3, 0.3]), _minmax([])
    ([1.0, 0.5, 0.0], [1.0, 1.0], [])
    """
    if not scores:
        return []
    hi, lo = max(scores), min(scores)
    if hi <= lo:
        return [1.0] * len(scores)
    span = hi - lo
    return [(s - lo) / span for s in scores]


def _absorb(survivor: SearchResult, other: SearchResult) -> None:
    survivor.collapsed_count += 1 + other.collapsed_count
    if survivor.explanation is not None:
        survivor.explanation.collapsed.append(other.item.id)


def _cut(hits: list[tuple[Any, float]], gap: float, cliff: bool) -> list[tuple[Any, float]]:
    """Apply the semantic gap and cliff cut-offs to visible hits (best first)."""
    if not hits:
        return hits
    if gap > 0:
        best = hits[0][1]
        hits = [(e, s) for e, s in hits if best - s <= gap]
    if cliff and len(hits) > 1:
        drops = [hits[i][1] - hits[i + 1][1] for i in range(len(hits) - 1)]
        steepest = max(range(len(drops)), key=lambda i: (drops[i], -i))
        if drops[steepest] > 0:
            hits = hits[: steepest + 1]
    return hits
