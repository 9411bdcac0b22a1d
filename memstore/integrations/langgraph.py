"""memstore as a LangGraph store: ``MemstoreStore``, a ``langgraph.store.base.BaseStore``.

LangGraph agents (and LangMem's memory tools) keep long-term memory in a
``BaseStore``. :class:`MemstoreStore` is one that behaves the same on every
journal (in memory, a SQLite folder, a shared PostgreSQL journal), filters with
one documented meaning, and searches with memstore's hybrid ranking (lexical,
semantic, rerank) instead of vectors alone. See ``docs/langgraph.md``.

>>> store = MemstoreStore()
>>> store.put(("users", "alice"), "diet", {"text": "vegetarian, cooks for two"})
>>> store.get(("users", "alice"), "diet").value
{'text': 'vegetarian, cooks for two'}
>>> [hit.key for hit in store.search(("users",), query="vegetarian")]
['diet']
>>> store.list_namespaces()
[('users', 'alice')]
>>> store.close()

Needs ``pip install "memstore-engine[langgraph]"``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as _dt
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
    )
except ModuleNotFoundError as _missing:  # pragma: no cover - exercised without the extra
    raise ImportError(
        f"memstore.integrations.langgraph needs LangGraph ({_missing.name} is missing): "
        'pip install "memstore-engine[langgraph]"'
    ) from None

import numpy as np

from memstore import item as _engine_item
from memstore._offloop import run_settled
from memstore.errors import MemstoreError, ReadOnlyError
from memstore.integrations import _ops
from memstore.integrations import _records as rec
from memstore.integrations._filters import FilterError, check_filter, matches
from memstore.integrations._vectors import (
    EngineEmbedder,
    FieldEmbedder,
    Rows,
    decode_rows,
    encode_rows,
)
from memstore.limits import MAX_RESULTS
from memstore.memory import Memory
from memstore.partitions import encode_labels, within
from memstore.search import SearchConfig
from memstore.tags import PARTITION_ALL

__all__ = [
    "DEFAULT_SWEEP_MINUTES",
    "HYBRID_DEPTH",
    "REFRESH_SLACK",
    "FilterError",
    "MemstoreStore",
    "Ranking",
]

Ranking = Literal["hybrid", "vector"]
DEFAULT_SWEEP_MINUTES: Final = 5.0
"""How often the background sweeper deletes expired items when TTLConfig names no interval."""
REFRESH_SLACK: Final = _dt.timedelta(seconds=1)
"""A read refreshes a TTL only if the deadline moves by more (or by 1% of the TTL if less)."""
HYBRID_DEPTH: Final = MAX_RESULTS
"""How many of a query's candidates the hybrid ranking orders (the rest follow it).

A constant, never a page's ``offset + limit``: the hybrid ranking of the top
``n`` is not the first ``n`` of a deeper one, so a depth that followed the
page would rank every page differently, repeating some items and skipping
others. With one depth, pages are slices of one list. The cost grows with the
candidates, up to this many: some 75 ms to rank 1,000 of 5,000 items, where a
page of 10 used to cost some 8 ms.
"""


@dataclass(frozen=True)
class _Plan:
    """A checked batch's embeddings, computed before its transaction."""

    puts: dict[int, tuple[list[str], Rows | None]]
    """Per put (its position in the batch): its texts and their rows."""
    held: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    """Every text embedded (fields and joined texts) -> its row, lent to the engine."""
    queries: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    """Every search query (as given) -> its unit vector."""

    @classmethod
    def of(
        cls,
        texts: dict[int, list[str]],
        every: list[str],
        rows: Rows,
        queries: dict[str, np.ndarray[Any, Any]],
    ) -> _Plan:
        puts: dict[int, tuple[list[str], Rows | None]] = {}
        at = 0
        for n, ts in texts.items():
            puts[n] = (ts, rows[at : at + len(ts)])
            at += len(ts)
        return cls(puts, dict(zip(every, rows, strict=True)), queries)


_NOTHING_HELD: Final = contextlib.nullcontext()


def _refuse_dsn(memory: object) -> None:
    """Refuse a PostgreSQL DSN where a folder path is expected.

    ``MemstoreStore("postgresql://...")`` would open a local folder named after
    the DSN: every process would write its own copy while believing it shares
    one journal.
    """
    if isinstance(memory, str | os.PathLike) and os.fspath(memory).startswith(
        ("postgresql://", "postgres://")
    ):
        raise MemstoreError(
            "memory= is a folder path, not a PostgreSQL DSN: pass "
            "MemstoreStore(Memory(journal='postgresql://...')) to share a journal"
        )


