"""The verbs of MemoryProtocol 0.1 over a :class:`~memstore.memory.Memory`, without HTTP.

:class:`Verbs` translates each request into store, searcher and journal calls
(see :mod:`memstore.protocol.mapping` for how episodes and chunks are items)
and answers in the seed's wire shapes. Every method acts in one tenant, the
partition its caller's token resolved to; no argument can name another.
The ASGI app (:mod:`memstore.protocol.app`) adds HTTP around it.

Calls block (they write the journal, embed, search): run them off the event
loop. They are thread-safe, as the store is.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt
from ulid import ULID

from memstore.catchup import CATCH_UP_SECONDS, catch_up
from memstore.errors import InvalidItemError
from memstore.item import Item
from memstore.journal import Hlc, Journal, Lsn, Version
from memstore.journal.hlc import LAST_LSN, MAX_COUNTER, MAX_NODE_ID, wall_clock_ms
from memstore.limits import CONTEXT_REACH
from memstore.memory import Memory
from memstore.protocol.confirm import Confirmations
from memstore.protocol.errors import (
    GRAPH_UNAVAILABLE,
    UNAVAILABLE,
    episode_not_found,
    invalid_episode_id,
    invalid_filter,
    invalid_lsn,
    invalid_request,
    payload_too_large,
    snapshot_out_of_range,
)
from memstore.protocol.filter import Expr, FilterSyntaxError, evaluate, parse_filter
from memstore.protocol.limits import MAX_CONTENT_BYTES, MAX_EPISODE_CHUNKS, MAX_METADATA_BYTES
from memstore.protocol.mapping import (
    KIND_CHUNK,
    KIND_EPISODE,
    audit_item,
    chunk_id,
    episode_body,
    episode_chunk_ids,
    episode_id,
    episode_items,
    filter_record,
    hit_body,
    owned_by,
    parse_ulid,
    recall_hits,
    snapshot_record,
)
from memstore.protocol.models import (
    MAX_WIRE_COUNTER,
    BeforeTarget,
    ForgetRequest,
    IdTarget,
    IngestRequest,
    RecallRequest,
    ScopeTarget,
)
from memstore.protocol.stamps import StampCache
from memstore.search import SearchConfig, Searcher, SearchResult
from memstore.search._lean import borrowed_results
from memstore.store import Store
from memstore.web.lines import line_safe

__all__ = [
    "INDICES",
    "SOURCE_OP_AS_OF",
    "SOURCE_OP_GRAPH",
    "SOURCE_OP_RERANKED",
    "PreparedRecall",
    "QueryVector",
    "RecallStage",
    "Verbs",
]

INDICES: Final = ("Kv", "Keyword", "Vector", "Graph")
"""What a forget that removed something touched: the items, both search indexes, the links."""
SOURCE_OP_RERANKED: Final = "Reranked"
"""``source_op`` of a semantic hit: hybrid search, fused and reranked."""
SOURCE_OP_GRAPH: Final = "Graph"
"""``source_op`` of a hit reached by traversing links from the semantic hits (mode graph)."""
SOURCE_OP_AS_OF: Final = "AsOf"
"""``source_op`` of a hit from the journal's past state (``as_of``, lexical ranking)."""
_RFC3339: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
"""An RFC 3339 date-time (section 5.6), the only form t_ref and as_of take."""
_LSN_FORM: Final = re.compile(r"([0-9]{1,20})\.([0-9]{1,10})(?:\.([0-9]{1,5}))?")
GRAPH_DEPTH: Final = 2
"""How many links a graph recall follows from its anchors."""


QueryVector: TypeAlias = npt.NDArray[np.float32]
"""A recall query's embedding (a row of :meth:`~memstore.memory.Memory.embed_queries`)."""


@dataclass(frozen=True, slots=True)
class PreparedRecall:
    """A checked recall request: the text a server may embed for it, and its search.

    Call it (``prepared()``) to run the search, embedding the query itself when
    the search needs a vector, or give it the query's vector
    (``prepared(vec)``, ``vec`` the embedding of :attr:`query`), with the same hits.
    """

    query: str | None
    """The text whose embedding the search can use; ``None``: it uses none
    (a recall ``as_of``, lexical over the past, or a server without an embedder)."""
    search: Callable[[QueryVector | None], list[dict[str, Any]]]
    start: Callable[[], RecallStage] | None = None
    """The same search in two steps (``None``: not offered): its lexical pass now, and
    whether the rest wants the query's vector (:class:`RecallStage`)."""

    def __call__(self, query_vector: QueryVector | None = None) -> list[dict[str, Any]]:
        return self.search(query_vector)


