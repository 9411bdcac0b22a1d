"""Micro-batching: the query embeddings of concurrent searches in one call, off the event loop.

A search server spends most of a semantic query's time in two places: the
embedding of the query (a model run, or a provider request) and the search.
Both are blocking work that, on the event loop, stalls every other request;
and a model embeds 32 queries in one run for much less than 32 runs cost.
:class:`QueryBatcher` serves both points with one worker thread (and one for the embedding):

1. a request hands :meth:`QueryBatcher.run` its query text (``None`` when its
   search needs no vector) and the search to run, a function of the vector;
   or it hands :meth:`QueryBatcher.run_staged` its text and a function that
   *starts* its search and returns a :class:`Stage`: the search's first step
   done (a hybrid search's lexical pass), whether the rest wants the vector,
   and how to finish it;
2. the worker takes **everything queued** when it is free. It starts each
   staged search; one that wants no vector (a confident lexical answer) is
   finished and answered at once. The texts of the rest of the batch (each
   distinct text once) are embedded in one call, then each search runs (or
   finishes) with its row, and each answer goes back to its request as soon
   as its search returns. A turn with one text to embed only embeds nothing:
   its search gets ``None`` and embeds its query itself, if at all.
3. the turns are pipelined: a turn's texts are embedded on a second thread
   (a model run releases the GIL), and meanwhile the worker takes the
   requests queued since and starts their searches (the lexical passes);
   as soon as the vectors are ready (it looks after each search it starts)
   it finishes the turn they belong to. Under load the model
   and the searches' Python work run on two cores instead of one after the
   other; with nothing queued a turn finishes at once, as before.
4. a search that needs no model run is finished as soon as it is started,
   in the order the requests came: one that wants no vector, one whose
   query's vector is at hand (``known``, such as a query cache: a server is
   asked the same questions again and again), and, when a turn leaves one
   text to embed, its search (it embeds its own query). Only the searches
   whose texts go to the model wait: for the model, and for the search
   being started when it is done. Holding back
   the others too would overlap nothing and would answer them out of order:
   the first ones sooner, the last ones later, a longer tail at the same rate.

No timer: an idle worker starts on the first request at once (no added
latency), and under load the requests that arrived while it was busy form
the next batch, so the batch grows with the load (up to ``max_batch``). The
event loop only parses, routes and answers.

Failures stay with their request. If the batch's embedding call fails, each
search of the batch gets ``None`` and embeds its own query (a search that
then fails alone answers alone); a search that raises has its exception
re-raised in its own request; a request whose client went away (its
coroutine cancelled) is skipped if its search has not started.

:meth:`QueryBatcher.close` refuses new work (:class:`BatcherClosed`), lets the
worker finish what is queued, and waits for it: a server closes the batcher
after its last request and before closing the storage the searches read.

The batcher knows texts, vectors and functions, not what a search means:
the engine's side is :meth:`memstore.memory.Memory.embed_queries` and the
``query_vector=`` of :meth:`memstore.memory.Memory.search`.

>>> import asyncio
>>> def embed(texts):  # a toy embedder: a text's vector is its length
...     return [len(t) for t in texts]
>>> def search(query, vec):  # vec: the batch's row, or None (then embed alone)
...     return f"{query}:{vec if vec is not None else embed([query])[0]}"
>>> batcher = QueryBatcher(embed)
>>> async def main():
...     jobs = [batcher.run(q, lambda v, q=q: search(q, v)) for q in ("ab", "abc", "ab")]
...     return await asyncio.gather(*jobs)
>>> asyncio.run(main())
['ab:2', 'abc:3', 'ab:2']
>>> batcher.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeVar

__all__ = [
    "DEFAULT_MAX_BATCH",
    "BatcherClosed",
    "QueryBatcher",
    "Stage",
    "attach_batcher",
    "close_batcher",
]

DEFAULT_MAX_BATCH: Final = 64
"""Most requests one worker turn takes (one embedding call of at most as many texts)."""

_log = logging.getLogger("memstore.web")

V = TypeVar("V")
R = TypeVar("R")
V_contra = TypeVar("V_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class BatcherClosed(RuntimeError):
    """:meth:`QueryBatcher.run` after :meth:`QueryBatcher.close`: the server is shutting down."""


class Stage(Protocol[V_contra, R_co]):
    """A search after its first step: whether the rest wants the query's vector, and the rest."""

    @property
    def wants_vector(self) -> bool:
        """``False``: :meth:`finish` uses no vector (it is given ``None``)."""
        ...

    def finish(self, vec: V_contra | None, /) -> R_co:
        """The rest of the search: its answer. ``vec``: the query's row, or ``None``."""
        ...


@dataclass(frozen=True, slots=True)
class _Whole(Generic[V, R]):
    """A search with no first step: it wants the vector whenever it has a text."""

    wants_vector: bool
    finish: Callable[[V | None], R]


