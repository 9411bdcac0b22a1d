"""The Mind Layer operations over a :class:`~memstore.memory.Memory`, in Python.

:class:`MindLayer` is what the HTTP routes call, and what a program can
call directly: every method takes a :class:`~memstore.mindlayer.scope.Scope`
and returns the JSON the API answers with (a memory is
``{id, text, session, created_at, updated_at}``; a hit ``{"memory": ..., "score": n}``).

>>> from memstore import Memory
>>> with Memory(embedder=None) as mem:
...     ml = MindLayer(mem)
...     scope = Scope("assistant", "synthetic-user")
...     stored = ml.remember(scope, "The user is vegetarian and cooks dinner for two people.",
...                          id="diet", session="first-conversation")
...     _ = ml.set_personality(scope, "Be warm, concise and practical.")
...     hits = ml.search(scope, "vegetarian dinner")
...     ctx = ml.context(scope, "what does the user cook?")
>>> [h["memory"]["id"] for h in hits]
['diet']
>>> print(ctx["prompt"])
Personality:
Be warm, concise and practical.
<BLANKLINE>
Memories:
- [diet] The user is vegetarian and cooks dinner for two people.
>>> ctx["ids"]
['diet']
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from memstore.arguments import query_vector_arg
from memstore.catchup import catch_up
from memstore.context_block import DEFAULT_CONTEXT_CHARS, build_context_block
from memstore.item import ORIGIN_DERIVED, ORIGIN_HUMAN, Item
from memstore.limits import MAX_RESULTS
from memstore.memory import Memory
from memstore.mindlayer.errors import MindLayerError, invalid, not_found
from memstore.mindlayer.limits import (
    DEFAULT_LIMIT,
    MAX_CONTEXT_CHARS,
    MAX_LIMIT,
    MAX_SESSION_BYTES,
    MAX_TEXT_BYTES,
)
from memstore.mindlayer.models import (
    checked_count,
    checked_id,
    checked_relevance,
    checked_text,
)
from memstore.mindlayer.provider import (
    ANSWER_PROMPT,
    EXTRACTION_PROMPT,
    ChatClient,
    check_answer,
    parse_facts,
)
from memstore.mindlayer.scope import (
    DATA_ID,
    DATA_SESSION,
    KIND_MEMORY,
    KIND_PERSONALITY,
    Scope,
    derived_id,
)
from memstore.tags import partition_from_tags

__all__ = ["NO_CONTEXT", "MindLayer", "SearchStage", "memory_json"]

NO_CONTEXT: Final = "(no stored memory or personality matched)"
"""What a chat's system message holds when the context block is empty."""

_log = logging.getLogger("memstore.mindlayer")
JSON = dict[str, Any]
QueryVector: TypeAlias = npt.NDArray[np.float32]
"""A search query's embedding (a row of :meth:`~memstore.memory.Memory.embed_queries`)."""