@dataclass(frozen=True, slots=True)
class RecallStage:
    """A recall stopped after its lexical pass: ``finish(vec)`` gives its hits.

    ``wants_vector`` ``False``: the lexical answer is confident and the rest
    embeds nothing (``vec`` is unused); ``True``: ``vec`` is the query's
    embedding, or ``None`` and the search embeds the query itself.
    """

    wants_vector: bool
    finish: Callable[[QueryVector | None], list[dict[str, Any]]]


def _now_rfc3339() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat()


def _parse_time(raw: str, field: str) -> _dt.datetime:
    """``raw``, an RFC 3339 timestamp with a zone, as an aware datetime; 400 otherwise.

    RFC 3339 (5.6) only: :meth:`datetime.fromisoformat` also reads ISO 8601's
    other forms (``20260421T103000Z``, week dates, no seconds), which an
    episode would then keep as sent. ``T`` and ``Z`` may be ``t`` and ``z``,
    and a space may separate date and time, as RFC 3339 allows.
    """
    try:
        if _RFC3339.fullmatch(raw) is None:
            raise ValueError(raw)
        when = _dt.datetime.fromisoformat(raw.upper())
    except ValueError:
        raise invalid_request(f"{field}: {raw[:64]!r} is not an RFC 3339 timestamp") from None
    if when.tzinfo is None:
        raise invalid_request(f"{field}: an RFC 3339 timestamp needs a time zone (Z or +hh:mm)")
    return when


