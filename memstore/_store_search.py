"""The Store's lexical search family (``keyword_search`` and its variants) and search caches.

Two caches serve repeated work between writes, both keyed by the store's
*search generation* (a counter every committed or rolled-back change bumps):
the lexical plan of a query's tokens (the Lexicon's token matching, the
costly part of a short query), and the :class:`~memstore._search_snapshot.SearchSnapshot`
the hybrid searcher's lean path scores candidates on. The snapshot is carried
across writes that only add new ids or replace held ones: the store logs the
ids written since it was made, and the next ask derives the new generation's
from it (:meth:`~memstore._search_snapshot.SearchSnapshot.derive`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar, cast

from memstore import arguments as arg
from memstore._lexindex import LexicalColumns, LexicalHit, LexicalHits, QueryPlan
from memstore._search_snapshot import SearchSnapshot
from memstore._store_base import StoreBase
from memstore._updatekey import ts
from memstore.errors import InvalidItemError
from memstore.item import STATUS_ACTIVE, Item
from memstore.lexical import is_confident, score_document
from memstore.tags import in_partition
from memstore.text import event_date_words, kw_tokens, normalize_query, words

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "PLAN_CACHE_SIZE",
    "SNAPSHOT_AMORTISE",
    "SNAPSHOT_LOG",
    "StoreSearch",
]

K = TypeVar("K")
V = TypeVar("V")

DEFAULT_SEARCH_LIMIT = 10
"""Results a keyword search returns when ``limit`` is not positive."""
PLAN_CACHE_SIZE = 256
"""Query plans and named subjects kept per generation, and tokenised queries (the oldest
is dropped first)."""
SNAPSHOT_AMORTISE = 1000
"""Items one search may spend on building a snapshot.

