"""The Searcher: one hybrid search call from lexical pass to shaped results.

The flow (see :mod:`memstore.search`): the lexical channel, then, unless its
answer is confident, the semantic channel; fusion and spreading; shaping.
The candidate work runs on one of two paths with the same results: the lean
path (:mod:`memstore.search._lean`, arrays over the store's snapshot) when
nothing needs an item mid-way, else the general path
(:mod:`memstore.search._fusion` and :mod:`memstore.search._shaping`). What
each channel reads from the store and the vector index, under the caller's
visibility, is :mod:`memstore.search._reads`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import time
from collections.abc import Callable, Collection, Sequence
from operator import attrgetter
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from memstore._lexhits import any_fuzzy
from memstore._lexindex import LexicalHit
from memstore._search_snapshot import SearchSnapshot, micros
from memstore.arguments import describe, query_vector_arg, unit_interval
from memstore.consolidate import ConsolidationReport, consolidate
from memstore.errors import InvalidItemError
from memstore.item import EXACT_ID_MATCH_SCORE, STATUS_ACTIVE, Item
from memstore.lexical import is_confident
from memstore.search import _shaping
from memstore.search._feedback import (
    FEEDBACK_DOCS,
    FEEDBACK_WEIGHT,
    feedback_query,
    feedback_terms,
)
from memstore.search._fusion import Candidate, Fusion
from memstore.search._fusion_rules import (
    DEFAULT_FANOUT,
    FUSION_DEPTH,
    FUSION_POOL,
    FUSION_SCORE,
    LONG_QUERY_TOKENS,
    POOL_LIMIT,
)
from memstore.search._lean import LeanFusion
from memstore.search._prior import INFO_PRIOR_SEMANTIC, semantic_prior
from memstore.search._reads import (
    bm25_hits,
    embed_query,
    item_visible,
    lexical_hits,
    semantic_hits,
)
from memstore.search._relevance import assign_relevance
from memstore.search._signals import QuerySignals, analyse
from memstore.search._staged import SearchSteps, StagedSearch
from memstore.search._types import (
    Explanation,
    SearchConfig,
    SearchResult,
    VectorIndex,
    check_config,
)
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
)
from memstore.store import Store
from memstore.tags import service_tag_value

__all__ = ["Searcher"]

_log = logging.getLogger("memstore")
_T = TypeVar("_T")
_ID_SCORE = attrgetter("id", "score")


class _Channels(Protocol[_T]):
    """What :meth:`Searcher._fuse` drives: a general or a lean fusion."""

    def add_lexical(
        self, hits: Sequence[LexicalHit], items: Sequence[Item | None] | None
    ) -> None: ...
    def add_semantic(self, hits: Sequence[tuple[Any, float]], channel: str) -> None: ...
    def spread(self, relations: Collection[str]) -> None: ...
    def signal(self, signals: QuerySignals | None) -> None: ...
    def ordered(self, need: int) -> list[_T]: ...
    def observe_hydrate(self) -> None: ...
    def add_feedback(self, hits: Sequence[LexicalHit], weight: float) -> None: ...
    def add_channel(
        self,
        ids: Sequence[str],
        scores: npt.NDArray[np.float64],
        share: float,
        rank_weight: float,
        channel: str,
    ) -> None: ...
    def ids(self, ordered: Sequence[_T]) -> list[str]: ...
    def words(self, ids: Sequence[str]) -> npt.NDArray[np.int64]: ...


class Searcher:
    """Hybrid search over a Store: lexical first, semantic fused in when needed, reranked."""

    def __init__(self, config: SearchConfig, *, stats: SearchStats | None = None) -> None:
        if not isinstance(config.store, Store):
            raise TypeError("SearchConfig.store must be a memstore.Store")
        check_config(config)
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
        min_relevance: float = 0.0,
        query_vector: npt.ArrayLike | None = None,
    ) -> list[SearchResult]:
        """Lexical first; semantic fused in when the lexical answer is not confident.

        The channels are fused as ``SearchConfig.fusion`` says (normalised
        scores by default, Reciprocal Rank Fusion with ``"rrf"``). A confident
        lexical hit (it covers every query token, or all but one of exactly
        three, and scores above the second hit) returns without an embedding
        call. Results are limited to what ``partition`` may see (items tagged
        for it, untagged ones, ``shared`` ones); :data:`~memstore.tags.PARTITION_ALL`
        lifts the filter (read-only operator surfaces only). Every result carries a
        ``relevance`` in [0, 1] (:mod:`memstore.search._relevance`); those below
        ``min_relevance`` (a number in [0, 1], default 0: keep all) are dropped
        from the ``limit`` results, so fewer, or none, may come back.

        ``query_vector``: the query's embedding when the caller already has it
        (one row of :meth:`~memstore_index.CellStore.embed_queries`, which embeds
        many queries in one call); the semantic channel then uses it instead of
        embedding ``query``, with the same results (relevance included: a
        search whose lexical answer is confident leaves it unused). It is
        checked first (:func:`~memstore.arguments.query_vector_arg`: the index's
        dimension, finite, not zero), and refused when there is no vector index.
        """
        vec = self._query_vector(query_vector)
        return self._search(
            query,
            kind,
            subject,
            partition,
            limit,
            caller,
            explain,
            min_relevance,
            full=False,
            vec=vec,
        )

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
        min_relevance: float = 0.0,
        query_vector: npt.ArrayLike | None = None,
    ) -> list[SearchResult]:
        """:meth:`hybrid_search` that always consults the vector index.

        It also adds the host's live matches and puts an item whose id equals
        the query first (score :data:`~memstore.item.EXACT_ID_MATCH_SCORE`,
        relevance 1). ``query_vector`` as in :meth:`hybrid_search`.
        """
        vec = self._query_vector(query_vector)
        return self._search(
            query,
            kind,
            subject,
            partition,
            limit,
            caller,
            explain,
            min_relevance,
            full=True,
            vec=vec,
        )

    def hybrid_search_staged(
        self,
        query: str,
        kind: str = "",
        subject: str = "",
        partition: str = "",
        limit: int = 10,
        *,
        caller: str | None = None,
        min_relevance: float = 0.0,
    ) -> StagedSearch:
        """:meth:`hybrid_search`, stopped after its lexical pass (:mod:`memstore.search._staged`).

        Its ``wants_vector`` says whether the rest would embed the query; its
        ``finish(query_vector)`` returns what :meth:`hybrid_search` returns.
        """
        steps = self._steps(
            query, kind, subject, partition, limit, caller, False, min_relevance, full=False
        )
        return StagedSearch(steps, self._query_vector)

    def _query_vector(self, value: npt.ArrayLike | None) -> npt.NDArray[np.float32] | None:
        """A caller's query vector, checked against the vector index (``None``: none given)."""
        if value is None:
            return None
        cells = self._cfg.cells() if self._cfg.cells is not None else None
        if cells is None:
            raise InvalidItemError(
                "query_vector was given, but this search has no vector index "
                "(open the Memory with an embedder)"
            )
        dim = getattr(cells, "dim", None)
        return query_vector_arg(value, dim if isinstance(dim, int) else None)

    def _visible(self, item: Item, partition: str) -> bool:
        return item_visible(self._cfg, item, partition)

    def _search(
        self,
        query: str,
        kind: str,
        subject: str,
        partition: str,
        limit: int,
        caller: str | None,
        explain: bool,
        min_relevance: float,
        *,
        full: bool,
        vec: npt.NDArray[np.float32] | None = None,
    ) -> list[SearchResult]:
        steps = self._steps(
            query, kind, subject, partition, limit, caller, explain, min_relevance, full=full
        )
        return StagedSearch(steps, lambda _: vec).finish()

    def _steps(
        self,
        query: str,
        kind: str,
        subject: str,
        partition: str,
        limit: int,
        caller: str | None,
        explain: bool,
        min_relevance: float,
        *,
        full: bool,
    ) -> SearchSteps:
        """The search as :data:`~memstore.search._staged.SearchSteps`: it pauses where it
        would embed the query, and is sent the caller's vector (``None``: none)."""
        cfg, stats = self._cfg, self._stats
        min_relevance = unit_interval(min_relevance, "min_relevance")
        limit = _whole(limit, "limit")
        limit = limit if limit > 0 else 10
        start = time.perf_counter()
        stats.add(STAT_TOTAL)
        fanout = (cfg.fanout or DEFAULT_FANOUT) if cfg.source_relation else 1
        # What the rerank and the link steps receive: each channel's best
        # limit x fanout items (an item ranked 15th by both channels should
        # beat one ranked 8th by only one of them); never cut for fewer than
        # POOL_LIMIT results, so a small limit is a prefix of a larger one.
        pool = max(limit, POOL_LIMIT) * max(fanout, FUSION_DEPTH)
        # The fused candidates the rerank sees: deep enough that none past them
        # could overtake the first ``pool`` (see settled_depth).
        need = max(2 * pool, _shaping.settled_depth(cfg, pool))
        cells = cfg.cells() if cfg.cells is not None else None
        by_score = cfg.fusion == FUSION_SCORE and cells is not None
        # A score fusion normalises each channel over a deep pool of scores (see
        # FUSION_POOL); only the items that can reach the results are read. The
        # lexical channel alone is read as deep, whatever the limit: a query
        # signal can lift a deeper hit, and a pool that grew with the limit would
        # let a larger limit reorder a smaller one's results.
        if by_score:
            depth = max(pool, FUSION_POOL)
        elif cells is None:
            depth = max(need, FUSION_POOL)
        else:  # a rank fusion: each channel's best limit x fan-out, as the seed's
            depth = pool
        t0 = time.perf_counter()
        lexical, read, n_tokens = lexical_hits(cfg, query, kind, subject, partition, pool, depth)
        stats.observe("search.phase.lexical", time.perf_counter() - t0)
        stats.add(STAT_KEYWORD_HITS)
        if any_fuzzy(lexical):
            stats.add(STAT_KW_TRIGRAM_HITS)
        # Confident: the top hit covers the query (the store's rule), all of it
        # for a long question (which shares words with almost anything), and
        # stands alone at the top (a shared top spot is a guess).
        confident = (
            bool(lexical)
            and is_confident(lexical[0].covered, n_tokens)
            and (n_tokens <= LONG_QUERY_TOKENS or lexical[0].covered == n_tokens)
            and (len(lexical) == 1 or lexical[0].score > lexical[1].score)
        )
        # One reading of the clock for the lean path's deadlines and recency and the
        # query's relative dates alike.
        now = cfg.store.config.clock()
        narrow = subject if cfg.subject_filter else ""  # the subject every channel keeps to
        # The lean path's masks know kinds and partitions, not subjects.
        lean = None if narrow else self._lean(explain, full, now)
        fused_path = cells is not None and (full or cfg.always_fuse or not confident)
        if fused_path:
            stats.add(STAT_KW_VOICE_MISSES)
            stats.add(STAT_SEMANTIC_CALLS)
        elif confident:
            stats.add(STAT_KW_VOICE_HITS)
        semantic = cells if fused_path else None
        # The subjects the query names: one answer per search, for the subject
        # signal and relevance alike (asked here only when the signal uses it).
        named = (
            cfg.store.named_subjects(query) if cfg.subject_signal and cfg.signal_weight else None
        )
        signals = analyse(cfg, query, now, named or frozenset())
        vec = yield semantic is not None
        run = (query, vec, signals, kind, subject, partition, depth, need)
        # The second round, for a question the lexical answer is not sure of.
        feedback: Callable[[list[str]], Sequence[LexicalHit]] | None = None
        if cfg.feedback_round and not confident:

            def feedback(ids: list[str]) -> Sequence[LexicalHit]:
                return self._feedback_hits(query, ids, kind, subject, partition, pool, depth)

        complete = len(lexical) < depth
        if lean is not None:
            snap, now_us = lean
            leaner = LeanFusion(self, snap, now_us, kind, partition, by_score)
            slots, vec = self._fuse(leaner, lexical, None, cells, semantic, *run, feedback)
            t1 = time.perf_counter()
            shaped = not cfg.no_shaping
            results = leaner.results(slots, query, limit, full=full, shaped=shaped)
            # A collapse can leave the limit-th result deeper than settled_depth
            # reckons: then the candidates further down are shaped in too.
            while shaped and len(slots) >= need and not _shaping.settled(cfg, results, limit, need):
                need *= 2
                slots = leaner.ordered(need)
                results = leaner.results(slots, query, limit, full=full, shaped=shaped)
            scores = leaner.lexical_scores(results)
        else:
            fusion = Fusion(self, kind, partition, explain, by_score, narrow)
            ordered, vec = self._fuse(fusion, lexical, read, cells, semantic, *run, feedback)
            if full:
                ordered = self._full_extras(query, kind, partition, ordered, explain)
            t1 = time.perf_counter()
            results = self._shape(ordered, partition, limit, explain)
            while (
                not cfg.no_shaping
                and len(ordered) >= need
                and not _shaping.settled(cfg, results, limit, need)
            ):
                need *= 2
                ordered = fusion.ordered(need)
                if full:
                    ordered = self._full_extras(query, kind, partition, ordered, explain)
                results = self._shape(ordered, partition, limit, explain)
            scores = None
        stats.observe("search.phase.rerank", time.perf_counter() - t1)
        if cfg.link_expansion is not None and cfg.link_expansion():
            results = _shaping.expand(self, results, partition, limit, explain)
            scores = None  # expansion may add results the lean path did not score
        results = self._relevance(query, named, results, lexical, scores, complete, cells, vec)
        if min_relevance > 0.0:
            results = [r for r in results if r.relevance >= min_relevance]
        elapsed = time.perf_counter() - start
        stats.observe(FUSED_PATH if fused_path else LEXICAL_PATH, elapsed)
        stats.observe(f"search.caller.{caller or 'internal'}", elapsed)
        if cfg.dirty is not None:
            cfg.dirty()
        return results

    def _lean(
        self, explain: bool, full: bool, now: _dt.datetime
    ) -> tuple[SearchSnapshot, int] | None:
        """The snapshot and ``now`` (microseconds) for the lean path, or ``None``: the general one.

        See :mod:`memstore.search._lean` for what keeps a search on the general path.
        """
        cfg = self._cfg
        if (
            explain
            or cfg.visible is not None
            or cfg.doc_visible is not None
            or cfg.hydrate is not None
            or cfg.state is not None
            or cfg.anchor is not None
            or cfg.collapse_key is not None
            or cfg.source_relation
            or (full and cfg.live is not None)
            or cfg.store.config.read is not None
        ):
            return None
        try:
            now_us = micros(now)
        except TypeError:  # a naive clock: only datetime comparisons know what it means
            return None
        snap = cfg.store.search_snapshot()
        return None if snap is None else (snap, now_us)

    def _fuse(
        self,
        fusion: _Channels[_T],
        lexical: Sequence[LexicalHit],
        read: Sequence[Item | None] | None,
        cells: VectorIndex | None,
        semantic: VectorIndex | None,
        query: str,
        given: npt.NDArray[np.float32] | None,
        signals: QuerySignals | None,
        kind: str,
        subject: str,
        partition: str,
        depth: int,
        need: int,
        feedback: Callable[[list[str]], Sequence[LexicalHit]] | None = None,
    ) -> tuple[list[_T], npt.NDArray[np.float32] | None]:
        """Run the channels into ``fusion``: its best ``need`` candidates, and the query vector.

        ``semantic`` is the vector index when the semantic channel runs (the
        lexical answer was not confident, or the search always fuses). An empty
        fused list falls back to an exact scan of ``cells``. ``given``: the
        caller's query vector, used instead of embedding ``query``. The vector
        returned is ``None`` when no channel needed it (given or not).
        ``signals``: the query's signals (:func:`~memstore.search._signals.analyse`).
        ``read``: the items of the first ``lexical`` hits when they were read already.
        ``feedback``: the second round (:meth:`_feedback_hits`) given the first round's
        best ids, or ``None``: no second round.
        """
        cfg, stats = self._cfg, self._stats
        slot = fusion.slot if isinstance(fusion, LeanFusion) else None  # hits as its slots
        fusion.signal(signals)
        fusion.add_lexical(lexical, read)
        vec: npt.NDArray[np.float32] | None = None
        if semantic is not None:
            try:
                vec = given if given is not None else embed_query(stats, semantic, query)
                sem = semantic_hits(
                    cfg, stats, semantic, vec, kind, subject, partition, depth, False, slot
                )
                fusion.add_semantic(self._prior(fusion, sem), "semantic")
            except Exception:  # the lexical answer still stands
                _log.warning("memstore: semantic search failed; lexical only", exc_info=True)
                stats.add(STAT_SEMANTIC_FALLBACKS)
            else:  # fused: the query's words scored a second way, by BM25
                if cfg.bm25_weight > 0.0 and cfg.fusion == FUSION_SCORE:
                    bm25 = bm25_hits(cfg, query, kind, subject, partition, depth)
                    fusion.add_channel(bm25.ids, bm25.scores, cfg.bm25_weight, 0.0, "bm25")
        fusion.spread(cfg.spread_relations)
        ordered = fusion.ordered(need)
        if feedback is not None and ordered:
            again = feedback(fusion.ids(ordered[:FEEDBACK_DOCS]))
            if again:
                fusion.add_feedback(again, FEEDBACK_WEIGHT)
                fusion.spread(cfg.spread_relations)
                ordered = fusion.ordered(need)
        if not ordered and cells is not None:
            try:
                # The query vector of this call's semantic pass when it ran: one
                # embedding per search, even when the exact scan has to step in.
                if vec is None:
                    vec = given if given is not None else embed_query(stats, cells, query)
                hits = semantic_hits(
                    cfg, stats, cells, vec, kind, subject, partition, depth, True, slot
                )
                fusion.add_semantic(self._prior(fusion, hits), "exhaustive")
                fusion.spread(cfg.spread_relations)
                ordered = fusion.ordered(need)
                if ordered:
                    stats.add(STAT_EXHAUSTIVE_FALLBACKS)
            except Exception:
                _log.warning("memstore: exhaustive fallback failed", exc_info=True)
        fusion.observe_hydrate()
        return ordered, vec

    def _prior(
        self, fusion: _Channels[_T], hits: Sequence[tuple[Any, float]]
    ) -> Sequence[tuple[Any, float]]:
        """The semantic hits with the information prior added (``info_prior="semantic"``)."""
        if self._cfg.info_prior != INFO_PRIOR_SEMANTIC or not hits:
            return hits
        pairs = list(hits)
        return semantic_prior(pairs, fusion.words([e.id for e, _ in pairs]))

    def _shape(
        self, ordered: list[Candidate], partition: str, limit: int, explain: bool
    ) -> list[SearchResult]:
        """The general path's shaping: sources replaced, reranked and collapsed (or not)."""
        cfg = self._cfg
        if cfg.no_shaping:
            return [SearchResult(c.item, c.fused, 0, c.via, c.explanation) for c in ordered[:limit]]
        if cfg.source_relation:
            ordered = _shaping.replace_sources(self, ordered, partition, explain)
        return _shaping.rerank(cfg, ordered, limit, explain)

    def _relevance(
        self,
        query: str,
        named: frozenset[str] | None,
        results: list[SearchResult],
        lexical: Sequence[LexicalHit],
        scores: dict[str, float] | None,
        lexical_complete: bool,
        cells: VectorIndex | None,
        vec: npt.NDArray[np.float32] | None,
    ) -> list[SearchResult]:
        """Each result's ``relevance``, from this call's lexical scores, the query vector
        (when it was computed) and the subjects the query names; the same on both paths.

        ``named``: the subjects the query names as the signal stage had them
        (``None``: not asked yet; asked here if a result has a subject).
        ``scores``: the results' lexical scores when the caller has them (the
        lean path), else they are looked up among ``lexical``.
        """
        if not results:
            return results
        vector_of = getattr(cells, "vector", None) if vec is not None else None
        rows_of = getattr(cells, "vector_rows", None) if vec is not None else None
        if named is None:
            named = (
                self._cfg.store.named_subjects(query)
                if any(r.item.subject for r in results)
                else frozenset()
            )
        if scores is None:
            # Every hit's score (the step reads only the results' ids), built in C.
            scores = dict(map(_ID_SCORE, lexical))
        # A pool that stopped at its depth bounds what it did not reach by its weakest score.
        beyond = 0.0 if lexical_complete or not lexical else lexical[-1].score
        assign_relevance(results, scores, beyond, vec, vector_of, named, rows_of)
        return results

    def _hydrate(self, id: str, kind: str, partition: str, subject: str = "") -> Item | None:
        """The item ``id`` if the caller may read it: active, of ``kind`` and ``subject``
        (when given; the subject as the lexical filter reads it), visible in ``partition``."""
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
        if subject and item.subject != subject and service_tag_value(item) != subject:
            return None
        return item if self._visible(item, partition) else None

    def _feedback_hits(
        self,
        query: str,
        ids: list[str],
        kind: str,
        subject: str,
        partition: str,
        pool: int,
        depth: int,
    ) -> Sequence[LexicalHit]:
        """The second lexical round: ``query`` plus the distinctive words of ``ids``
        (the first round's best; :func:`~memstore.search._feedback.feedback_terms`),
        searched as the first round was. Empty when those hold no such word."""
        docs, df, n_docs = self._cfg.store.lexical_profile(ids)
        expanded = feedback_query(query, feedback_terms(docs, df, n_docs, query))
        if not expanded:
            return []
        hits, _, _ = lexical_hits(self._cfg, expanded, kind, subject, partition, pool, depth)
        return hits

    def _full_extras(
        self, query: str, kind: str, partition: str, ordered: list[Candidate], explain: bool
    ) -> list[Candidate]:
        cfg = self._cfg
        if cfg.live is not None:
            exclude = {c.item.id for c in ordered}
            for r in cfg.live(query, kind, partition, exclude):
                if r.item.id not in exclude:
                    ordered.append(
                        Candidate(r.item, r.score, Explanation(["live"]) if explain else None)
                    )
        exact = query.strip()
        hit = self._hydrate(exact, kind, partition) if exact else None
        if hit is not None:
            ordered = [c for c in ordered if c.item.id != hit.id]
            c = Candidate(hit, EXACT_ID_MATCH_SCORE, Explanation(["exact_id"]) if explain else None)
            ordered.insert(0, c)
        return ordered

    # -------------------------------------------------------------- shaping

    def rerank(self, items: Sequence[Item], limit: int) -> list[SearchResult]:
        """Score items in relevance order (index 0 best), collapse near-duplicates, truncate.

        The score is :func:`~memstore.rerank.rerank_base_score` of the input rank
        times the state, anchor, watch and recency multipliers. Two collapse
        passes follow: the host's ``collapse_key``, then near-duplicate
        knowledge. Deterministic: stable sorts with an id tie-break.
        """
        if isinstance(items, str | bytes | Item) or not isinstance(items, Sequence):
            raise InvalidItemError(f"items must be a list of Items, got {describe(items)}")
        for it in items:
            if not isinstance(it, Item):
                raise InvalidItemError(f"items must be a list of Items, got one {describe(it)}")
        limit = _whole(limit, "limit")
        return _shaping.rerank(self._cfg, [Candidate(it) for it in items], limit, explain=False)

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


def _whole(value: object, name: str) -> int:
    """``value`` as an ``int`` when it is a whole number (a NumPy one too), not a ``bool``."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise InvalidItemError(f"{name} must be a whole number, got {describe(value)}")
    return int(value.__index__())  # type: ignore[attr-defined]