class Verbs:
    """The five verbs over one :class:`Memory` (which needs a journal).

    :param confirmations: seals dry-run receipts; a fresh random key by default.
    :param wall_ms: the server's wall clock in milliseconds (snapshot range checks).
    """

    def __init__(
        self,
        memory: Memory,
        *,
        confirmations: Confirmations | None = None,
        wall_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        if memory.journal is None:
            raise ValueError("the HTTP adapter needs a Memory with a journal (a folder or a DSN)")
        self.memory = memory
        self.journal: Journal = memory.journal
        self.store: Store = memory.store
        self.confirmations = confirmations if confirmations is not None else Confirmations()
        self._wall_ms = wall_ms
        self._stamps = StampCache(self.store, self.journal)

    # ------------------------------------------------------------------ ingest

    def ingest(self, tenant: str, req: IngestRequest) -> dict[str, Any]:
        """Store one episode and its chunks in one transaction; ``{lsn, queue_lag_warn}``.

        :raises ProtocolError: 400 for a bad id or t_ref, or content that cuts
            into more than MAX_EPISODE_CHUNKS chunks; 413 for content or
            metadata over their limits. Nothing is written then.
        """
        if not req.source.strip():
            raise invalid_request("source: must not be blank")
        size = len(req.content.encode("utf-8"))
        if size > MAX_CONTENT_BYTES:
            raise payload_too_large("content", size, MAX_CONTENT_BYTES)
        metadata = req.metadata or {}
        meta_size = len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode())
        if meta_size > MAX_METADATA_BYTES:
            raise payload_too_large("metadata", meta_size, MAX_METADATA_BYTES)
        if req.id is None:
            ulid = str(ULID())
        else:
            parsed = parse_ulid(req.id)
            if parsed is None:
                raise invalid_request(f"id: {req.id[:64]!r} is not a 26-character ULID")
            ulid = parsed
        if req.t_ref is not None:  # kept as sent: GET /v1/episode answers the bytes ingest wrote
            _parse_time(req.t_ref, "t_ref")
            t_ref = req.t_ref
        else:
            t_ref = _now_rfc3339()
        items = episode_items(tenant, ulid, req.source, req.content, t_ref=t_ref, metadata=metadata)
        if len(items) - 1 > MAX_EPISODE_CHUNKS:  # the episode's chunk list must fit its data
            raise invalid_request(
                f"content: cuts into {len(items) - 1} chunks; at most {MAX_EPISODE_CHUNKS} "
                "(each heading starts one): use fewer headings, or split the episode"
            )
        store = self.store

        def store_episode() -> None:  # one step: replicas never both replace one episode
            old = store.get(items[0].id)
            if old is not None:  # a re-ingest replaces the episode's chunks
                for cid in episode_chunk_ids(old):
                    store.delete(cid)
            for item in items:
                store.upsert(item)

        try:
            self.memory.atomically(store_episode)
        except InvalidItemError as e:  # the engine's own rules: the episode, not the server
            raise invalid_request(f"the episode cannot be stored: {e}") from None
        lsn = self.journal.last_lsn() or self.journal.head()
        return {"lsn": lsn.to_json(), "queue_lag_warn": False}

    # ------------------------------------------------------------------ recall

    def prepare_recall(self, tenant: str, req: RecallRequest) -> PreparedRecall:
        """Check a recall request (400s happen here) and return the search to run.

        Split in two so that a streaming answer can refuse a bad request with a
        status before its stream starts, and so that a server can embed the
        queries of concurrent recalls in one call
        (:class:`~memstore.web.batching.QueryBatcher`) before running each.
        """
        if not req.query.strip():  # the engine's rule: Memory.search refuses it too
            raise invalid_request("query: must not be blank: search for some words")
        expr: Expr | None = None
        if req.filter is not None and req.filter.strip():
            try:
                expr = parse_filter(req.filter)
            except FilterSyntaxError as e:
                raise invalid_filter(e) from None
        visible = _visibility(tenant, expr)
        if req.as_of is not None:
            at = Lsn.from_datetime(_parse_time(req.as_of, "as_of"))  # any moment
            return PreparedRecall(None, lambda _: self._recall_as_of(tenant, req, at, visible))
        if req.mode == "graph" and not hasattr(self.store, "traverse_within"):
            raise GRAPH_UNAVAILABLE.error("this server cannot traverse links")
        filtered = expr is not None
        return PreparedRecall(
            req.query if self.memory.cells is not None else None,
            lambda vec: self._recall_staged(tenant, req, visible, filtered).finish(vec),
            lambda: self._recall_staged(tenant, req, visible, filtered),
        )

    def recall(self, tenant: str, req: RecallRequest) -> list[dict[str, Any]]:
        """The hits of a recall request, best first."""
        return self.prepare_recall(tenant, req)()

    def _searcher(self, visible: Callable[[Item, str], bool], filtered: bool) -> Searcher:
        if filtered:
            return self.memory.searcher.with_(lambda cfg: setattr(cfg, "visible", visible))
        # No filter: the searcher's own partition rule, which the indexes apply
        # themselves (much cheaper than a predicate over read items). It also
        # admits untagged and shared items, which the server never writes; a
        # program sharing the folder might, so they are dropped by _hits.
        return self.memory.searcher

    def _recall_staged(
        self,
        tenant: str,
        req: RecallRequest,
        visible: Callable[[Item, str], bool],
        filtered: bool,
    ) -> RecallStage:
        """A recall in two steps (:meth:`Searcher.hybrid_search_staged`): the lexical pass now,
        ``finish(vec)`` for its hits."""
        searcher = self._searcher(visible, filtered)
        staged = searcher.hybrid_search_staged(
            req.query,
            kind=KIND_CHUNK,
            partition=tenant,
            limit=req.k,
            min_relevance=req.min_relevance,
        )

        def finish(vec: QueryVector | None) -> list[dict[str, Any]]:
            with borrowed_results():  # rendered below at once: no copies of the hits
                results = staged.finish(vec)
            return self._hits(tenant, req, visible, filtered, searcher, results)

        return RecallStage(staged.wants_vector, finish)

    def _hits(
        self,
        tenant: str,
        req: RecallRequest,
        visible: Callable[[Item, str], bool],
        filtered: bool,
        searcher: Searcher,
        results: list[SearchResult],
    ) -> list[dict[str, Any]]:
        """A search's results as the recall's hits (and, in mode graph, what links reach)."""
        results, hits = recall_hits(
            results,
            tenant,
            lambda items: self._valid_froms(tenant, items),
            owned_only=not filtered,
            rerank_applied=not searcher.config.no_shaping,
            source_op=SOURCE_OP_RERANKED,
        )
        if req.mode == "graph":
            hits, complete = self._graph(tenant, results, hits, req.k, visible)
            for hit in hits:
                hit["graph_complete"] = complete
        return hits

    def _graph(
        self,
        tenant: str,
        anchors: list[SearchResult],
        hits: list[dict[str, Any]],
        k: int,
        visible: Callable[[Item, str], bool],
    ) -> tuple[list[dict[str, Any]], bool]:
        """The anchors, then what their links reach (best activation first), ``k`` in all,
        and whether the walk reached everything (at most ``CONTEXT_REACH`` items)."""
        top = anchors[0].score if anchors else 0.0
        room = k - len(hits)

        def keep(item: Item) -> bool:  # only the hits are copied
            return room > 0 and item.kind == KIND_CHUNK and visible(item, tenant)

        reached, complete = self.store.traverse_within(
            [r.item.id for r in anchors],
            GRAPH_DEPTH,
            reach=CONTEXT_REACH,
            keep=keep,
            limit=max(room, 1),
            through=lambda item: owned_by(item, tenant),  # the tenant's graph, no other's
        )
        linked = [(s.item, top * s.score) for s in reached]
        stamps = self._valid_froms(tenant, [item for item, _ in linked])
        for (item, score), stamp in zip(linked, stamps, strict=True):
            hits.append(self._hit(item, score, False, SOURCE_OP_GRAPH, stamp))
        return hits[:k], complete

    def _hit(
        self,
        item: Item,
        score: float,
        shaped: bool,
        op: str,
        valid_from: Hlc | None,
        relevance: float | None = None,
    ) -> dict[str, Any]:
        return hit_body(
            item,
            score,
            valid_from=valid_from,
            rerank_applied=shaped,
            source_op=op,
            relevance=relevance,
        )

    def _valid_froms(self, tenant: str, items: list[Item]) -> list[Hlc | None]:
        """The stamp of each item's current version: remembered, or read in one call
        (:class:`~memstore.protocol.stamps.StampCache`)."""
        return self._stamps.stamps(tenant, [item.id for item in items])

    def _recall_as_of(
        self, tenant: str, req: RecallRequest, at: Lsn, visible: Callable[[Item, str], bool]
    ) -> list[dict[str, Any]]:
        """Search the tenant's chunks as they were at ``at``: a throwaway store, lexical only."""
        then = [
            it
            for it in self.journal.as_of(at, partition=tenant)
            if it.kind == KIND_CHUNK and visible(it, tenant)
        ]
        past = Store()
        past.restore(then)

        def over_the_past(cfg: SearchConfig) -> None:
            cfg.store, cfg.cells, cfg.visible = past, None, visible

        searcher = self.memory.searcher.with_(over_the_past)
        results = searcher.hybrid_search(
            req.query,
            kind=KIND_CHUNK,
            partition=tenant,
            limit=req.k,
            min_relevance=req.min_relevance,
        )
        hits = []
        for r in results:
            version = next(
                (v for v in reversed(self.journal.history(r.item.id)) if v.visible_at(at)), None
            )
            hits.append(
                hit_body(
                    r.item,
                    r.score,
                    valid_from=version.valid_from if version else None,
                    valid_to=version.valid_to if version else None,
                    rerank_applied=True,
                    source_op=SOURCE_OP_AS_OF,
                    relevance=r.relevance,
                )
            )
        return hits

    # ------------------------------------------------------------------ forget

    def forget(self, tenant: str, req: ForgetRequest) -> dict[str, Any]:
        """Soft delete, dry run or confirmed hard delete; the seed's ForgetReceipt.

        A forget first applies every write on record (:func:`~memstore.catchup.catch_up`):
        on replicas sharing a PostgreSQL journal, an episode another replica
        acknowledged a moment ago is found and forgotten, not reported as
        nothing to forget while it stays.

        :raises ProtocolError: 428 / 400 for a hard delete without a valid
            confirmation token (checked before anything is touched); 503 when
            this replica is still behind the others after ``CATCH_UP_SECONDS``
            (nothing is touched: send it again).
        """
        target = _canonical_target(req)
        if not catch_up(self.memory):
            raise UNAVAILABLE.error(
                f"this server has not applied the other servers' latest writes within "
                f"{CATCH_UP_SECONDS:g} s; nothing was forgotten: send the request again",
                headers={"Retry-After": "1"},
            )
        if req.dry_run:
            ids = (
                self._live_targets(tenant, req) if not req.hard else self._all_targets(tenant, req)
            )
            receipt = _receipt(target, [], ids, self.journal.head(), preview=True)
            return self.confirmations.seal(tenant, receipt)
        if req.hard:
            # A failure inside erases nothing, and gives the receipt back for a retry.
            with self.confirmations.redeeming(tenant, target, req.confirmation_token):
                ids = self._all_targets(tenant, req)
                # The erasure and its audit record in one transaction: both or neither.
                purged = self.journal.purge(
                    ids, record=lambda gone: audit_item(tenant, target, gone, hard=True)
                )
                if not purged:  # nothing to erase: the audit record alone
                    self.store.upsert(audit_item(tenant, target, [], hard=True))
            lsn = self.journal.last_lsn() or self.journal.head()
            return _receipt(target, [], purged, lsn, preview=False)

        def soft_delete() -> list[str]:  # one step: of two replicas, one deletes, one finds none
            ids = self._live_targets(tenant, req)
            gone = [i for i in ids if self.store.delete(i)]
            self.store.upsert(audit_item(tenant, target, gone, hard=False))
            return gone

        gone = self.memory.atomically(soft_delete)
        lsn = self.journal.last_lsn() or self.journal.head()
        return _receipt(target, gone, [], lsn, preview=False)

    def _live_targets(self, tenant: str, req: ForgetRequest) -> list[str]:
        """The tenant's live episode and chunk ids a forget target names."""
        target = req.target
        if isinstance(target, IdTarget):
            ulid = parse_ulid(target.Id)
            if ulid is None:
                return []
            out: list[str] = []
            ep = self.store.get(episode_id(tenant, ulid))
            if ep is not None and owned_by(ep, tenant):
                out.append(ep.id)
                out.extend(c for c in episode_chunk_ids(ep) if self.store.get(c) is not None)
            ch = self.store.get(chunk_id(tenant, ulid))
            if ch is not None and owned_by(ch, tenant):
                out.append(ch.id)
            return out
        if isinstance(target, ScopeTarget):
            prefix = target.Scope.BySource
            return [
                it.id
                for it in self.store.items()
                if _primitive_of(it, tenant) and it.data.get("source", "").startswith(prefix)
            ]
        assert isinstance(target, BeforeTarget)
        at = _before_lsn(target)
        then = {
            it.id for it in self.journal.as_of(at, partition=tenant) if _primitive_of(it, tenant)
        }
        return [i for i in sorted(then) if self.store.get(i) is not None]

    def _all_targets(self, tenant: str, req: ForgetRequest) -> list[str]:
        """The ids a hard delete erases: the live targets and those only the journal holds.

        An episode brings the chunks of every version on record (a re-ingest
        replaced the earlier ones, which as_of and snapshots still show);
        ``Before`` takes what was on record by then, soft-deleted or not.
        """
        target = req.target
        if isinstance(target, IdTarget):
            ulid = parse_ulid(target.Id)
            if ulid is None:
                return []
            ids: set[str] = set()
            for item_id in (episode_id(tenant, ulid), chunk_id(tenant, ulid)):
                versions = self.journal.history(item_id)
                if versions:
                    ids.add(item_id)
                    ids.update(self._chunks_on_record(versions))
            return sorted(ids)
        if isinstance(target, ScopeTarget):
            prefix = target.Scope.BySource
            # Soft-deleted items are still on record: match them by their last state.
            on_record = self.journal.matching(
                lambda it: (
                    _primitive_of(it, tenant) and it.data.get("source", "").startswith(prefix)
                )
            )
            return sorted(set(on_record) | set(self._live_targets(tenant, req)))
        assert isinstance(target, BeforeTarget)
        return self._on_record_by(tenant, _before_lsn(target))

    def _on_record_by(self, tenant: str, at: Lsn) -> list[str]:
        """The tenant's episode and chunk ids with a version written at or before ``at``.

        What existed at ``at`` and what was soft-deleted before it, so a soft
        forget then a hard one erases the past. Reads every row of the journal.
        """
        on_record = self.journal.matching(lambda it: _primitive_of(it, tenant))
        firsts = ((i, self.journal.history(i)[:1]) for i in on_record)
        return [i for i, first in firsts if first and first[0].lsn <= at]

    def _chunks_on_record(self, versions: list[Version]) -> set[str]:
        """The chunk ids any episode version in ``versions`` lists, if the journal holds them."""
        named = {
            c
            for v in versions
            if v.item is not None and v.item.kind == KIND_EPISODE
            for c in episode_chunk_ids(v.item)
        }
        return {c for c in named if self.journal.history(c)}

    # ------------------------------------------------------------- snapshot

    def snapshot(self, tenant: str, raw_lsn: str) -> Iterator[str]:
        """Check ``raw_lsn`` (400 / 404 here) and return the NDJSON lines of the tenant's state."""
        m = _LSN_FORM.fullmatch(raw_lsn)
        if m is None:
            raise invalid_lsn(raw_lsn)
        # The engine's clock: the wall clock, or the newest position on record
        # when that is later (written by a replica whose clock runs ahead).
        now = max(self._wall_ms(), self.journal.head().wall_ms)
        if int(m.group(1)) > now:  # the future, however far (even past the Lsn range)
            raise snapshot_out_of_range(int(m.group(1)), now)
        counter, node = int(m.group(2)), m.group(3)
        if counter > MAX_WIRE_COUNTER or (node is not None and int(node) > MAX_NODE_ID):
            raise invalid_lsn(raw_lsn)
        return self._snapshot_lines(tenant, _wire_lsn(int(m.group(1)), counter))

    def _snapshot_lines(self, tenant: str, at: Lsn) -> Iterator[str]:
        """One JSON line per primitive; ValueError (a 500) rather than a ``NaN`` no parser reads."""
        for version in self.journal.snapshot(at, partition=tenant):
            if version.item is None or not owned_by(version.item, tenant):
                continue
            record = snapshot_record(version)
            if record is not None:
                yield _json_line(record)

    # -------------------------------------------------------------- episode

    def episode(self, tenant: str, raw_id: str) -> dict[str, Any]:
        """The stored episode; 400 ``invalid_episode_id``, 404 ``episode_not_found``."""
        ulid = parse_ulid(raw_id) if len(raw_id) == 26 else None
        if ulid is None:
            raise invalid_episode_id(raw_id)
        item = self.store.get(episode_id(tenant, ulid))
        if item is None or item.kind != KIND_EPISODE or not owned_by(item, tenant):
            raise episode_not_found(ulid)
        return episode_body(item)


