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
2. the worker takes what is queued (up to ``max_batch`` at a time) and
   starts each search. One that wants no vector (a confident lexical
   answer), or whose query's vector is at hand (``known``, such as a query
   cache: a server is asked the same questions again and again), is
   finished and answered at once, in the order the requests came. The texts
   of the rest wait for the model;
3. the model runs on a second thread (a model run releases the GIL), one
   call at a time: as soon as it is free it is given every text waiting
   (each distinct text once, at most ``max_batch``), and each search of that
   call finishes with its row as soon as the call returns (the worker looks
   before each search it starts), once the next call is made: the model
   works while the worker finishes. The worker never waits for the model
   while a request is queued: it goes on starting the requests that come,
   so a search that needs no model run waits for none, and one whose text
   goes to the model waits at most for the call running when its lexical
   pass ended, then its own. Under load the model and the searches' Python
   work run on two cores instead of one after the other, and each call
   holds what came during the one before (the batch grows with the load);
   a request that comes to an idle server is embedded at once, alone;
4. look-ahead (``look_ahead``; opt-in, see below): under load a request waits
   in the queue for the worker longer than the model takes to embed it, so
   each call the worker makes also takes the texts of requests still queued
   (not yet started) whose vector is not at hand (``known``, asked on the
   worker) and not embedded or being embedded already, in the order they
   came, up to ``max_batch`` texts in all (the started searches' first), and
   a call is made whenever the model is free and two such texts are queued
   (one request alone, at an idle server, is embedded once its search wants
   it, as without look-ahead). A new query's model run then overlaps its
   wait in the queue instead of following its lexical pass: when its search
   starts, its vector is at hand (it finishes at once) or its call is
   running (it joins that call's turn). The model also works where it would
   wait for the worker: it is kept busy with larger calls, cheaper a text.
   The cost: a text sent ahead whose request then wants no vector (a
   confident lexical answer) was embedded for nothing (and kept in the query
   cache); :attr:`QueryBatcher.ahead_unused` counts those, of
   :attr:`QueryBatcher.ahead`: about half of them in ``benchmarks/http.py``
   with rarely repeating queries, where the local model's p99 fell from
   ~105 to ~98 ms at 32 connections (docs/benchmarks.md, branch ``eager``).
   What is sent ahead is kept for its request only until that request starts
   (its call's vectors, at most ``4 x max_batch`` texts); a repeated text is
   sent once. Not with a fast embedder on the worker (below): it embeds once
   a batch anyway. Opt-in (``look_ahead``, ``False`` by default), because a
   text embedded for nothing costs what the embedder costs: for a local model
   only its own cores' time, but for a provider a billed request and a share
   of a rate limit. :func:`attach_batcher` turns it on for an embedder whose
   ``look_ahead`` attribute is ``True`` (the local ONNX model says it).

A fast embedder is not worth a thread. A feature-hashing embedder spends tens
of microseconds a text, all of it Python holding the GIL (no second core to
gain), and its thread is free again before the worker has started the next
request, so it is called with one text nearly every time: each text pays a
call's fixed cost (checks, numpy set-up) and the hand-off (a future, a wake-up
each way), ~0.3 ms of Python where the text's own share is a tenth of that.
So the batcher times each call (its wall time a text): while the running mean
stays under ``inline_below`` (:data:`INLINE_EMBED_SECONDS`), the worker embeds
on its own thread instead, in one call for every text its batch of requests
left waiting, once it has started them all, and then finishes their searches
in order. An embedder starts on its thread (assumed slow until its first call
is timed); a model (milliseconds a text, most of it without the GIL) stays
there, and one that turns slow goes back to it (a call timed on the thread
costs at least what it would on the worker: it errs on the thread's side).
The policy is opt-in (``inline_below``, 0 by default): an embedder that waits
(a network round trip, a model's own threads) would block the worker for its
whole call, however cheap a text looks on average. :func:`attach_batcher` turns
it on for an embedder that says it ``holds_gil`` (the hash embedder does: its
work is Python on the calling thread, so a thread of its own buys nothing).

No timer: nothing waits for a batch to fill (no added latency). The
event loop only parses, routes and answers.

Failures stay with their request. If the batch's embedding call fails, each
search of the batch gets ``None`` and embeds its own query (a search that
then fails alone answers alone), whether its text was sent ahead or not; a
search that raises has its exception re-raised in its own request; a request
whose client went away (its coroutine cancelled) is skipped if its search has
not started (a text sent ahead for it counts as unused). The answers are those
of each search run alone: the look-ahead changes when a query is embedded and
with which others, not its vector.

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
import itertools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Container, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeVar

__all__ = [
    "DEFAULT_MAX_BATCH",
    "INLINE_EMBED_SECONDS",
    "BatcherClosed",
    "QueryBatcher",
    "Stage",
    "attach_batcher",
    "close_batcher",
]

DEFAULT_MAX_BATCH: Final = 64
"""Most requests the worker takes from the queue at a time, and most texts one embedding call
holds (the rest wait for the next call)."""

INLINE_EMBED_SECONDS: Final = 0.001
"""An embedder whose calls cost less than this a text (the running mean of their wall time)
runs on the worker thread, not its own. Measured on a 2-core VM where ``sum(range(10**7))``
takes 250 ms, in a server under load: the feature-hashing embedder 0.2-0.4 ms a text in
one-text calls on its thread (about what the call's hand-off costs) and 0.05-0.25 ms in
the worker's gathered calls; the local MiniLM model 4-16 ms a text (p10-p90, ~3 texts a
call), a provider more (a network round trip). The bound sits between them, a few times
from either."""

EMBED_COST_WEIGHT: Final = 0.125
"""The weight of a call's cost in the running mean :data:`INLINE_EMBED_SECONDS` is compared
with (the others' is ``1 - EMBED_COST_WEIGHT``): one slow call (a collection, a busy
machine) moves it, a run of them moves the embedder."""

_AHEAD_KEPT_CALLS: Final = 4
"""The texts sent ahead and kept until their request starts: at most this many calls' worth
(``max_batch`` each). The requests queued bound them already (each entry is dropped when its
request starts, or is skipped); this bounds a queue that grows faster than the worker."""

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
    # The look-ahead's, on the worker only (:meth:`QueryBatcher._look`):
    seen: bool = False  # looked at while queued (its text sent ahead, or found at hand)
    early: _Turn[V] | None = field(default=None, repr=False)  # the call that has its text
    owns: bool = False  # its text went to ``early`` for it (not for an earlier request)
    at_hand: V | None = field(default=None, repr=False)  # ``known``'s vector, found while queued


@dataclass(frozen=True, slots=True)
class _Turn(Generic[V]):
    """An embedding call: the searches that wait for it, its texts' vectors, and its texts.

    ``wanting`` grows while the call runs: a search whose text it holds (sent
    ahead, or another request's) joins it when it starts."""

    wanting: list[tuple[_Job[V], Stage[V, Any]]]
    vectors: Future[dict[str, V]]
    texts: Container[str] = ()


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
    requests taken at a time, and texts embedded in one call. ``inline_below``:
    seconds a text; while ``embed``'s calls cost less than that on average, the
    worker embeds on its own thread, once for every text a batch left waiting
    (``0``, the default: never; ``math.inf``: from the second call on). Give it
    only for an ``embed`` that computes on the calling thread and never waits
    (:data:`INLINE_EMBED_SECONDS` suits one that holds the GIL). ``look_ahead``: each
    call to the embedding thread also takes the texts of queued requests (the module's
    point 4); ``False`` (the default): a text goes to the model once its search has
    started and asked for it. Give it only for an ``embed`` whose wasted calls cost
    nothing but CPU (a local model, not a provider billed by the text). The worker
    thread starts with the first request (a daemon thread named ``name``).
    """

    def __init__(
        self,
        embed: Callable[[list[str]], Sequence[V]] | None,
        *,
        known: Callable[[list[str]], Sequence[V | None]] | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        inline_below: float = 0.0,
        look_ahead: bool = False,
        name: str = "memstore-query-batcher",
    ) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be a whole number of at least 1, got {max_batch!r}")
        if isinstance(inline_below, bool) or not isinstance(inline_below, int | float):
            raise ValueError(f"inline_below must be a number of seconds, got {inline_below!r}")
        if not inline_below >= 0:  # NaN too
            raise ValueError(f"inline_below must be 0 or more seconds, got {inline_below!r}")
        if not isinstance(look_ahead, bool):
            raise ValueError(f"look_ahead must be True or False, got {look_ahead!r}")
        self._embed = embed
        self._known = known
        self._max_batch = max_batch
        self._inline_below = float(inline_below)
        self._look_ahead = look_ahead
        # The worker's own (no lock): the texts sent ahead whose request has not
        # started (at most _AHEAD_KEPT_CALLS x max_batch), and the requests it took
        # from the queue that it has not started yet (batch[cursor:]).
        self._ahead: dict[str, _Turn[V]] = {}
        self._batch: list[_Job[V]] = []
        self._cursor = 0
        self._cost: float | None = None  # the running mean of a call's seconds a text
        self._clock: Callable[[], float] = time.perf_counter  # what calls are timed by
        self._name = name
        self._queue: deque[_Job[V]] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.batches = 0
        """Embedding calls made so far (a turn whose requests need no vector makes none)."""
        self.embedded = 0
        """Texts embedded so far (distinct within their batch)."""
        self.inline_batches = 0
        """Of :attr:`batches`, the calls made on the worker thread (a fast embedder's)."""
        self.at_hand = 0
        """Texts whose vector ``known`` gave (no model run)."""
        self.ahead = 0
        """Of the texts sent to the model, those sent ahead: for a request still queued."""
        self.ahead_unused = 0
        """Of :attr:`ahead`, the texts whose request then used no vector: it wanted none (a
        confident lexical answer), its search failed to start, or its client went away."""

    @property
    def inline_below(self) -> float:
        """Seconds a text under which ``embed`` runs on the worker (``0``: never)."""
        return self._inline_below

    @property
    def embeds_inline(self) -> bool:
        """Whether the worker embeds on its own thread now: the calls so far cost less than
        ``inline_below`` a text (their running mean). ``False`` before the first call."""
        cost = self._cost
        return cost is not None and cost < self._inline_below

    @property
    def look_ahead(self) -> bool:
        """Whether the texts of queued requests go to the model with the next call."""
        return self._look_ahead

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

    def _take(self, turn: _Turn[V] | None) -> list[_Job[V]] | None:
        """The next requests to start (at most ``max_batch``), or ``None``: closed and drained.

        Blocks until a request is queued or the embedding of ``turn`` (the turn
        being embedded, if any) is done; an empty list for the latter.
        """
        with self._wake:
            while not self._queue:
                if turn is not None and turn.vectors.done():
                    return []
                if turn is None and self._closed:
                    return None
                self._wake.wait()
            n = min(len(self._queue), self._max_batch)
            return [self._queue.popleft() for _ in range(n)]

    def _nudge(self, _: object = None) -> None:
        """Wake the worker (an embedding is done)."""
        with self._wake:
            self._wake.notify()

    def _work(self) -> None:
        """Start the requests as they come; embed, one call at a time, every text waiting.

        The embedding runs on a second thread (a model run releases the GIL).
        The worker never waits for it while a request is queued: it starts the
        requests queued meanwhile, answers at once those that need no model run,
        and adds the texts of the others to the next call, made as soon as the
        model is free. A search whose text goes to the model waits at most for
        the call running when its lexical pass ended and then its own; a search
        that needs no model run waits for none. With nothing else to do, the
        worker waits for whichever comes first: a request or the model. A fast
        embedder (:attr:`embeds_inline`) is called on the worker instead, once a
        batch: :meth:`_start`.
        """
        with ThreadPoolExecutor(1, thread_name_prefix=f"{self._name}-embed") as embedder:
            turn: _Turn[V] | None = None  # the texts being embedded, and their searches
            waiting: list[tuple[_Job[V], Stage[V, Any]]] = []  # for the next call
            while (batch := self._take(turn)) is not None:
                turn = self._start(batch, embedder, turn, waiting)

    def _start(
        self,
        batch: list[_Job[V]],
        embedder: Executor,
        turn: _Turn[V] | None,
        waiting: list[tuple[_Job[V], Stage[V, Any]]],
    ) -> _Turn[V] | None:
        """Start each search of ``batch``; finish at once those that need no model run.

        Finished at once: a search that wants no vector, and one whose vector is
        at hand (``known``, or a call that returned with its text, sent ahead).
        One whose text the call running holds joins that call's turn (``turn``'s
        searches, finished in order); the others join ``waiting``, the searches
        of the next embedding call. ``turn``, the call running, is finished as soon as
        its vectors are ready (checked before each start), and the next call
        made at once; or, with a fast embedder (:attr:`embeds_inline`, read once
        a batch), every text waiting is embedded here once the batch's searches
        have all started (and the thread's last call, if one runs, has returned:
        the embedder still makes one call at a time), and their searches
        finished in order. Returns the call running after the batch, if any.
        """
        inline = self.embeds_inline
        self._batch = batch
        for i, job in enumerate(batch):
            self._cursor = i  # job too: its text may go with a call made now
            turn = self._advance(turn, embedder, waiting, inline)
            early = job.early
            if job.owns and self._ahead.get(job.text or "") is early:
                del self._ahead[job.text or ""]  # kept until its request starts
            if job.future.cancelled():  # the client left before its turn
                self.ahead_unused += job.owns
                continue
            started, stage = self._attempt(job, job.start)
            if not started or not stage.wants_vector or job.text is None:
                self.ahead_unused += job.owns
                if started:
                    self._finish(job, stage, None)  # a confident answer: at once
                continue
            vec = job.at_hand
            if vec is not None:
                self.at_hand += 1
            else:
                text = job.text
                if early is None and turn is not None and text in turn.texts:
                    early = turn  # the call running has it (another request's)
                if early is None:
                    early = self._ahead.get(text)
                if early is not None and early is turn:  # running, or not finished yet
                    turn.wanting.append((job, stage))  # its searches finish in order
                    continue
                if early is not None:  # done (one call at a time: only turn runs)
                    vec = early.vectors.result().get(text)  # None: failed, embeds its own
                elif (vec := self._at_hand(text)) is None:
                    waiting.append((job, stage))
                    continue
            self._finish(job, stage, vec)  # answered without waiting for the model: at once
        self._batch, self._cursor = [], 0
        if inline:
            if turn is not None:  # the thread's last call (one call at a time): a cheap one
                turn.vectors.result()
                turn = self._advance(turn, embedder, waiting, inline)
            # One call for the whole batch's texts: its cost is mostly per call
            # (the embedder's Python and numpy set-up), the thread's hand-off too.
            while waiting and (here := self._call(None, waiting)) is not None:
                self._finish_turn(here)
        return self._advance(turn, embedder, waiting, inline)

    def _advance(
        self,
        turn: _Turn[V] | None,
        embedder: Executor,
        waiting: list[tuple[_Job[V], Stage[V, Any]]],
        inline: bool = False,
    ) -> _Turn[V] | None:
        """If the model is free: the next call (the searches ``waiting``; none when
        ``inline``: :meth:`_start` makes it), then the searches of ``turn``, the call
        that returned, finished. The call running after that, if any.

        The next call is made first, so that the model works while the worker
        finishes the searches of the last one (an idle model is the throughput
        lost when queries rarely repeat).
        """
        if turn is not None and not turn.vectors.done():
            return turn
        following = None
        if not inline and (waiting or self._look_ahead):
            following = self._call(embedder, waiting, turn)
        if turn is not None:
            self._finish_turn(turn)
        return following

    def _call(
        self,
        embedder: Executor | None,
        waiting: list[tuple[_Job[V], Stage[V, Any]]],
        last: _Turn[V] | None = None,
    ) -> _Turn[V] | None:
        """An embedding call for the first searches of ``waiting`` (taken from it): at most
        ``max_batch`` distinct texts, in the order asked, on ``embedder``'s thread (``None``:
        here, done when this returns). On the thread, with :attr:`look_ahead`, the call also
        takes the texts of queued requests (:meth:`_look`; ``last``: the call that just
        returned, whose texts need no other), but not a call of one queued request's text
        alone (an idle server's request: half of them want no vector). ``None`` when there
        is nothing to embed;
        without a model each search finishes with ``None`` instead (and there is no call)."""
        if self._embed is None:
            for job, stage in waiting:
                self._finish(job, stage, None)
            waiting.clear()
            return None
        texts: dict[str, None] = {}
        taken = 0
        for job, _ in waiting:
            if job.text is not None and job.text not in texts:
                if len(texts) == self._max_batch:
                    break
                texts[job.text] = None
            taken += 1
        wanting = waiting[:taken]
        del waiting[:taken]
        if embedder is None:
            here: Future[dict[str, V]] = Future()
            here.set_result(self._vectors(list(texts)))
            self.inline_batches += 1
            return _Turn(wanting, here, texts)
        if not self._look_ahead or (not texts and len(list(self._unseen(2))) < 2):
            early = []  # a lone request at an idle server: its text goes once it wants it
        else:
            early = self._look(texts, last)
        if not texts:
            return None
        turn = _Turn(wanting, embedder.submit(self._vectors, list(texts)), texts)
        turn.vectors.add_done_callback(self._nudge)
        for job in early:
            job.early = turn
            if job.owns:
                self._ahead[job.text or ""] = turn
        return turn

    def _look(self, texts: dict[str, None], last: _Turn[V] | None) -> list[_Job[V]]:
        """Add to ``texts`` (the call being made) those of queued requests, in the order
        they came, up to ``max_batch`` texts: the requests whose vector is not at hand
        (``known``), nor embedded or being embedded for another request (the call ``last``,
        the texts sent ahead). Each request is looked at once (``seen``); one left out by a
        full call is looked at again for the next. Returns the requests whose text the call
        will hold (``owns``: it was sent for them, counted in :attr:`ahead`)."""
        joining: list[_Job[V]] = []
        kept = _AHEAD_KEPT_CALLS * self._max_batch - len(self._ahead)  # the map's bound
        while (room := min(self._max_batch - len(texts), kept)) > 0:
            queued = list(self._unseen(room))
            if not queued:
                break
            lookup: list[_Job[V]] = []
            for job in queued:
                job.seen = True
                text = job.text or ""
                if text in texts:
                    joining.append(job)
                elif (sent := self._ahead.get(text)) is not None:
                    job.early = sent
                elif last is not None and text in last.texts:
                    job.early = last
                else:
                    lookup.append(job)
            rows = self._known_rows([job.text or "" for job in lookup])
            for job, vec in zip(lookup, rows, strict=True):
                text = job.text or ""
                if vec is not None:
                    job.at_hand = vec
                elif text in texts:
                    joining.append(job)
                elif len(texts) < self._max_batch:
                    texts[text] = None
                    job.owns = True
                    joining.append(job)
                    self.ahead += 1
                    kept -= 1
                else:
                    job.seen = False  # for the next call
        return joining

    def _unseen(self, most: int) -> Iterator[_Job[V]]:
        """The first ``most`` queued requests not looked at yet, with a text and a client, in
        the order they came: the rest of the worker's batch, then the queue (under its lock)."""
        return itertools.islice(self._unseen_all(), most)

    def _unseen_all(self) -> Iterator[_Job[V]]:
        for job in itertools.islice(self._batch, self._cursor, None):
            if not job.seen and job.text is not None and not job.future.cancelled():
                yield job
        with self._wake:
            queue = [job for job in self._queue if not job.seen and job.text is not None]
        for job in queue:
            if not job.future.cancelled():
                yield job

    def _known_rows(self, texts: list[str]) -> Sequence[V | None]:
        """``known``'s vectors for ``texts`` (all ``None``: none, or it failed)."""
        if not texts or self._known is None:
            return [None] * len(texts)
        try:
            rows = self._known(texts)
            if len(rows) == len(texts):
                return rows
        except Exception:
            _log.warning("memstore: looking up queries' vectors failed", exc_info=True)
        return [None] * len(texts)

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
        """The vector ``known`` gives for ``text`` (``None``: none, or it failed), counted."""
        vec = self._known_rows([text])[0]
        if vec is not None:
            self.at_hand += 1
        return vec

    def _vectors(self, texts: list[str]) -> dict[str, V]:
        """The turn's distinct texts embedded in one call (empty when it fails), timed.

        The call's wall time a text joins the running mean :attr:`embeds_inline`
        reads. On the embedding thread it may include waits for the GIL: an
        embedder measured there errs on the slow side, the thread's.
        """
        try:
            assert self._embed is not None  # _start submits none without one
            clock = self._clock
            began = clock()
            rows = self._embed(texts)
            spent = (clock() - began) / len(texts)
            if len(rows) != len(texts):
                raise ValueError(f"embed returned {len(rows)} rows for {len(texts)} texts")
        except Exception:
            # Each search embeds its own query instead: a text that breaks the
            # model fails its own request only.
            _log.warning(
                "memstore: a batch of %d query embeddings failed", len(texts), exc_info=True
            )
            return {}
        cost = self._cost
        self._cost = spent if cost is None else cost + EMBED_COST_WEIGHT * (spent - cost)
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

    An embedder whose ``holds_gil`` attribute is ``True`` (its ``embed`` is Python
    on the calling thread, never waiting: :class:`~memstore_index.HashEmbedder`)
    is called on the worker while its calls stay under :data:`INLINE_EMBED_SECONDS`
    a text; any other keeps a thread of its own (``inline_below`` 0). One whose
    ``look_ahead`` attribute is ``True`` (a model on the server's own cores, where a
    query embedded for nothing costs only CPU: :class:`~memstore_index.OnnxMiniLMEmbedder`)
    has the queued requests' texts embedded ahead (the module's point 4); any other,
    a provider billed by the text above all, only the texts a search asked for.
    """
    embed = known = None
    inline_below = 0.0
    look_ahead = False
    cells = getattr(memory, "cells", None)
    if cells is not None:

        def embed(texts: list[str]) -> list[Any]:
            return list(memory.embed_queries(texts))

        known = getattr(cells, "remembered_queries", None)
        embedder = getattr(cells, "embedder", None)
        if getattr(embedder, "holds_gil", False) is True:
            inline_below = INLINE_EMBED_SECONDS
        look_ahead = getattr(embedder, "look_ahead", False) is True

    batcher: QueryBatcher[Any] = QueryBatcher(
        embed, known=known, inline_below=inline_below, look_ahead=look_ahead
    )
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