@dataclass(eq=False, slots=True)
class _Job(Generic[V]):
    """One request's work: its text, how to start its search, and where its answer goes."""

    text: str | None
    start: Callable[[], Stage[V, Any]]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class _Turn(Generic[V]):
    """A started turn: the searches that wait for a model run, and their texts' embedding."""

    wanting: list[tuple[_Job[V], Stage[V, Any]]]
    vectors: Future[dict[str, V]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """On the request's loop: its answer or its exception (unless it was cancelled)."""
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class QueryBatcher(Generic[V]):
    """Runs searches in one worker thread, embedding the queries queued together in one call.

    ``embed``: many texts to one vector each, in order (such as
    :meth:`~memstore.memory.Memory.embed_queries`); ``None`` when there is no
    embedder, so every search gets ``None``. ``known``: the vectors of texts
    that are at hand without a model run, ``None`` for the others, in order
    (such as :meth:`~memstore_index.CellStore.remembered_queries`, the query
    cache); it runs on the worker and must be quick. ``max_batch``: the most
    requests one turn takes. The worker thread starts with the first request
    (a daemon thread named ``name``).
    """

    def __init__(
        self,
        embed: Callable[[list[str]], Sequence[V]] | None,
        *,
        known: Callable[[list[str]], Sequence[V | None]] | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        name: str = "memstore-query-batcher",
    ) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be a whole number of at least 1, got {max_batch!r}")
        self._embed = embed
        self._known = known
        self._max_batch = max_batch
        self._name = name
        self._queue: deque[_Job[V]] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.batches = 0
        """Embedding calls made so far (a turn whose requests need no vector makes none)."""
        self.embedded = 0
        """Texts embedded so far (distinct within their batch)."""
        self.at_hand = 0
        """Texts whose vector ``known`` gave (no model run)."""

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (new requests are refused)."""
        return self._closed

    async def run(self, text: str | None, search: Callable[[V | None], R]) -> R:
        """``search(vector of text)`` on the worker thread, batched with concurrent requests.

        ``text`` ``None``: the search needs no vector and gets ``None``. The
        search's exception, if it raises, is raised here.

        :raises BatcherClosed: the batcher is closed.
        """
        whole: _Whole[V, R] = _Whole(text is not None, search)
        return await self.run_staged(text, lambda: whole)

    async def run_staged(self, text: str | None, start: Callable[[], Stage[V, R]]) -> R:
        """``start()`` then the stage's ``finish(vector of text)`` on the worker thread.

        Only the started searches that want a vector have their texts embedded
        (together, as in :meth:`run`); the others finish with ``None``. An
        exception from ``start`` or ``finish`` is raised here.

        :raises BatcherClosed: the batcher is closed.
        """
        loop = asyncio.get_running_loop()
        job: _Job[V] = _Job(text, start, loop, loop.create_future())
        with self._wake:
            if self._closed:
                raise BatcherClosed("the server is shutting down and takes no new requests")
            self._queue.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._wake.notify()
        result: R = await job.future  # cancelled: the worker skips it if not yet started
        return result

    def close(self, timeout: float | None = None) -> None:
        """Refuse new requests, finish the queued ones, and wait (up to ``timeout`` s) for them.

        Idempotent. Answers for requests whose event loop has closed are dropped.
        """
        with self._wake:
            self._closed = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # ------------------------------------------------------------ the worker

    def _take(self, wait: bool) -> list[_Job[V]] | None:
        """The next turn's requests, or ``None``: closed and drained.

        ``wait``: block until there is one; otherwise an empty list when none is queued.
        """
        with self._wake:
            while not self._queue:
                if self._closed:
                    return None
                if not wait:
                    return []
                self._wake.wait()
            n = min(len(self._queue), self._max_batch)
            return [self._queue.popleft() for _ in range(n)]

    def _work(self) -> None:
        """Turns, pipelined: a turn's texts embed while the next turn's searches start.

        The embedding runs on a second thread (a model run releases the GIL), so
        it overlaps the Python work of starting the searches queued meanwhile;
        the turn's searches finish with their rows as soon as the embedding is
        done (checked after each search started). With nothing queued, a turn
        finishes at once, as it would without the pipeline.
        """
        with ThreadPoolExecutor(1, thread_name_prefix=f"{self._name}-embed") as embedder:
            pending: _Turn[V] | None = None
            while (batch := self._take(wait=pending is None)) is not None:
                pending, turn = self._start(batch, embedder, pending)
                if pending is not None:
                    self._finish_turn(pending)
                pending = turn
            if pending is not None:
                self._finish_turn(pending)

    def _start(
        self, batch: list[_Job[V]], embedder: Executor, pending: _Turn[V] | None
    ) -> tuple[_Turn[V] | None, _Turn[V] | None]:
        """Start each search of ``batch``, finishing at once those that need no model run,
        and the embedding of the texts the rest want.

        Finished at once: a search that wants no vector, one whose vector is at
        hand (``known``), and, when only one search is left, that one (it embeds
        its own query). The earlier turn ``pending`` is finished as soon as its
        vectors are ready. Returns ``pending`` if it is still to finish, and the
        new turn (``None``: nothing of it waits for the model).
        """
        wanting: list[tuple[_Job[V], Stage[V, Any]]] = []
        for job in batch:
            if pending is not None and pending.vectors.done():
                self._finish_turn(pending)
                pending = None
            if job.future.cancelled():  # the client left before its turn
                continue
            started, stage = self._attempt(job, job.start)
            if not started:
                continue
            vec = None
            if stage.wants_vector and job.text is not None:
                vec = self._at_hand(job.text)
                if vec is None:
                    wanting.append((job, stage))
                    continue
            self._finish(job, stage, vec)  # answered without a model run: at once
        texts = list(dict.fromkeys(job.text for job, _ in wanting if job.text is not None))
        if self._embed is None or len(texts) < 2:
            # Alone, a search embeds its own query if it needs it (the model
            # gains nothing from a batch of one, and nothing else waits for it).
            if pending is not None:  # the older turn first
                self._finish_turn(pending)
                pending = None
            for job, stage in wanting:
                self._finish(job, stage, None)
            return None, None
        return pending, _Turn(wanting, embedder.submit(self._vectors, texts))

    def _finish_turn(self, turn: _Turn[V]) -> None:
        """Finish each search of ``turn`` with its row (once the embedding is done)."""
        vectors = turn.vectors.result()  # _vectors never raises: a failure is {}
        for job, stage in turn.wanting:
            if job.future.cancelled():  # the client left while earlier searches ran
                continue
            self._finish(job, stage, vectors.get(job.text) if job.text is not None else None)

    def _finish(self, job: _Job[V], stage: Stage[V, Any], vec: V | None) -> None:
        done, answer = self._attempt(job, lambda: stage.finish(vec))
        if done:
            self._deliver(job, True, answer)

    def _attempt(self, job: _Job[V], step: Callable[[], Any]) -> tuple[bool, Any]:
        """``(True, step())``, or ``(False, None)`` once its exception went to the request."""
        try:
            return True, step()
        except StopIteration as e:  # a future cannot hold one
            self._deliver(job, False, RuntimeError(f"the search raised {e!r}"))
        except BaseException as e:  # the request's own failure, raised in the request
            self._deliver(job, False, e)
        return False, None

    def _at_hand(self, text: str) -> V | None:
        """The vector ``known`` gives for ``text`` (``None``: none, or it failed)."""
        if self._known is None:
            return None
        try:
            rows = self._known([text])
            vec = rows[0] if len(rows) == 1 else None
        except Exception:
            _log.warning("memstore: looking up a query's vector failed", exc_info=True)
            return None
        if vec is not None:
            self.at_hand += 1
        return vec

    def _vectors(self, texts: list[str]) -> dict[str, V]:
        """The turn's distinct texts embedded in one call (empty when it fails)."""
        try:
            assert self._embed is not None  # _start submits none without one
            rows = self._embed(texts)
            if len(rows) != len(texts):
                raise ValueError(f"embed returned {len(rows)} rows for {len(texts)} texts")
        except Exception:
            # Each search embeds its own query instead: a text that breaks the
            # model fails its own request only.
            _log.warning(
                "memstore: a batch of %d query embeddings failed", len(texts), exc_info=True
            )
            return {}
        self.batches += 1
        self.embedded += len(texts)
        return dict(zip(texts, rows, strict=True))

    @staticmethod
    def _deliver(job: _Job[V], ok: bool, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            job.loop.call_soon_threadsafe(_settle, job.future, ok, value)


def attach_batcher(app: Any, memory: Any) -> QueryBatcher[Any]:
    """A new batcher for the searches an ASGI ``app`` runs over ``memory``, kept on the app.

    It embeds with ``memory.embed_queries`` (:meth:`~memstore.memory.Memory.embed_queries`;
    no embedding when ``memory.cells`` is ``None``, a Memory without an embedder), and
    takes the queries asked lately from the CellStore's query cache
    (:meth:`~memstore_index.CellStore.remembered_queries`) without waiting for a model run. It
    is ``app.state.query_batcher``; :func:`close_batcher` closes it, and an app
    dropped without that closes it when collected (its idle thread ends).
    """
    embed = known = None
    if getattr(memory, "cells", None) is not None:

        def embed(texts: list[str]) -> list[Any]:
            return list(memory.embed_queries(texts))

        known = getattr(memory.cells, "remembered_queries", None)

    batcher: QueryBatcher[Any] = QueryBatcher(embed, known=known)
    app.state.query_batcher = batcher
    weakref.finalize(app, batcher.close, 0)
    return batcher


def close_batcher(app: Any, timeout: float | None = None) -> None:
    """Close ``app``'s batcher (:func:`attach_batcher`), if it has one: queued searches finish.

    A server calls it once it stops serving, before it closes the Memory.
    """
    batcher = getattr(app.state, "query_batcher", None)
    if isinstance(batcher, QueryBatcher):
        batcher.close(timeout)