def _primitive_of(item: Item, tenant: str) -> bool:
    return item.kind in (KIND_CHUNK, KIND_EPISODE) and owned_by(item, tenant)


def _visibility(tenant: str, expr: Expr | None) -> Callable[[Item, str], bool]:
    """The search visibility of a recall: the tenant's own items only, then the filter."""

    def visible(item: Item, partition: str) -> bool:
        if partition != tenant or not owned_by(item, tenant):
            return False
        return expr is None or evaluate(expr, filter_record(item))

    return visible


def _json_line(record: Mapping[str, Any]) -> str:
    """``record`` as one line of NDJSON (:func:`~memstore.web.lines.line_safe`: one line for
    every line reader); ValueError for a ``NaN`` or infinity in it."""
    text = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return line_safe(text) + "\n"


def _wire_lsn(wall_ms: int, counter: int) -> Lsn:
    """The position a wire Lsn names: a u64 ``wall_ms``, a u32 counter (:data:`MAX_WIRE_COUNTER`).

    The journal's counters stop at ``MAX_COUNTER``: no position lies between
    ``(w, MAX_COUNTER)`` and ``(w + 1, 0)``, so a larger counter names the
    same state as ``MAX_COUNTER``; likewise a ``wall_ms`` past the journal's
    range names the state after every position (:data:`LAST_LSN`).
    """
    if wall_ms > LAST_LSN.wall_ms:
        return LAST_LSN
    return Lsn.of(wall_ms, min(counter, MAX_COUNTER))


def _before_lsn(target: BeforeTarget) -> Lsn:
    """The Lsn a ``Before`` target names (the model bounds it to the seed's u64 and u32)."""
    return _wire_lsn(target.Before.wall_ms, target.Before.counter)


def _canonical_target(req: ForgetRequest) -> dict[str, Any]:
    """The target as receipts carry it (an Id upper-cased, as ULIDs are canonically)."""
    target = req.target_json()
    if isinstance(req.target, IdTarget):
        ulid = parse_ulid(req.target.Id) if len(req.target.Id) == 26 else None
        if ulid is None:
            raise invalid_request(f"target.Id: {req.target.Id[:64]!r} is not a 26-character ULID")
        target = {"Id": ulid}
    return target


def _receipt(
    target: Mapping[str, Any], closed: list[str], purged: list[str], lsn: Lsn, *, preview: bool
) -> dict[str, Any]:
    """The seed's ForgetReceipt. A preview counts what a delete would remove as rows_deleted."""
    touched = closed or purged
    return {
        "target": dict(target),
        "indices_affected": list(INDICES) if touched else [],
        "rows_written": len(closed),
        "rows_deleted": len(purged),
        "audit_lsn": lsn.to_json(),
        "preview": preview,
    }
