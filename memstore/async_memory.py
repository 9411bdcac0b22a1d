""":class:`AsyncMemory`: the :class:`~memstore.memory.Memory` API for asyncio programs.

Every method is a coroutine that runs the blocking work (locks, SQLite,
embedding) in a worker thread, so the event loop keeps serving while a write
syncs or a query embeds.

A worker thread cannot be stopped midway, so a cancelled write (a task
cancelled, ``asyncio.timeout`` running out) is settled before the
:class:`asyncio.CancelledError` reaches the caller: a write cancelled before
its thread picked it up never runs, one already running is waited for. When
the caller sees the cancellation, the write happened entirely or not at all
(:meth:`AsyncMemory.get` tells which), and nothing of it lands later. A
cancelled read returns at once (its thread finishes in the background).

>>> import asyncio
>>> async def main() -> list[str]:
...     async with await AsyncMemory.open(embedder="hash") as mem:
...         await mem.add("The nightly backup runs at 02:00 UTC.", partition="ops")
...         hits = await mem.search("when does the backup run?", partition="ops")
...         return [h.item.content for h in hits]
>>> asyncio.run(main())
['The nightly backup runs at 02:00 UTC.']
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt

from memstore._offloop import run_settled
from memstore.config import Config
from memstore.consolidate import ConsolidationReport
from memstore.errors import MemstoreError
from memstore.graph import Context
from memstore.item import Item, ScoredItem
from memstore.journal import Journal, Lsn, Version
from memstore.limits import CONTEXT_REACH
from memstore.memory import Memory, MemoryStats
from memstore.search import SearchResult

if TYPE_CHECKING:
    from memstore_hub import Hub, Subscription
    from memstore_index import Embedder

__all__ = ["AsyncMemory"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class AsyncMemory:
    """The :class:`Memory` API with ``async`` methods; see :class:`Memory` for each.

    ``AsyncMemory(...)`` opens synchronously (restoring a journal and loading
    a model can take a while); ``await AsyncMemory.open(...)`` does it in a
    worker thread. ``async with`` closes it. Every argument is checked by the
    :class:`Memory` method it delegates to, so both raise the same
    :class:`~memstore.errors.MemstoreError` for the same bad input.

    Each method has the signature of the :class:`Memory` method it wraps
    (``tests/test_async_signatures.py`` keeps them equal), so a type checker
    or an IDE checks ``await mem.search(...)`` as it checks ``mem.search(...)``.
    ``memory=`` wraps an already open :class:`Memory` instead, given alone.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        embedder: str | Embedder | None = "auto",
        journal: Journal | str | None = None,
        config: Config | None = None,
        search: Mapping[str, Any] | None = None,
        hub: bool | Hub = False,
        readonly: bool = False,
        memory: Memory | None = None,
    ) -> None:
        if memory is None:
            self.memory = Memory(
                path,
                embedder=embedder,
                journal=journal,
                config=config,
                search=search,
                hub=hub,
                readonly=readonly,
            )
            return
        if not isinstance(memory, Memory):
            raise MemstoreError(f"memory= takes a Memory, got {type(memory).__name__}")
        given = (path, journal, config, search) != (None,) * 4 or (
            not (isinstance(embedder, str) and embedder == "auto")
            or hub is not False
            or readonly is not False
        )
        if given:
            raise MemstoreError(
                "memory= wraps an open Memory as it is: give it alone, or give the "
                "Memory's own arguments instead of memory="
            )
        self.memory = memory

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        embedder: str | Embedder | None = "auto",
        journal: Journal | str | None = None,
        config: Config | None = None,
        search: Mapping[str, Any] | None = None,
        hub: bool | Hub = False,
        readonly: bool = False,
    ) -> AsyncMemory:
        """Open a :class:`Memory` off the event loop and wrap it.

        Cancelling the open (``asyncio.wait_for`` running out, a task
        cancelled) cannot stop the worker thread midway; the memory it goes on
        to open is closed as soon as it is open, so nothing unreachable keeps
        the folder's write lock and a later open of the same folder succeeds.
        """
        abandoned = threading.Event()

        def build() -> Memory | None:
            memory = Memory(
                path,
                embedder=embedder,
                journal=journal,
                config=config,
                search=search,
                hub=hub,
                readonly=readonly,
            )
            if abandoned.is_set():  # nobody waits for it any more
                memory.close()
                return None
            return memory

        opening = asyncio.ensure_future(asyncio.to_thread(build))
        try:
            memory = await asyncio.shield(opening)
        except asyncio.CancelledError:
            abandoned.set()
            opening.add_done_callback(_close_unclaimed)  # if it was done before the flag
            raise
        assert memory is not None  # only an abandoned open returns none
        return cls(memory=memory)

    async def _run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """A read in a worker thread (cancelled, the caller is answered at once)."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _write(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """A write in a worker thread, settled before a cancellation reaches the caller."""
        return await run_settled(fn, *args, **kwargs)

    # writes
    async def add(
        self,
        text_or_item: str | Item,
        *,
        partition: str | None = None,
        private_to: str | None = None,
        dedup: bool = True,
        **fields: Any,
    ) -> Item:
        return await self._write(
            self.memory.add,
            text_or_item,
            partition=partition,
            private_to=private_to,
            dedup=dedup,
            **fields,
        )

    async def add_many(
        self,
        items: Iterable[str | Item | Mapping[str, Any]],
        *,
        partition: str | None = None,
        progress: bool = False,
    ) -> list[Item]:
        return await self._write(
            self.memory.add_many, items, partition=partition, progress=progress
        )

    async def update(self, id: str, /, **fields: Any) -> Item:
        return await self._write(self.memory.update, id, **fields)

    async def delete(self, id: str) -> bool:
        return await self._write(self.memory.delete, id)

    async def expire(self, id: str) -> bool:
        return await self._write(self.memory.expire, id)

    async def supersede(
        self,
        old_id: str,
        text_or_item: str | Item,
        *,
        private_to: str | None = None,
        **fields: Any,
    ) -> Item:
        return await self._write(
            self.memory.supersede, old_id, text_or_item, private_to=private_to, **fields
        )

    async def refute(self, id: str, reason: str, evidence: Sequence[str] = ()) -> list[str]:
        return await self._write(self.memory.refute, id, reason, evidence)

    async def link(
        self, from_id: str, to_id: str, relation: str = "correlates_with", weight: float = 1.0
    ) -> bool:
        return await self._write(self.memory.link, from_id, to_id, relation, weight)

    async def atomically(self, fn: Callable[[], T]) -> T:
        """:meth:`Memory.atomically` in a worker thread, settled like a write.

        ``fn`` is a plain function that reads and writes ``self.memory`` (it runs
        in the worker thread, and may run more than once), not a coroutine.
        """
        return await self._write(self.memory.atomically, fn)

    async def purge(self, ids: Iterable[str]) -> list[str]:
        return await self._write(self.memory.purge, ids)

    # reads
    async def get(self, id: str) -> Item | None:
        return await self._run(self.memory.get, id)

    async def search(
        self,
        query: str,
        *,
        partition: str | None = None,
        kind: str = "",
        subject: str = "",
        limit: int = 10,
        explain: bool = False,
        user: str | None = None,
        min_relevance: float = 0.0,
        query_vector: npt.ArrayLike | None = None,
    ) -> list[SearchResult]:
        return await self._run(
            self.memory.search,
            query,
            partition=partition,
            kind=kind,
            subject=subject,
            limit=limit,
            explain=explain,
            user=user,
            min_relevance=min_relevance,
            query_vector=query_vector,
        )

    async def search_full(
        self,
        query: str,
        *,
        partition: str | None = None,
        kind: str = "",
        subject: str = "",
        limit: int = 10,
        explain: bool = False,
        user: str | None = None,
        min_relevance: float = 0.0,
        query_vector: npt.ArrayLike | None = None,
    ) -> list[SearchResult]:
        return await self._run(
            self.memory.search_full,
            query,
            partition=partition,
            kind=kind,
            subject=subject,
            limit=limit,
            explain=explain,
            user=user,
            min_relevance=min_relevance,
            query_vector=query_vector,
        )

    async def embed_queries(self, queries: Sequence[str]) -> npt.NDArray[np.float32]:
        """:meth:`Memory.embed_queries`: one embedding call for many queries, off the loop.

        Each row goes back as ``await mem.search(q, query_vector=row)``.
        """
        return await self._run(self.memory.embed_queries, queries)

    async def recent(
        self, limit: int = 10, *, kind: str = "", partition: str | None = None
    ) -> list[Item]:
        return await self._run(self.memory.recent, limit, kind=kind, partition=partition)

    async def context(
        self, anchor: str, max_depth: int = 3, *, reach: int = CONTEXT_REACH
    ) -> tuple[list[Item], list[ScoredItem]]:
        return await self._run(self.memory.context, anchor, max_depth, reach=reach)

    async def context_within(
        self, anchor: str, max_depth: int = 3, *, reach: int = CONTEXT_REACH
    ) -> Context:
        return await self._run(self.memory.context_within, anchor, max_depth, reach=reach)

    async def consolidate(self, partition: str, *, apply: bool = False) -> ConsolidationReport:
        return await self._write(self.memory.consolidate, partition, apply=apply)

    async def history(self, id: str) -> list[Version]:
        return await self._run(self.memory.history, id)

    async def as_of(
        self, when: Lsn | _dt.datetime | str, *, partition: str | None = None
    ) -> list[Item]:
        return await self._run(self.memory.as_of, when, partition=partition)

    async def export(self, fp: IO[str], partition: str | None = None) -> int:
        return await self._write(self.memory.export, fp, partition)

    async def import_(self, fp: IO[str], *, check_rules: bool = False) -> int:
        return await self._write(self.memory.import_, fp, check_rules=check_rules)

    async def stats(self) -> MemoryStats:
        return await self._run(self.memory.stats)

    def subscribe(self, **options: Any) -> Subscription:
        """A hub subscription; iterate it with ``async for``."""
        return self.memory.subscribe(**options)

    async def close(self) -> None:
        """Detach and close the journal, the vector index and the hub (idempotent).

        As :meth:`Memory.close`, settled like a write. A write still running
        when the memory closes either commits before the journal detaches or
        is undone and raises :class:`~memstore.errors.MemstoreError` ("this
        Memory is closed"), as does every call after.
        """
        await self._write(self.memory.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


for _name, _fn in list(vars(AsyncMemory).items()):  # each coroutine documents as its Memory twin
    if not _name.startswith("_") and _fn.__doc__ is None and hasattr(Memory, _name):
        _fn.__doc__ = getattr(Memory, _name).__doc__


def _close_unclaimed(opening: asyncio.Future[Memory | None]) -> None:
    """Close, in a thread of its own, a memory whose open finished after its caller left."""
    if opening.cancelled() or opening.exception() is not None:
        return
    memory = opening.result()
    if memory is not None:
        threading.Thread(target=memory.close, name="memstore-close-unclaimed").start()