A snapshot costs a pass over every item; a search on the general path costs
about as much as a pass over this many. So after a write the snapshot is
rebuilt only once ``searches x SNAPSHOT_AMORTISE`` reaches the store's size:
at once for a small store, after a few searches for a large one, and never
for a store written between every two searches (which would pay the pass each
time and gain nothing). A snapshot derived from the last one (see
:data:`SNAPSHOT_LOG`) costs the items written, not a pass: it is made at once.
"""
SNAPSHOT_LOG = 4096
"""Writes the store logs for deriving its last snapshot: past them (and at a deletion,
which moves slots) the snapshot is dropped, and the next one is built."""


class StoreSearch(StoreBase):
    """Keyword search over active shared items (and an owner's private ones)."""

    _search_generation = 0
    _search_asks = 0
    _search_asked_at = -1
    _search_snap: SearchSnapshot | None = None
    _snap_log: list[str] | None = None
    """The ids written since ``_search_snap``'s generation, one entry per write."""
    _plans: dict[tuple[str, ...], QueryPlan] | None = None
    _plans_generation: tuple[int, int] = (-1, -1)
    _token_cache: dict[str, tuple[str, ...]] | None = None
    _named: dict[str, frozenset[str]] | None = None
    _named_generation = -1

    def _set(self, id: str, new: Item | None) -> None:
        """Every change of stored state passes here: it starts a new search generation."""
        super()._set(id, new)
        self._search_generation += 1
        log = self._snap_log
        if log is not None:
            if new is not None and len(log) < SNAPSHOT_LOG:
                log.append(id)
            else:  # a deletion moves every later slot: the next snapshot is built
                self._search_snap = self._snap_log = None

    def _fill_empty(
        self, loaded: list[Item], indexed: list[tuple[Item, bool]], *, lexed: bool
    ) -> None:
        """A restore's bulk fill changes the stored state too: a new search generation."""
        super()._fill_empty(loaded, indexed, lexed=lexed)
        self._search_generation += len(loaded) + 1
        self._search_snap = self._snap_log = None

    # ------------------------------------------------------- search caches

    def clear_search_caches(self) -> None:
        """Forget what a write would make stale: the lexicon's token matches and the query plans.

        Results do not change; the next queries pay for matching their tokens
        again, as the first queries after a write do (benchmarks time that
        *cold* path with it). A query's tokenisation is kept: no write changes it.
        """
        with self._locked():
            self._lex.lexicon.clear_caches()
            self._plans = None

    def _drop_search_snapshot(self) -> None:
        """Forget the snapshot and its write log: the next one is built (a test's oracle)."""
        with self._locked():
            self._search_snap = self._snap_log = None

    def search_snapshot(self) -> SearchSnapshot | None:
        """The arrays the searcher's lean path reads, or ``None`` while not worth building.

        One snapshot per generation: derived from the last one when the writes
        since allow it (see :meth:`_derive_snapshot`), else built at the first
        ask that :data:`SNAPSHOT_AMORTISE` allows; ``None`` also when an item
        holds a naive ``datetime`` (the snapshot compares exact microseconds).
        """
        with self._locked():
            gen = self._search_generation
            snap = self._search_snap
            if snap is not None:
                if snap.generation == gen:
                    return snap
                derived = self._derive_snapshot(snap, gen)
                if derived is not None:
                    self._search_snap, self._snap_log = derived, []
                    return derived
                self._search_snap = self._snap_log = None
            if self._search_asked_at != gen:
                self._search_asked_at, self._search_asks = gen, 0
            self._search_asks += 1
            if self._search_asks * SNAPSHOT_AMORTISE < len(self._items):
                return None
            try:
                snap = SearchSnapshot(gen, self._items.values())
            except TypeError:  # a naive datetime: the general path compares datetimes
                return None
            self._search_snap, self._snap_log = snap, []
            return snap

    def _derive_snapshot(self, snap: SearchSnapshot, gen: int) -> SearchSnapshot | None:
        """Generation ``gen``'s snapshot made from ``snap`` and the log, or ``None`` (lock held).

        Only when the log holds every write since ``snap`` (one entry per
        generation, none a deletion): then the items those ids name now are
        all that changed, and the snapshot's own rules decide the rest.
        """
        log, items, backlinks = self._snap_log, self._items, self._backlinks
        if log is None or len(log) != gen - snap.generation:
            return None
        changed = [items.get(id) for id in dict.fromkeys(log)]  # first-write order, once each
        if None in changed:
            return None
        return snap.derive(gen, cast("list[Item]", changed), lambda id: bool(backlinks.get(id)))

    def search_read(self, ids: Sequence[str]) -> list[Item]:
        """Copies of the items ``ids`` names (those still stored), as :meth:`get` returns them."""
        if type(ids) is not list and (
            isinstance(ids, str | bytes | Mapping) or not isinstance(ids, Iterable)
        ):
            raise InvalidItemError(f"ids must be a list of ids, got {arg.describe(ids)}")
        with self._locked():
            now = self._now()
            items = self._items
            return self._out([self._view(items[id], now) for id in ids if id in items])

    def _search_borrow(self, ids: Sequence[str]) -> list[Item]:
        """:meth:`search_read` without the copies, for a caller that only reads the items at once.

        A stored item is never changed in place (its setters refuse, and a
        write stores a new item), so the stored one itself is what a copy
        would hold, as long as nobody mutates its lists or dicts: the server's
        recall renders its hits to JSON at once, and :class:`Item.clone` of
        each (a copy of every field and container, ~10% of a cold recall's
        CPU) bought it nothing. An item past its deadline is still copied (it
        reads as stale), and a store with a ``read`` hook (which may amend
        what it is given) copies them all. Never handed to a public caller:
        :func:`memstore.search._lean.borrowed_results` is its only way in.
        """
        if self._config.read is not None:
            return self.search_read(ids)
        with self._locked():
            now = self._now()
            view, items = self._view, self._items
            got = [items.get(id) for id in ids]
            return [
                it if it.status != STATUS_ACTIVE or not it.is_expired(now) else view(it, now)
                for it in got
                if it is not None
            ]

    def _tokens(self, query: str) -> list[str]:
        """The query's lexical tokens; a repeated query is tokenised once (any generation)."""
        with self._locked():
            return list(self._tokens_locked(query))

    def _tokens_locked(self, query: str) -> tuple[str, ...]:
        """:meth:`_tokens` with the lock held (a search takes it once, not twice)."""
        cache = self._token_cache
        if cache is None:
            cache = self._token_cache = {}
        tokens = cache.get(query)
        if tokens is None:
            tokens = _remember(cache, query, tuple(kw_tokens(normalize_query(query))))
        return tokens

    def _plan(self, tokens: Sequence[str]) -> QueryPlan:
        """The lexical plan of ``tokens``, cached while the store is unchanged (lock held).

        A plan holds the lexicon's slots, so it is kept per lexicon generation
        too: a compaction renumbers them without a write (:meth:`save_lexicon`
        compacts first), and a plan from before it would rank other documents.
        """
        gen = (self._search_generation, self._lex.lexicon.generation)
        plans = self._plans
        if plans is None or self._plans_generation != gen:
            plans = self._plans = {}
            self._plans_generation = gen
        key = tuple(tokens)
        plan = plans.get(key)
        if plan is None:
            plan = _remember(plans, key, self._lex.plan(tokens))
        return plan

    # -------------------------------------------------------- lexical search

    def keyword_hits(
        self,
        query: str,
        kind: str = "",
        subject: str = "",
        limit: int = DEFAULT_SEARCH_LIMIT,
        *,
        user_hash: str = "",
        own_only: bool = False,
        partition: str | None = None,
    ) -> tuple[list[tuple[Item, LexicalHit]], int]:
        """Ranked lexical hits with their scores, and the number of query tokens.

        The engine under every ``keyword_search*`` variant. ``user_hash`` adds
        that owner's private items (scored by the same rule, since no index
        holds them); ``own_only`` searches those alone. ``partition`` keeps items
        tagged for it, untagged ones and ``shared`` ones (``None``: every partition).
        An argument of the wrong type raises
        :class:`~memstore.errors.InvalidItemError` (a ``bool`` is not a limit).
        """
        _check_search(query, kind, subject, limit, partition)
        if not isinstance(user_hash, str):
            raise InvalidItemError(f"user_hash must be text, got {arg.describe(user_hash)}")
        arg.flag(own_only, "own_only")
        limit = limit if limit > 0 else DEFAULT_SEARCH_LIMIT
        with self._locked():
            tokens = self._tokens_locked(query)
            if not tokens:
                return [], 0
            now = self._now()
            plan = self._plan(tokens)
            hits: list[LexicalHit] = []
            if not own_only:
                hits = self._rank_locked(plan, kind, subject, now, limit, partition)
            if user_hash:
                hits = self._merge_private(
                    hits, plan, user_hash, kind, subject, now, limit, partition
                )
            out = [(self._view(self._items[h.id], now), h) for h in hits]
            self._out([it for it, _ in out])
            return out, len(tokens)

    def keyword_ranked(
        self,
        query: str,
        kind: str = "",
        subject: str = "",
        limit: int = DEFAULT_SEARCH_LIMIT,
        *,
        partition: str | None = None,
    ) -> tuple[list[LexicalHit], int]:
        """:meth:`keyword_hits` without the items: ids and scores, and the number of query tokens.

        The index's ranking alone (shared items; no ``read`` hook fires, since
        nothing is read), for a caller that needs a deep pool of scores but
        reads only its best few items (the searcher's score fusion).
        """
        hits, n = self._keyword_columns(query, kind, subject, limit, partition, columns=False)
        return cast("list[LexicalHit]", hits), n  # tuples: ``columns`` was not asked

    def _keyword_columns(
        self,
        query: str,
        kind: str,
        subject: str,
        limit: int,
        partition: str | None,
        columns: bool = True,
    ) -> tuple[Sequence[LexicalHit], int]:
        """:meth:`keyword_ranked`'s hits, as :class:`~memstore._lexhits.LexicalColumns` where
        the compiled rank makes them (the searcher's lean path reads them so), else as tuples."""
        _check_search(query, kind, subject, limit, partition)
        limit = limit if limit > 0 else DEFAULT_SEARCH_LIMIT
        with self._locked():
            tokens = self._tokens_locked(query)
            if not tokens:
                return [], 0
            plan = self._plan(tokens)
            return self._rank_locked(
                plan, kind, subject, self._now(), limit, partition, columns
            ), len(tokens)

    def keyword_bm25(
        self,
        query: str,
        kind: str = "",
        subject: str = "",
        limit: int = DEFAULT_SEARCH_LIMIT,
        *,
        partition: str | None = None,
    ) -> LexicalHits:
        """The best ``limit`` shared items by BM25 of the query's words (:mod:`memstore._bm25`).

        :meth:`keyword_ranked`'s tokens, filters and order on equal scores,
        scored by BM25 over exact words instead of the lexicon's match levels
        (no hit is ``fuzzy``): the hybrid search's third channel. Ids and
        scores only, nothing read; the hits carry them as columns too
        (``hits.ids``, ``hits.scores``).
        """
        return cast("LexicalHits", self._bm25_ranked(query, kind, subject, limit, partition))

    def _bm25_ranked(
        self,
        query: str,
        kind: str,
        subject: str,
        limit: int,
        partition: str | None,
        columns: bool = False,
    ) -> LexicalHits | LexicalColumns:
        """:meth:`keyword_bm25`, or its hits as :class:`~memstore._lexhits.LexicalColumns`
        where the compiled rank makes them (``columns``: the searcher's BM25 channel)."""
        _check_search(query, kind, subject, limit, partition)
        limit = limit if limit > 0 else DEFAULT_SEARCH_LIMIT
        with self._locked():
            return self._lex.bm25(
                self._tokens_locked(query),
                kind=kind,
                subject=subject,
                hidden_kinds=self._hidden_kinds(kind),
                now_ts=self._now().timestamp(),
                limit=limit,
                partition=partition,
                columns=columns,
            )

    def named_subjects(self, query: str) -> frozenset[str]:
        """The subjects of indexed items (or ``service/`` tag values) that ``query`` names.

        A subject is named when each of its words is a word of the query:
        ``"What did Caroline say?"`` names ``Caroline``; ``payment-api`` is named
        by ``"payment api errors"``. Search asks it once per call and uses the
        answer twice: the subject signal favours a hit whose subject is named,
        and relevance counts a hit about another subject than the one asked
        about as weaker evidence. Only the subjects of items the lexical index
        holds now count: one that only items of a data kind carry (never
        indexed) is named by no query, nor is one whose items were all deleted
        or given another subject.

        The answer is kept per query while the store is unchanged (its search
        generation), as query plans are.
        """
        if not isinstance(query, str):
            raise InvalidItemError(f"query must be text, got {arg.describe(query)}")
        with self._locked():
            gen = self._search_generation
            known = self._named
            if known is None or self._named_generation != gen:
                known = self._named = {}
                self._named_generation = gen
            named = known.get(query)
            if named is None:
                qwords = words(query)
                found = self._lex.named_subjects(qwords) if qwords else frozenset()
                named = _remember(known, query, found)
            return named

    def lexical_profile(
        self, ids: Sequence[str]
    ) -> tuple[list[tuple[str, ...]], dict[str, int], int]:
        """The indexed words of each of ``ids``, each word's document frequency, and the
        number of documents indexed: what a second, feedback round of search weighs
        its words by (:mod:`memstore.search._feedback`).

        An id the index does not hold has no words (``()``). Frequencies count
        whole words, as indexed (lower-cased, unstemmed).
        """
        with self._locked():
            lex = self._lex.lexicon
            docs = [lex.doc_words(id) for id in ids]
            df = {w: lex.doc_freq(w) for doc in docs for w in doc}
            return docs, df, len(lex)

    def _hidden_kinds(self, kind: str) -> Sequence[str]:
        """The kinds a ranking leaves out: the non-searchable ones, unless it asks for a kind."""
        return () if kind else self._vocab.non_searchable

    def _rank_locked(
        self,
        plan: QueryPlan,
        kind: str,
        subject: str,
        now: _dt.datetime,
        limit: int | None,
        partition: str | None,
        columns: bool = False,
    ) -> LexicalHits:
        """Rank the index's matches; an unfiltered search hides non-searchable kinds.

        ``columns``: the hits as :class:`~memstore._lexhits.LexicalColumns` where the
        compiled rank makes them (a sequence of the same hits; the return type names
        the tuples every other caller gets).
        """
        ranked = self._lex.rank(
            plan,
            kind=kind,
            subject=subject,
            hidden_kinds=self._hidden_kinds(kind),
            now_ts=now.timestamp(),
            limit=limit,
            partition=partition,
            columns=columns,
        )
        return cast("LexicalHits", ranked)

    def _merge_private(
        self,
        hits: list[LexicalHit],
        plan: QueryPlan,
        user_hash: str,
        kind: str,
        subject: str,
        now: _dt.datetime,
        limit: int,
        partition: str | None,
    ) -> list[LexicalHit]:
        """Score the owner's private items in ``partition`` (unindexed) and merge them in."""
        extra: list[LexicalHit] = []
        for id in sorted(self._private.get(user_hash, ())):
            it = self._items[id]
            if not it.is_active(now) or not self._matches(it, now, "", kind, "", subject, ""):
                continue
            if not in_partition(it, partition):
                continue
            if not kind and self._vocab.is_non_searchable(it.kind):
                continue
            title = words(it.title)
            score, covered, fuzzy = score_document(
                plan.tokens,
                plan.weights,
                [*title, *words(it.content), *event_date_words(it.event_date)],
                title,
                plan.fuzzy_ok,
            )
            if score > 0.0:
                extra.append(LexicalHit(id, score, covered, fuzzy))
        if not extra:
            return hits
        items = self._items
        merged = sorted(
            [*hits, *extra],
            key=lambda h: (-h.score, -ts(items[h.id].updated_at), h.id),
        )
        return merged[:limit]

    def keyword_search(
        self, query: str, kind: str = "", subject: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> list[Item]:
        """Active shared items ranked by lexical match on title and content.

        Candidates come from the Lexicon and the fuzzy trigram channel, never a
        scan of every item; cost grows with the candidates. ``kind`` and
        ``subject`` filter (``subject`` also matches a ``service/`` tag); an
        unfiltered search leaves out the vocabulary's non-searchable kinds.
        """
        return [it for it, _ in self.keyword_hits(query, kind, subject, limit)[0]]

    def keyword_search_scored(
        self, query: str, kind: str = "", subject: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> tuple[list[Item], bool]:
        """:meth:`keyword_search` plus whether the top hit is a confident lexical answer.

        Confident: the top hit covers every query token (all but one for three
        or more), whatever its raw score. A hybrid search skips the embedding
        round trip on a confident answer.
        """
        items, confident, _ = self.keyword_search_scored_with_trigram_hit(
            query, kind, subject, limit
        )
        return items, confident

    def keyword_search_with_trigram_hit(
        self, query: str, kind: str = "", subject: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> tuple[list[Item], bool]:
        """:meth:`keyword_search` plus whether the fuzzy trigram channel supplied a final hit."""
        items, _, trigram = self.keyword_search_scored_with_trigram_hit(query, kind, subject, limit)
        return items, trigram

    def keyword_search_scored_with_trigram_hit(
        self, query: str, kind: str = "", subject: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> tuple[list[Item], bool, bool]:
        """:meth:`keyword_search` plus confidence and the trigram-hit signal."""
        hits, n = self.keyword_hits(query, kind, subject, limit)
        confident = bool(hits) and is_confident(hits[0][1].covered, n)
        return [it for it, _ in hits], confident, any(h.fuzzy for _, h in hits)

    def keyword_search_for_user(
        self,
        user_hash: str,
        query: str,
        kind: str = "",
        subject: str = "",
        limit: int = DEFAULT_SEARCH_LIMIT,
    ) -> list[Item]:
        """:meth:`keyword_search` that also considers ``user_hash``'s private items."""
        return [
            it for it, _ in self.keyword_hits(query, kind, subject, limit, user_hash=user_hash)[0]
        ]

    def keyword_search_own(
        self, user_hash: str, query: str, kind: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> list[Item]:
        """Keyword search over ``user_hash``'s private items alone (empty hash: nothing).

        ``user_hash`` is text (``None`` is refused, not read as "nobody"); the
        other arguments are checked as :meth:`keyword_search` checks them.
        """
        user_hash = arg.id_arg(user_hash, "user_hash")
        _check_search(query, kind, "", limit, None)
        if not user_hash:
            return []
        hits = self.keyword_hits(query, kind, "", limit, user_hash=user_hash, own_only=True)[0]
        return [it for it, _ in hits]

    def keyword_search_per_kind(
        self,
        query: str,
        kind: str = "",
        subject: str = "",
        limit: int = DEFAULT_SEARCH_LIMIT,
        per_kind: int = 3,
    ) -> list[Item]:
        """:meth:`keyword_search` with at most ``per_kind`` results of any one kind.

        A dominant kind cannot fill the limit and starve the smaller ones;
        relevance order is kept and ``limit`` caps the total.
        """
        _check_search(query, kind, subject, limit, None)
        if isinstance(per_kind, bool) or not hasattr(type(per_kind), "__index__"):
            raise InvalidItemError(f"per_kind must be a whole number, got {arg.describe(per_kind)}")
        limit = limit if limit > 0 else DEFAULT_SEARCH_LIMIT
        per_kind = max(per_kind, 1)
        tokens = self._tokens(query)
        if not tokens:
            return []
        with self._locked():
            now = self._now()
            hits = self._rank_locked(self._plan(tokens), kind, subject, now, None, None)
            taken: dict[str, int] = {}
            out: list[Item] = []
            for h in hits:
                it = self._items[h.id]
                if taken.get(it.kind, 0) >= per_kind:
                    continue
                taken[it.kind] = taken.get(it.kind, 0) + 1
                out.append(self._view(it, now))
                if len(out) >= limit:
                    break
            return self._out(out)


def _remember(cache: dict[K, V], key: K, value: V) -> V:
    """Put ``value`` in a search cache of at most :data:`PLAN_CACHE_SIZE` entries (oldest out)."""
    if len(cache) >= PLAN_CACHE_SIZE:
        cache.pop(next(iter(cache)))
    cache[key] = value
    return value


def _check_search(
    query: object, kind: object, subject: object, limit: object, partition: object
) -> None:
    """Refuse a lexical search's argument of the wrong type (type() checks: a hot path).

    Without it, ``query=None`` raised ``AttributeError`` from the tokenizer,
    ``limit="5"`` a ``TypeError`` from a comparison, and ``limit=True``
    searched for one hit. A query holding a lone surrogate (no text a writer
    could have stored) is refused as :meth:`Memory.search` refuses it.
    """
    if (
        type(query) is str
        and type(kind) is str
        and type(subject) is str
        and type(limit) is int
        and (partition is None or type(partition) is str)
    ):
        if arg.has_lone_surrogate(query):
            raise InvalidItemError("query is not valid Unicode text (it holds a lone surrogate)")
        return
    for name, value in (("query", query), ("kind", kind), ("subject", subject)):
        if not isinstance(value, str):
            raise InvalidItemError(f"{name} must be text, got {arg.describe(value)}")
    if partition is not None and not isinstance(partition, str):
        raise InvalidItemError(f"partition must be text or None, got {arg.describe(partition)}")
    if isinstance(limit, bool) or not hasattr(type(limit), "__index__"):  # numpy ints pass
        raise InvalidItemError(f"limit must be a whole number, got {arg.describe(limit)}")