def _time(value: _dt.datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(_dt.UTC).isoformat().replace("+00:00", "Z")


def memory_json(item: Item) -> JSON:
    """A memory item as the API shows it."""
    return {
        "id": item.data.get(DATA_ID, item.id),
        "text": item.content,
        "session": item.data.get(DATA_SESSION, ""),
        "created_at": _time(item.created_at),
        "updated_at": _time(item.updated_at),
    }


def _memory_id(item: Item) -> str:
    return item.data.get(DATA_ID, item.id)


class MindLayer:
    """Mind Layer's memory API over ``memory``.

    :param memory: where the scopes live (any :class:`~memstore.memory.Memory`;
        semantic and hybrid retrieval need its vector index, an embedder).
    :param chat: the provider's chat client, for :meth:`ingest` and :meth:`chat`.
    """

    def __init__(self, memory: Memory, *, chat: ChatClient | None = None) -> None:
        self.memory = memory
        self.chat_client = chat

    # ---------------------------------------------------------------- reads

    def _owned(self, scope: Scope, item: Item | None, kind: str = KIND_MEMORY) -> Item | None:
        if item is None or not item.is_active() or item.kind != kind:
            return None
        return item if partition_from_tags(item.tags) == scope.partition else None

    def memories(self, scope: Scope) -> list[Item]:
        """The scope's live memory items, oldest first (a pass over the store's memories)."""
        part = scope.partition
        found = self.memory.store.filtered(status="active", kind=KIND_MEMORY)
        mine = [it for it in found if partition_from_tags(it.tags) == part]
        return sorted(mine, key=lambda it: (it.created_at or _dt.datetime.min, it.id))

    def personality(self, scope: Scope) -> str:
        """The scope's personality text ("" when none is set)."""
        item = self._owned(scope, self.memory.get(scope.personality_id), KIND_PERSONALITY)
        return item.content if item is not None else ""

    def search(
        self,
        scope: Scope,
        query: str,
        *,
        mode: str = "lexical",
        limit: int = DEFAULT_LIMIT,
        min_relevance: float = 0.0,
        query_vector: QueryVector | None = None,
    ) -> list[JSON]:
        """The scope's best memories for ``query``: ``[{"memory": ..., "score": n}]``.

        ``lexical``: memstore's ranked lexical search (BM25-style scores, stems,
        typo tolerance), offline. ``semantic``: cosine similarity of the query's
        embedding (needs an embedder). ``hybrid``: memstore's hybrid search
        (lexical first, the vectors fused in when the lexical answer is unsure,
        then its rerank). Scores are comparable within one call only. A
        ``hybrid`` hit also carries ``relevance`` (0-1, comparable across calls:
        memstore's estimate that it is evidence for the query), and
        ``min_relevance`` drops the hybrid hits below it (0: none dropped).

        ``query_vector``: the query's embedding when the caller has it
        (:meth:`Memory.embed_queries`, which embeds many queries in one call), for
        ``semantic`` and ``hybrid``; the same hits as without it. ``lexical`` ignores it.

        :raises MindLayerError: 400 for semantic/hybrid without an embedder, or
            a ``min_relevance`` above 0 in another mode than ``hybrid``.
        """
        return [
            _hit_json(item, score, rel)
            for item, score, rel in self._hits(
                scope, query, mode, limit, min_relevance, query_vector
            )
        ]

    def search_stage(
        self, scope: Scope, query: str, *, limit: int = DEFAULT_LIMIT, min_relevance: float = 0.0
    ) -> SearchStage[list[JSON]]:
        """A ``hybrid`` :meth:`search` stopped after its lexical pass, for a server batching
        query embeddings: embed the query only when ``wants_vector`` says so, then
        ``finish(vector or None)`` answers what :meth:`search` answers. A query whose words
        the lexical pass answers confidently is never embedded (no provider call).
        """
        return self._hybrid_stage(
            scope, query, limit, min_relevance, lambda found: [_hit_json(*h) for h in found]
        )

    def context_stage(
        self,
        scope: Scope,
        query: str,
        *,
        limit: int = DEFAULT_LIMIT,
        max_chars: int = DEFAULT_CONTEXT_CHARS,
        min_relevance: float = 0.0,
    ) -> SearchStage[JSON]:
        """A ``hybrid`` :meth:`context`, staged as :meth:`search_stage` is."""
        checked_count("max_chars", max_chars, 1, MAX_CONTEXT_CHARS)
        return self._hybrid_stage(
            scope, query, limit, min_relevance, lambda found: self._context(scope, found, max_chars)
        )

    def _hybrid_stage(
        self,
        scope: Scope,
        query: str,
        limit: int,
        min_relevance: float,
        then: Callable[[list[tuple[Item, float, float | None]]], R],
    ) -> SearchStage[R]:
        checked_text("query", query, MAX_TEXT_BYTES, nonempty=True)
        checked_count("limit", limit, 1, MAX_LIMIT)
        checked_relevance(min_relevance)
        if self.memory.cells is None:
            return SearchStage(False, lambda vec: then(self._hits(scope, query, "hybrid", limit)))
        pool = _first_pool(limit)
        staged = self.memory.searcher.hybrid_search_staged(
            query, KIND_MEMORY, "", scope.partition, pool, min_relevance=min_relevance
        )

        def finish(vec: QueryVector | None) -> R:
            scored = staged.finish(vec)
            out: list[tuple[Item, float, float | None]] = [
                (r.item, r.score, r.relevance)
                for r in scored
                if self._owned(scope, r.item) is not None
            ]
            if len(out) >= limit or len(scored) < pool:
                return then(out[:limit])
            # Other surfaces' items crowd the first pool: the unstaged search widens it.
            return then(self._hits(scope, query, "hybrid", limit, min_relevance, vec))

        return SearchStage(staged.wants_vector, finish)

    def wants_vector(self, mode: str) -> bool:
        """Whether a search in ``mode`` can use a query vector (semantic or hybrid, an embedder)."""
        return mode in ("semantic", "hybrid") and self.memory.cells is not None

    def _hits(
        self,
        scope: Scope,
        query: str,
        mode: str,
        limit: int,
        min_relevance: float = 0.0,
        query_vector: QueryVector | None = None,
    ) -> list[tuple[Item, float, float | None]]:
        checked_text("query", query, MAX_TEXT_BYTES, nonempty=True)
        checked_count("limit", limit, 1, MAX_LIMIT)
        part = scope.partition
        mem = self.memory
        if checked_relevance(min_relevance) > 0.0 and mode != "hybrid":
            raise invalid(
                f"min_relevance needs mode 'hybrid' (its hits carry relevance), got mode {mode!r}"
            )

        def lexical(pool: int) -> list[tuple[Item, float, float | None]]:
            hits, _ = mem.store.keyword_hits(query, KIND_MEMORY, "", pool, partition=part)
            return [(it, hit.score, None) for it, hit in hits]

        def hybrid(pool: int) -> list[tuple[Item, float, float | None]]:
            results = mem.search(
                query,
                partition=part,
                kind=KIND_MEMORY,
                limit=pool,
                min_relevance=min_relevance,
                query_vector=query_vector,
            )
            return [(r.item, r.score, r.relevance) for r in results]

        scored: list[tuple[Item, float, float | None]]
        if mode == "lexical":
            return self._own_hits(scope, lexical, limit)
        elif mode in ("semantic", "hybrid"):
            cells = mem.cells
            if cells is None:
                raise invalid(
                    f"mode {mode!r} needs an embedding model: start the server with "
                    "MEMSTORE_PROVIDER_EMBEDDING_MODEL (or --embedder local); lexical works without"
                )
            if mode == "hybrid":
                return self._own_hits(scope, hybrid, limit)
            else:
                vec = (
                    cells.embed_query(query)
                    if query_vector is None
                    else query_vector_arg(query_vector, cells.dim)
                )
                found = cells.search_vector(
                    vec,
                    limit,
                    partitions=[part],
                    visible=lambda e: e.partition == part and e.kind == KIND_MEMORY,
                )
                scored = []
                for entry, sim in found:
                    item = mem.get(entry.id)
                    if item is not None:
                        scored.append((item, sim, None))
        else:
            raise invalid(f"mode must be lexical, semantic or hybrid, got {mode[:40]!r}")
        out = [(it, s, r) for it, s, r in scored if self._owned(scope, it) is not None]
        return out[:limit]

    def _own_hits(
        self,
        scope: Scope,
        ranked: Callable[[int], list[tuple[Item, float, float | None]]],
        limit: int,
    ) -> list[tuple[Item, float, float | None]]:
        """The best ``limit`` hits of ``ranked(pool)`` that belong to ``scope``.

        Lexical and hybrid search in a partition also see untagged and ``shared``
        items (other surfaces' items in the same folder): dropped here, they could
        fill the pool and crowd the scope's own hits out, so the pool widens until
        ``limit`` hits are the scope's, ``ranked`` has nothing more, or the pool is
        the engine's largest (:data:`~memstore.limits.MAX_RESULTS`).
        """
        pool = _first_pool(limit)
        while True:
            scored = ranked(pool)
            out = [(it, s, r) for it, s, r in scored if self._owned(scope, it) is not None]
            if len(out) >= limit or len(scored) < pool or pool >= MAX_RESULTS:
                return out[:limit]
            pool = min(pool * 4, MAX_RESULTS)

    def context(
        self,
        scope: Scope,
        query: str,
        *,
        mode: str = "lexical",
        limit: int = DEFAULT_LIMIT,
        max_chars: int = DEFAULT_CONTEXT_CHARS,
        min_relevance: float = 0.0,
        query_vector: QueryVector | None = None,
    ) -> JSON:
        """``{"personality", "memories", "prompt", "ids", "omitted"}`` for ``query``.

        ``memories`` are :meth:`search`'s hits; ``prompt`` is the engine's context
        block (:func:`memstore.context_block.build_context_block`) of the
        personality and those memories within ``max_chars``, and ``ids`` and
        ``omitted`` its receipt. ``query_vector`` as in :meth:`search`.
        """
        checked_count("max_chars", max_chars, 1, MAX_CONTEXT_CHARS)
        found = self._hits(scope, query, mode, limit, min_relevance, query_vector)
        return self._context(scope, found, max_chars)

    def _context(
        self, scope: Scope, found: list[tuple[Item, float, float | None]], max_chars: int
    ) -> JSON:
        persona = self.personality(scope)
        block = build_context_block(
            [it for it, _, _ in found], personality=persona, max_chars=max_chars, id_of=_memory_id
        )
        return {
            "personality": persona,
            "memories": [_hit_json(it, s, r) for it, s, r in found],
            "prompt": block.text,
            "ids": list(block.ids),
            "omitted": list(block.omitted),
        }

    def export(self, scope: Scope) -> JSON:
        """``{"personality", "memories"}``: every live memory with its vector and model.

        ``vector`` is the stored unit vector (``null`` without an embedder) and
        ``embedding_model`` the identity of the model that made it
        (``model@base_url`` for a provider).
        """
        cells = self.memory.cells
        model = str(cells.embedder.model_id) if cells is not None else None
        out = []
        for item in self.memories(scope):
            entry = memory_json(item)
            vec = cells.vector(item.id) if cells is not None else None
            entry["vector"] = None if vec is None else [float(x) for x in vec.tolist()]
            entry["embedding_model"] = model if vec is not None else None
            out.append(entry)
        return {"personality": self.personality(scope), "memories": out}

    # --------------------------------------------------------------- writes

    def remember(
        self,
        scope: Scope,
        text: str,
        *,
        id: str | None = None,
        session: str = "",
        origin: str = ORIGIN_HUMAN,
    ) -> JSON:
        """Store ``text`` (trimmed) in ``scope``; the memory as stored.

        With ``id``, that memory of the scope is created or replaced. Without,
        the id is derived from the trimmed text (:func:`~memstore.mindlayer.scope.derived_id`),
        so an exact duplicate lands on the memory already there and changes
        nothing. The item is written (and embedded, with an embedder) in one
        step: an embedding failure stores nothing.
        """
        checked_text("text", text, MAX_TEXT_BYTES, nonempty=True)
        return memory_json(self._remember(scope, text.strip(), id, session, origin))

    def _item(self, scope: Scope, text: str, mid: str, session: str, origin: str) -> Item:
        return Item(
            id=scope.item_id(mid),
            kind=KIND_MEMORY,
            content=text,
            origin=origin,
            data={DATA_ID: mid, DATA_SESSION: session},
        )

    def _remember(self, scope: Scope, text: str, id: str | None, session: str, origin: str) -> Item:
        if id is not None:
            checked_id("id", id)
        checked_text("text", text, MAX_TEXT_BYTES, nonempty=True)
        checked_text("session", session, MAX_SESSION_BYTES, nonempty=False)
        mid = id if id is not None else derived_id(text)
        mem = self.memory

        def write() -> Item:  # read and write as one step, on the current state
            current = self._owned(scope, mem.get(scope.item_id(mid)))
            if id is None and current is not None and current.content == text:
                return current  # an exact duplicate: the memory stays as it was
            item = self._item(scope, text, mid, session, origin)
            return mem.add(item, partition=scope.partition, dedup=False)

        return mem.atomically(write)

    def set_personality(self, scope: Scope, text: str) -> JSON:
        """Set (or, with blank text, clear) the scope's personality; ``{"personality": text}``."""
        checked_text("personality", text, MAX_TEXT_BYTES, nonempty=False)
        if not text.strip():  # clearing deletes: the personality another server just set too
            self._caught_up()
        mem = self.memory
        pid = scope.personality_id

        def write() -> JSON:
            if not text.strip():
                if self._owned(scope, mem.get(pid), KIND_PERSONALITY) is not None:
                    mem.delete(pid)
                return {"personality": ""}
            item = Item(id=pid, kind=KIND_PERSONALITY, content=text, no_embed=True)
            mem.add(item, partition=scope.partition, dedup=False)
            return {"personality": text}

        return mem.atomically(write)

    def _caught_up(self) -> None:
        """Apply every write on record, other servers' too, before a delete reads what to delete.

        Servers sharing a PostgreSQL journal each read their own store, which
        follows the others' writes a few milliseconds late: a delete that read
        only what this one had applied missed a memory another server had
        already acknowledged (a 404 for a live memory, a scope deletion leaving
        it behind). The engine's :func:`~memstore.catchup.catch_up` does the
        work, as it does for the protocol's forget: one query of the journal's
        head, then a wait only while this process is behind it; a journal no
        other process writes has nothing to apply, and a caller holding the
        store's lock (inside its own ``store.batch()``) is not made to wait, since
        the follower could apply nothing meanwhile.

        :raises MindLayerError: 503 ``unavailable`` when this process did not get
            there within :data:`~memstore.catchup.CATCH_UP_SECONDS` (nothing is deleted).
        """
        if not catch_up(self.memory):
            raise MindLayerError(
                503,
                "unavailable",
                "this server has not yet applied the other servers' latest writes; "
                "nothing was deleted: send the request again",
            )

    def forget(self, scope: Scope, id: str) -> JSON:
        """Delete one memory of the scope (logically: the journal keeps its history).

        Of two requests deleting one memory, on one server or on several
        sharing a PostgreSQL journal, one deletes it and the other gets the 404
        (:meth:`~memstore.memory.Memory.atomically`). A memory another server
        acknowledged before this call is seen (:meth:`_caught_up`), never a 404.

        :raises MindLayerError: 404 when the scope holds no live memory ``id``.
        """
        checked_id("id", id)
        self._caught_up()
        mem = self.memory
        item_id = scope.item_id(id)

        def delete() -> None:
            if self._owned(scope, mem.get(item_id)) is None:
                raise not_found(f"no memory {id!r} in this scope")
            mem.delete(item_id)

        mem.atomically(delete)
        return {"deleted": id}

    def forget_scope(self, scope: Scope) -> JSON:
        """Delete every memory and the personality of the scope, in one transaction.

        Every one stored before the call is deleted, also when another server
        sharing the PostgreSQL journal stored it a moment ago (:meth:`_caught_up`).
        """
        self._caught_up()
        mem = self.memory

        def delete() -> int:
            items = self.memories(scope)
            for item in items:
                mem.delete(item.id)
            if self._owned(scope, mem.get(scope.personality_id), KIND_PERSONALITY) is not None:
                mem.delete(scope.personality_id)
            return len(items)

        return {"deleted": mem.atomically(delete)}

    # -------------------------------------------------------------- provider

    def _chat(self, what: str) -> ChatClient:
        if self.chat_client is None:
            raise invalid(
                f"{what} needs a chat model: start the server with MEMSTORE_PROVIDER_BASE_URL "
                "and MEMSTORE_PROVIDER_CHAT_MODEL"
            )
        return self.chat_client

    def ingest(self, scope: Scope, text: str, *, session: str = "") -> JSON:
        """Ask the chat model for durable facts in ``text``; store them as ``derived`` memories.

        Returns ``{"memories": [...]}``. The text itself is not stored. The
        facts are checked whole first (at most 20, each non-empty and within
        the text limit), then written in one transaction: invalid output, a
        provider failure or an embedding failure stores nothing.

        :raises ProviderError: the provider failed or answered invalid output.
        """
        checked_text("text", text, MAX_TEXT_BYTES, nonempty=True)
        checked_text("session", session, MAX_SESSION_BYTES, nonempty=False)
        client = self._chat("ingest")
        facts = parse_facts(
            client.complete(
                [
                    {"role": "system", "content": EXTRACTION_PROMPT},
                    {"role": "user", "content": text},
                ],
                json_object=True,
            )
        )
        mem = self.memory

        def write() -> list[Item]:
            stored: list[Item] = []
            todo: list[Item] = []
            for fact in facts:
                mid = derived_id(fact)
                current = self._owned(scope, mem.get(scope.item_id(mid)))
                if current is not None and current.content == fact:
                    stored.append(current)
                else:
                    todo.append(self._item(scope, fact, mid, session, ORIGIN_DERIVED))
            return [*stored, *(mem.add_many(todo, partition=scope.partition) if todo else [])]

        by_id = {it.id: it for it in mem.atomically(write)}
        return {"memories": [memory_json(by_id[scope.item_id(derived_id(f))]) for f in facts]}

    def chat(
        self,
        scope: Scope,
        query: str,
        *,
        mode: str = "lexical",
        limit: int = DEFAULT_LIMIT,
        min_relevance: float = 0.0,
    ) -> JSON:
        """One grounded answer: ``{"answer": ..., "context": <what context() returns>}``.

        The query, the personality and the retrieved memories go to the chat
        model (as the context block); nothing is stored.

        :raises ProviderError: the provider failed or answered invalid output.
        """
        checked_count("limit", limit, 1, MAX_LIMIT)  # the request's own fault first
        client = self._chat("chat")
        ctx = self.context(scope, query, mode=mode, limit=limit, min_relevance=min_relevance)
        system = f"{ANSWER_PROMPT}\n\n{ctx['prompt'] or NO_CONTEXT}"
        answer = check_answer(
            client.complete(
                [{"role": "system", "content": system}, {"role": "user", "content": query}]
            )
        )
        return {"answer": answer, "context": ctx}


def _first_pool(limit: int) -> int:
    """How many hits a search asks for first (other partitions' are dropped after)."""
    return limit * 2 + 10


R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class SearchStage(Generic[R]):
    """A search after its lexical pass (:class:`memstore.web.batching.Stage`'s shape).

    ``wants_vector``: whether ``finish`` would embed the query (so a caller
    batching embeddings should pass its vector); ``finish(vector or None)``: the answer.
    """

    wants_vector: bool
    finish: Callable[[QueryVector | None], R]


def _hit_json(item: Item, score: float, relevance: float | None) -> JSON:
    """A hit: ``{"memory", "score"}``, plus ``relevance`` for a hybrid hit (an addition)."""
    out: JSON = {"memory": memory_json(item), "score": round(float(score), 6)}
    if relevance is not None:
        out["relevance"] = round(float(relevance), 6)
    return out