class MemstoreStore(BaseStore):
    """A LangGraph ``BaseStore`` on a :class:`memstore.Memory`.

    ``memory``: ``None`` keeps everything in memory; a path is a folder made
    durable by the journal (reopen it to find everything again); a
    :class:`~memstore.Memory` is used as it is (a PostgreSQL journal, your own
    embedder), and closing the store leaves it open.

    ``index``: LangGraph's ``IndexConfig``: ``fields`` (JSON paths, ``"$"``
    for the whole value, the default), ``embed`` (a LangChain ``Embeddings``, a
    function of a list of texts, or omitted for memstore's own embedder),
    ``dims``. Without ``index`` a query is matched lexically and hits carry no
    score, as in LangGraph's stores.

    ``ttl``: LangGraph's ``TTLConfig`` (``default_ttl`` and
    ``sweep_interval_minutes`` in minutes, ``refresh_on_read``). An item past
    its deadline is never returned, even before a sweep deletes it. A value
    of the wrong type or range raises :class:`~memstore.errors.InvalidItemError`
    before the memory is opened. On a memory opened read-only
    (``Memory(folder, readonly=True)``) a read serves what it finds without
    refreshing its deadline (the writer's process owns the deadlines), and
    no background sweeper starts: sweeping is the writer's work.

    ``ranking``: ``"hybrid"`` (memstore's ranking, the default) or
    ``"vector"`` (cosine order, as LangGraph's own stores rank).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        memory: Memory | str | os.PathLike[str] | None = None,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        ranking: Ranking = "hybrid",
    ) -> None:
        if ranking not in ("hybrid", "vector"):
            raise MemstoreError(f"ranking={ranking!r}: use 'hybrid' or 'vector'")
        _refuse_dsn(memory)
        self.ranking: Ranking = ranking
        self.ttl_config = _ops.checked_ttl_config(ttl)  # checked before the memory opens
        self.index_config: IndexConfig | None = dict(index) if index else None  # type: ignore[assignment]
        self._fields: FieldEmbedder | None = None
        self._paths: list[tuple[str, str | list[str]]] = []
        given = isinstance(memory, Memory)
        if self.index_config is not None:
            self._fields = _ops.field_embedder(
                self.index_config, memory.cells if isinstance(memory, Memory) else None
            )
            self._paths = _ops.tokenized(self.index_config.get("fields") or [_ops.ROOT])
        self.embeddings: Any = self.index_config.get("embed") if self.index_config else None
        if isinstance(memory, Memory):
            self.memory = memory
        else:
            engine = EngineEmbedder(self._fields) if self._fields is not None else None
            self.memory = Memory(memory, embedder=engine)
        self._engine = self.memory.cells.embedder if self.memory.cells is not None else None
        # A query vector of the index's model is one the engine's semantic channel can use
        # when that channel embeds with the same model (the bridge, or the memory's own).
        self._engine_takes_queries = self._fields is not None and (
            isinstance(self._engine, EngineEmbedder)
            or (self._engine is not None and self.embeddings is None)
        )
        self._owns_memory = not given
        self._lock = threading.RLock()
        self._recs: dict[str, rec.Record] = {}  # item id -> what this store reads of it
        self._ids: dict[str, set[str]] = {}  # partition -> item ids
        self._vectors: dict[tuple[str, Any], np.ndarray[Any, Any]] = {}
        self._closed = False
        self._sweeper: threading.Thread | None = None
        self._sweep_stop = threading.Event()
        self._sweep_done: concurrent.futures.Future[None] | None = None
        self.memory.store.add_change_listener(self._on_change)
        for it in self.memory.store.items():
            if (r := rec.read(it)) is not None:
                self._note(r)
        if (
            self.ttl_config
            and self.ttl_config.get("sweep_interval_minutes")
            and not self.memory.readonly
        ):
            self.start_ttl_sweeper()

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Stop the sweeper, stop following the memory, close it if this store opened it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.stop_ttl_sweeper()
        self.memory.store.remove_change_listener(self._on_change)
        if self._owns_memory:
            self.memory.close()

    def __enter__(self) -> MemstoreStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemstoreStore({self.memory!r}, ranking={self.ranking!r})"

    # ------------------------------------------------------------ batches

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``GetOp``, ``PutOp``, ``SearchOp`` and ``ListNamespacesOp`` in order.

        Every op is checked first (namespaces, filters, values) and the texts of
        every put, and the queries of every search, are embedded in one call
        each, so a bad op or an embedding failure raises before any of the
        batch runs. The ops then run in one engine transaction: a later op sees
        what an earlier put wrote, and a put the engine refuses (a value past
        its size limits, a namespace too long for a partition) undoes the whole
        batch, in the store and in the journal.
        """
        todo = self._checked(ops)
        return self._execute(todo, self._plan(todo))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch`, the engine's work in a worker thread.

        With an index whose ``embed`` has coroutines (a LangChain ``Embeddings``,
        or an async embedding function), the embedding calls are awaited on the
        event loop, as LangGraph's stores do. A cancelled ``abatch`` settles
        before the :class:`asyncio.CancelledError` reaches the caller: the batch
        was written whole or not at all, and nothing of it lands later.
        """
        todo = self._checked(ops)
        if self._fields is not None and self._fields.awaitable:
            plan = await self._aplan(todo)
            return await run_settled(self._execute, todo, plan)
        return await run_settled(lambda: self._execute(todo, self._plan(todo)))

    def _checked(self, ops: Iterable[Op]) -> list[Op]:
        todo = list(ops)
        for op in todo:
            _ops.check_op(op)
        self._check_open()
        return todo

    def _execute(self, todo: list[Op], plan: _Plan) -> list[Result]:
        """Run checked ops as one engine step (``plan``: their embeddings).

        One commit, or none, under :meth:`Memory.atomically`: on a PostgreSQL
        journal another process wrote one of the batch's items to since this
        one read it, the batch runs again on the caught-up state, so a read
        that refreshes a TTL never writes back a value another process replaced.
        """
        out: list[Result] = []

        def step() -> list[Result]:
            if out:  # run again after a conflict: forget what the undone run noted
                self._resync(_ops.touched(todo, out))
                out.clear()
            for n, op in enumerate(todo):
                out.append(self._run(op, n, plan))
            return list(out)

        try:
            with self._holding(plan.held):  # the rows, lent until the group commits
                return self.memory.atomically(step)
        except BaseException:
            self._resync(_ops.touched(todo, out))  # what this store read of the undone writes
            raise

    def _holding(self, held: dict[str, np.ndarray[Any, Any]]) -> Any:
        """Lend the batch's rows to the engine's index while it writes (the bridge only)."""
        if held and isinstance(self._engine, EngineEmbedder):
            return self._engine.holding(held)
        return _NOTHING_HELD

    def _run(self, op: Op, n: int, plan: _Plan) -> Result:
        """One checked op, the ``n``-th of its batch."""
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            texts, rows = plan.puts.get(n, ([], None))
            self._put(op, texts, rows)
            return None
        if isinstance(op, SearchOp):
            return self._search(op, plan.queries)
        assert isinstance(op, ListNamespacesOp)
        return self._list_namespaces(op)

    # ------------------------------------------------------------ the ops

    def _get(self, op: GetOp) -> Item | None:
        part = encode_labels(op.namespace)
        found = self._live(rec.record_id(part, op.key), self._now())
        if found is None:
            return None
        if op.refresh_ttl:
            found = self._refresh(found)
        return _ops.item(found)

    def _plan_texts(self, todo: list[Op]) -> tuple[dict[int, list[str]], list[str], list[str]]:
        """Each put's texts; every text to embed (fields, then joined texts); the queries."""
        texts = {
            n: self._texts(op)
            for n, op in enumerate(todo)
            if isinstance(op, PutOp) and op.value is not None
        }
        if self._fields is None:
            return texts, [], []
        every = [t for ts in texts.values() for t in ts]
        # The engine's index embeds an item's content: its texts joined (and capped).
        joined = {rec.search_text(ts) for ts in texts.values() if ts} - set(every)
        # Each query as given, as LangGraph's stores embed it: the score is its cosine.
        queries = {op.query for op in todo if isinstance(op, SearchOp) and op.query}
        return texts, every + sorted(joined - {""}), sorted(queries)

    def _plan(self, todo: list[Op]) -> _Plan:
        """What a batch embeds, embedded before it runs (one call for its texts)."""
        texts, every, queries = self._plan_texts(todo)
        if self._fields is None:
            return _Plan({n: (t, None) for n, t in texts.items()})
        rows = self._fields.documents(every)
        vectors = {q: self._fields.query(q) for q in queries}
        return _Plan.of(texts, every, rows, vectors)

    async def _aplan(self, todo: list[Op]) -> _Plan:
        """:meth:`_plan` through the model's coroutines, on the event loop."""
        assert self._fields is not None
        texts, every, queries = self._plan_texts(todo)
        rows = await self._fields.adocuments(every)
        vectors = {q: await self._fields.aquery(q) for q in queries}
        return _Plan.of(texts, every, rows, vectors)

    def _put(self, op: PutOp, texts: list[str], rows: Rows | None) -> None:
        part = encode_labels(op.namespace)
        id = rec.record_id(part, op.key)
        if op.value is None:
            self.memory.delete(id)
            self._forget(id)
            return
        data = {
            rec.DATA_KEY: op.key,
            rec.DATA_VALUE: rec.encode_value(op.value),
            rec.DATA_INDEXED: "1" if texts else "0",
        }
        minutes = rec.ttl_minutes(op.ttl)
        deadline = None
        if minutes is not None:
            data[rec.DATA_TTL] = repr(minutes)
            deadline = rec.deadline(self._now(), minutes)
        if texts and rows is not None:
            data[rec.DATA_VECTORS] = encode_rows(rows)
            if isinstance(self._engine, EngineEmbedder):
                self._engine.remember(texts, rows)
        content = rec.search_text(texts) if texts else ""
        item = _engine_item.Item(
            id=id,
            kind=rec.KIND,
            content=content or op.key[:1000] or "-",
            data=data,
            stale_after=deadline,
            no_embed=not content,
        )
        stored = self.memory.add(item, partition=part, dedup=False)
        with self._lock:
            seen = self._recs.get(id)
        if (  # the listener has not run (a write inside an open store batch)
            seen is None
            or seen.updated_at != stored.updated_at
            or seen.value_json != data[rec.DATA_VALUE]
        ):
            self._note(rec.Record.of(stored))

    def _texts(self, op: PutOp) -> list[str]:
        """The texts a put makes searchable: the indexed fields, or every scalar without index."""
        if op.index is False:
            return []
        value = op.value or {}
        if self.index_config is None:
            text = rec.search_text(rec.leaf_text(value))
            return [text] if text else []
        paths = self._paths if op.index is None else _ops.tokenized(op.index)
        out: list[str] = []
        for _, tokens in paths:
            out.extend(t for t in get_text_at_path(value, tokens) if t.strip())
        return out

    def _search(
        self, op: SearchOp, vectors: Mapping[str, np.ndarray[Any, Any]]
    ) -> list[SearchItem]:
        now = self._now()
        prefix = encode_labels(op.namespace_prefix) if op.namespace_prefix else ""
        cands = [r for r in self._candidates(prefix, now) if matches(r.value, op.filter)]
        cands.sort(key=rec.Record.order)
        limit, offset = op.limit, op.offset  # never negative: _ops.check_op
        scores: dict[str, float] = {}
        if op.query:  # embedded as given; blank words leave the ranking to the scores
            vector = vectors.get(op.query)
            if vector is not None:
                scores = self._scores(vector, cands)
            cands = self._rank(op.query.strip(), cands, scores, vector)
        page = cands[offset : offset + limit]  # a slice of one ranking, whatever the page
        if op.refresh_ttl:
            page = [self._refresh(it) for it in page]
        return [_ops.search_item(r, scores.get(r.id)) for r in page]

    def _rank(
        self,
        query: str,
        cands: list[rec.Record],
        scores: dict[str, float],
        vector: np.ndarray[Any, Any] | None,
    ) -> list[rec.Record]:
        """Every candidate once, in one order that depends on the query and candidates only.

        The hybrid hits first (its best :data:`HYBRID_DEPTH`), then the rest by
        score (cosine, highest first), then the unscored in ``cands``' order.
        """
        head: list[rec.Record] = []
        if self.ranking == "hybrid" and query:
            head = self._hybrid(query, cands, HYBRID_DEPTH, vector)
        taken = {it.id for it in head}
        rest = [it for it in cands if it.id not in taken]
        scored = sorted((it for it in rest if it.id in scores), key=lambda it: -scores[it.id])
        unscored = [it for it in rest if it.id not in scores]
        return head + scored + unscored

    def _hybrid(
        self,
        query: str,
        cands: list[rec.Record],
        depth: int,
        vector: np.ndarray[Any, Any] | None,
    ) -> list[rec.Record]:
        """The indexed candidates the hybrid search finds, best first (at most ``depth``).

        ``vector``: the query's vector from the index's model, which the engine's
        semantic channel uses instead of embedding the query again when it
        embeds with the same model.
        """
        eligible = {r.id: r for r in cands if r.indexed}
        if not eligible:
            return []
        depth = min(depth, len(eligible))  # follows the candidates, never the page

        def only(cfg: SearchConfig) -> None:
            cfg.visible = lambda it, _p: it.id in eligible
            cfg.doc_visible = lambda e, _p: e.id in eligible

        searcher = self.memory.searcher.with_(only)
        hits = searcher.hybrid_search(
            query,
            "",
            "",
            PARTITION_ALL,
            depth,
            caller="langgraph",
            query_vector=vector if self._engine_takes_queries else None,
        )
        return [eligible[h.item.id] for h in hits if h.item.id in eligible]

    def _scores(self, q: np.ndarray[Any, Any], cands: list[rec.Record]) -> dict[str, float]:
        """Cosine similarity of the query's unit vector ``q`` with each candidate's best field."""
        out: dict[str, float] = {}
        for it in cands:
            rows = self._rows(it)
            if rows is not None and len(rows):
                out[it.id] = float(np.max(rows @ q))
        return out

    def _rows(self, it: rec.Record) -> np.ndarray[Any, Any] | None:
        text = it.vectors
        if text is None or self._fields is None:
            return None
        key = (it.id, it.updated_at)
        rows = self._vectors.get(key)
        if rows is None:
            try:
                rows = decode_rows(text, self._fields.dims)
            except ValueError:
                return None  # vectors of another model (dims changed): unscored
            if len(self._vectors) > 100_000:
                self._vectors.clear()
            self._vectors[key] = rows
        return rows

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        now = self._now()
        with self._lock:
            held = [
                r.namespace
                for ids in self._ids.values()
                if (r := next((x for id in ids if (x := self._recs[id]).live(now)), None))
            ]
        names = [
            ns for ns in held if all(_ops.does_match(c, ns) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            names = sorted({ns[: op.max_depth] for ns in names})
        else:
            names.sort()
        offset, limit = op.offset, op.limit  # never negative: _ops.check_op
        return names[offset : offset + limit]

    # -------------------------------------------------------------- TTL

    def sweep_ttl(self) -> int:
        """Delete every item past its TTL deadline now; how many were deleted."""
        self._check_open()
        now = self._now()
        with self._lock:
            due = [id for id, r in self._recs.items() if not r.live(now)]
        gone = 0
        for id in due:

            def expire(id: str = id) -> bool:
                # Look and delete as one step: a value another process put
                # meanwhile (with a new deadline, or none) is seen and kept.
                it = self.memory.store.get(id)
                r = rec.read(it) if it is not None else None
                return r is not None and not r.live(now) and self.memory.delete(id)

            gone += self.memory.atomically(expire)
            self._resync([id])
        return gone

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items in a background thread until :meth:`stop_ttl_sweeper`.

        The interval is ``sweep_interval_minutes``, else the TTLConfig's, else
        :data:`DEFAULT_SWEEP_MINUTES`: a positive number of minutes (anything
        else raises :class:`~memstore.errors.InvalidItemError` and starts
        nothing). Returns a future that completes when the sweeper stops; a
        second call returns the running sweeper's future.

        :raises ReadOnlyError: the memory was opened read-only (sweeping
            deletes: the writer's process sweeps).
        """
        if self.memory.readonly:
            raise ReadOnlyError(
                "this MemstoreStore's memory was opened read-only (readonly=True): it "
                "cannot sweep expired items; the process that writes the folder sweeps them"
            )
        with self._lock:
            if self._sweeper is not None and self._sweep_done is not None:
                return self._sweep_done
            minutes = sweep_interval_minutes
            if minutes is None and self.ttl_config:
                minutes = self.ttl_config.get("sweep_interval_minutes")
            interval = _ops.sweep_seconds(minutes or DEFAULT_SWEEP_MINUTES)
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._sweep_stop.clear()

            def run() -> None:
                try:
                    while not self._sweep_stop.wait(interval):
                        try:
                            self.sweep_ttl()
                        except MemstoreError:
                            if self._closed:
                                break
                            raise
                finally:
                    done.set_result(None)

            self._sweep_done = done
            self._sweeper = threading.Thread(target=run, name="memstore-ttl-sweeper", daemon=True)
            self._sweeper.start()
            return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; whether it stopped within ``timeout`` seconds."""
        with self._lock:
            thread, self._sweeper = self._sweeper, None
        if thread is None:
            return True
        self._sweep_stop.set()
        thread.join(timeout)
        return not thread.is_alive()

    # --------------------------------------------------- what no LangGraph store has

    def as_of(
        self,
        when: Any,
        namespace_prefix: Sequence[str] = (),
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Item]:
        """The items as they were at ``when`` (an aware datetime, an ISO string or an LSN).

        Needs a journal (a folder or a PostgreSQL ``Memory``). Same order and
        filter rules as a search without a query. TTLs are not applied: an item
        is listed as it was stored.
        """
        check_filter(filter)
        prefix = _ops.prefix(namespace_prefix)
        found = [
            r
            for r in (rec.read(it) for it in self.memory.as_of(when))
            if r is not None and within(r.partition, prefix) and matches(r.value, filter)
        ]
        found.sort(key=rec.Record.order)
        return [_ops.item(r) for r in found]

    def history(self, namespace: Sequence[str], key: str) -> list[Item | None]:
        """Every version of one item, oldest first; a deletion is ``None``.

        Needs a journal. TTL refreshes are versions too (the value is unchanged).
        """
        ns = _ops.namespace(namespace)
        out: list[Item | None] = []
        for v in self.memory.history(rec.record_id(encode_labels(ns), key)):
            r = rec.read(v.item) if v.item is not None else None
            out.append(_ops.item(r) if r is not None else None)
        return out

    # ------------------------------------------------------------ helpers

    def _now(self) -> _dt.datetime:
        return self.memory.store.config.clock()

    def _check_open(self) -> None:
        if self._closed:
            raise MemstoreError("this MemstoreStore is closed")

    def _note(self, r: rec.Record) -> None:
        with self._lock:
            old = self._recs.get(r.id)
            if old is not None and old.updated_at > r.updated_at:
                return  # a late notice of an older version
            if old is not None and old.partition != r.partition:
                self._ids.get(old.partition, set()).discard(r.id)
            self._recs[r.id] = r
            self._ids.setdefault(r.partition, set()).add(r.id)

    def _resync(self, ids: Iterable[str]) -> None:
        """Read ``ids`` again from the memory: after a rolled-back batch, what is kept."""
        for id in ids:
            it = self.memory.store.get(id)
            r = rec.read(it) if it is not None else None
            with self._lock:
                self._forget(id)
                if r is not None:
                    self._note(r)

    def _forget(self, id: str) -> None:
        with self._lock:
            old = self._recs.pop(id, None)
            if old is not None:
                ids = self._ids.get(old.partition)
                if ids is not None:
                    ids.discard(id)
                    if not ids:
                        del self._ids[old.partition]

    def _on_change(self, op: str, item: _engine_item.Item | None, id: str, kind: str) -> None:
        """Follow every writer of the memory (another process's writes included)."""
        if kind != rec.KIND:
            return
        r = rec.read(item) if op == "upsert" and item is not None else None
        if r is not None:
            self._note(r)
        else:
            self._forget(id)

    def _candidates(self, prefix: str, now: _dt.datetime) -> list[rec.Record]:
        """The live records under a namespace prefix (no engine read, no JSON parse)."""
        with self._lock:
            return [
                r
                for part, ids in self._ids.items()
                if within(part, prefix)
                for id in ids
                if (r := self._recs[id]).live(now)
            ]

    def _live(self, id: str, now: _dt.datetime) -> rec.Record | None:
        with self._lock:
            r = self._recs.get(id)
        return r if r is not None and r.live(now) else None

    def _refresh(self, r: rec.Record) -> rec.Record:
        """Move the TTL deadline to now + TTL (a journaled version; ``updated_at`` is kept).

        On a read-only memory the read is served as it is: a refresh is a
        write, and a read must not fail for want of one.
        """
        if r.ttl is None or self.memory.readonly:
            return r
        ttl = _dt.timedelta(minutes=r.ttl)
        deadline = rec.deadline(self._now(), r.ttl)
        if r.deadline is not None and deadline - r.deadline < min(REFRESH_SLACK, ttl / 100):
            return r  # just refreshed: no new version for a deadline that hardly moves
        with self.memory.store.batch():  # read and write as one step (of the batch's)
            it = self.memory.store.get(r.id)
            if it is None or rec.read(it) is None:
                return r
            fresh = it.clone(stale_after=deadline)
            self.memory.store.put(fresh)
        out = rec.Record.of(fresh)
        self._note(out)
        return out
