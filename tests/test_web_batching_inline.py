"""memstore.web.batching.QueryBatcher with a fast embedder: its queries embedded on the worker.

An embedder whose calls cost less than ``inline_below`` a text (their running mean) is
called on the worker thread, once for every text a batch of requests left waiting. The
tests pick the path with ``inline_below`` 0 (never) or ``math.inf`` (from the second
call on), or move the embedder with a clock it advances itself: no wall-clock threshold.
"""

from __future__ import annotations

import asyncio
import math
import threading
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from memstore import Item, Memory
from memstore.web.batching import (
    EMBED_COST_WEIGHT,
    INLINE_EMBED_SECONDS,
    QueryBatcher,
    attach_batcher,
    close_batcher,
)
from memstore_index import HashEmbedder
from tests.test_web_batching import (
    Embedder,
    HeldModel,
    Staged,
    echo,
    held,
    queue_behind_held_search,
    stage_behind_held_search,
    start_while_the_model_runs,
)


class ThreadedEmbedder(Embedder):
    """:class:`Embedder` that also records the thread each call ran on."""

    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__(fail_on)
        self.threads: list[int] = []

    def __call__(self, texts: Sequence[str]) -> list[int]:
        self.threads.append(threading.get_ident())
        return super().__call__(texts)


def worker_ident(batcher: QueryBatcher[int]) -> int:
    """The worker thread's id (the thread its searches run on)."""

    async def main() -> int:
        return await batcher.run(None, lambda v: threading.get_ident())

    return asyncio.run(main())


def first_call(batcher: QueryBatcher[int]) -> None:
    """One request with a text: the embedder's first call, on the embedding thread, timed."""

    async def main() -> str:
        return await batcher.run("warm", echo("warm"))

    assert asyncio.run(main()) == "warm:4"


def test_a_fast_embedder_embeds_a_whole_batch_on_the_worker_in_one_call() -> None:
    """Once its calls are measured cheap, the worker embeds every text its batch left
    waiting in one call on its own thread, after starting every search of the batch;
    searches that need no model run finish as they start, the others after the call, in
    the order asked."""
    emb = ThreadedEmbedder()
    batcher: QueryBatcher[int] = QueryBatcher(emb, inline_below=math.inf)
    assert not batcher.embeds_inline  # an embedder starts on its own thread
    first_call(batcher)
    assert batcher.embeds_inline
    worker = worker_ident(batcher)
    assert emb.threads[0] != worker
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("ab", Staged("a", True, log)),
        ("confident", Staged("b", False, log)),
        ("cde", Staged("c", True, log)),
        ("ab", Staged("d", True, log)),  # the same text: embedded once
        (None, Staged("e", True, log)),
        ("fghi", Staged("f", True, log)),
    ]
    _, outcomes = asyncio.run(stage_behind_held_search(batcher, stages))
    batcher.close()
    assert outcomes == ["a:2", "b:None", "c:3", "d:2", "e:None", "f:4"]
    assert emb.calls == [["warm"], ["ab", "cde", "fghi"]]
    assert emb.threads[1] == worker
    assert (batcher.batches, batcher.inline_batches, batcher.embedded) == (2, 1, 4)
    starts = [e for e in log if e.startswith("start")]
    assert log[: len(starts) + 2] == [
        "start a", "start b", "finish b", "start c", "start d", "start e", "finish e", "start f",
    ]  # fmt: skip
    assert log[len(starts) + 2 :] == ["finish a", "finish c", "finish d", "finish f"]


def test_a_slow_embedder_stays_on_its_thread() -> None:
    """``inline_below=0``: every call on the embedding thread, as a model's."""
    emb = ThreadedEmbedder()
    batcher: QueryBatcher[int] = QueryBatcher(emb, inline_below=0)
    first_call(batcher)
    jobs: list[tuple[str | None, Callable[[int | None], Any]]] = [
        (t, echo(t)) for t in ("ab", "abc")
    ]
    _, outcomes = asyncio.run(queue_behind_held_search(batcher, jobs))
    worker = worker_ident(batcher)
    batcher.close()
    assert outcomes == ["ab:2", "abc:3"] and not batcher.embeds_inline
    assert worker not in emb.threads and batcher.inline_batches == 0


def test_inline_calls_hold_at_most_max_batch_texts() -> None:
    emb = ThreadedEmbedder()
    batcher: QueryBatcher[int] = QueryBatcher(emb, inline_below=math.inf, max_batch=2)
    first_call(batcher)
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("x" * n, Staged(str(n), True, log)) for n in range(1, 6)
    ]
    _, outcomes = asyncio.run(stage_behind_held_search(batcher, stages))
    batcher.close()
    assert outcomes == [f"{n}:{n}" for n in range(1, 6)]
    # the worker takes 2 requests at a time: a call a batch, after the batch's starts
    assert emb.calls[1:] == [["x", "xx"], ["xxx", "xxxx"], ["xxxxx"]]
    assert log.index("start 2") < log.index("finish 1") < log.index("start 3")
    assert batcher.inline_batches == 3


def test_texts_left_waiting_for_the_thread_are_embedded_on_the_worker_once_it_is_cheap() -> None:
    """The texts that waited for the embedder's first call (on its thread) are embedded
    on the worker once that call is timed cheap: all of them, ``max_batch`` a call."""
    model = HeldModel()
    batcher: QueryBatcher[int] = QueryBatcher(model, inline_below=math.inf, max_batch=2)
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        (t, Staged(t, True, log)) for t in ("a", "bb", "ccc")
    ]
    first, outcomes = asyncio.run(start_while_the_model_runs(batcher, model, stages, log))
    batcher.close()
    assert first == "first:5" and outcomes == ["a:1", "bb:2", "ccc:3"]
    assert model.calls == [["first"], ["a", "bb"], ["ccc"]]
    assert batcher.inline_batches == 2


def test_inline_failures_stay_with_their_request() -> None:
    """On the worker as on the thread: a failing embedding call leaves each search to
    embed its own query (None), a failing start or finish fails its own request."""
    emb = ThreadedEmbedder(fail_on="poison")
    batcher: QueryBatcher[int] = QueryBatcher(emb, inline_below=math.inf)
    first_call(batcher)
    log: list[str] = []
    poisoned: list[tuple[str | None, Callable[[], Any]]] = [
        ("ok", Staged("a", True, log)),
        ("poison", Staged("b", True, log)),
        ("bad start", Staged("c", True, log, fail="start")),
        ("bad finish", Staged("d", True, log, fail="finish")),
        ("fine", Staged("e", False, log)),
    ]
    _, outcomes = asyncio.run(stage_behind_held_search(batcher, poisoned))
    assert outcomes[0] == "a:None" and outcomes[1] == "b:None" and outcomes[4] == "e:None"
    assert isinstance(outcomes[2], KeyError) and isinstance(outcomes[3], KeyError)
    assert emb.calls[-1] == ["ok", "poison", "bad finish"]
    _, after = asyncio.run(stage_behind_held_search(batcher, [("ok", Staged("f", True, log))]))
    batcher.close()
    assert after == ["f:2"] and batcher.inline_batches == 2  # the worker lives on


def test_close_drains_inline() -> None:
    emb = ThreadedEmbedder()
    batcher: QueryBatcher[int] = QueryBatcher(emb, inline_below=math.inf)
    first_call(batcher)

    async def main() -> list[Any]:
        started, release, search = held()
        first = asyncio.ensure_future(batcher.run(None, search))
        await asyncio.to_thread(started.wait, 30)
        queued = [asyncio.ensure_future(batcher.run(t, echo(t))) for t in ("a", "bb", "ccc")]
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(asyncio.to_thread(batcher.close))
        while not batcher.closed:
            await asyncio.sleep(0.001)
        release.set()
        await closing
        return list(await asyncio.gather(first, *queued))

    assert asyncio.run(main()) == ["held:None", "a:1", "bb:2", "ccc:3"]
    assert emb.calls[-1] == ["a", "bb", "ccc"] and batcher.inline_batches == 1


class Clock:
    """A clock the embedder moves: each call costs ``per_text`` seconds a text."""

    def __init__(self) -> None:
        self.now, self.per_text = 0.0, 0.0

    def __call__(self) -> float:
        return self.now


def test_an_embedder_moves_between_threads_with_its_running_mean_cost() -> None:
    """The mean of a call's cost a text decides: cheap calls move the embedder to the
    worker, one slow call (the mean jumps by ``EMBED_COST_WEIGHT`` of it) moves it
    back to its thread, and cheap calls bring it back again."""
    clock = Clock()
    emb = ThreadedEmbedder()

    def embed(texts: Sequence[str]) -> list[int]:
        clock.now += clock.per_text * len(texts)
        return emb(texts)

    batcher: QueryBatcher[int] = QueryBatcher(embed, inline_below=1.0)
    batcher._clock = clock
    worker = worker_ident(batcher)
    ran_on: list[bool] = []  # whether each call ran on the worker

    def one(text: str, per_text: float) -> None:
        clock.per_text = per_text
        first_call_of = len(emb.calls)

        async def main() -> int:
            return await batcher.run(text, lambda v: v or 0)

        assert asyncio.run(main()) == len(text)
        ran_on.extend(t == worker for t in emb.threads[first_call_of:])

    one("a", 0.5)  # the first call: on its thread, measured cheap
    assert batcher.embeds_inline
    one("bb", 0.5)  # on the worker
    slow = 0.5 + 0.5 / EMBED_COST_WEIGHT + 0.5  # lifts the mean from 0.5 to just over 1
    one("ccc", slow)  # on the worker, measured slow
    assert not batcher.embeds_inline
    one("dddd", 0.0)  # back on its thread, measured cheap: the mean falls under 1 again
    assert batcher.embeds_inline
    one("eeeee", 0.0)
    batcher.close()
    assert ran_on == [False, True, True, False, True]


@pytest.mark.parametrize("bad", [-1.0, math.nan, True, "0.1"])
def test_inline_below_must_be_a_number_of_seconds(bad: Any) -> None:
    with pytest.raises(ValueError, match="inline_below"):
        QueryBatcher(Embedder(), inline_below=bad)


def test_the_switch_to_the_worker_waits_for_the_threads_last_call() -> None:
    """The embedder makes one call at a time, across the switch: a call the thread was
    handed just before its embedder was measured cheap returns before the worker makes
    its own. (A 0.2 s look for an overlapping call: it can only miss a bug, not fail.)"""
    clock = Clock()
    clock.per_text = 0.5  # cheap against inline_below=1: the worker's after the first call
    gates = {"first": threading.Event(), "x": threading.Event()}
    entered = {t: threading.Event() for t in ("first", "x", "z")}
    running: list[int] = [0]
    most: list[int] = [0]
    lock = threading.Lock()

    def embed(texts: Sequence[str]) -> list[int]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        entered[texts[0]].set()
        if texts[0] in gates:
            assert gates[texts[0]].wait(30)
        clock.now += clock.per_text * len(texts)
        with lock:
            running[0] -= 1
        return [len(t) for t in texts]

    batcher: QueryBatcher[int] = QueryBatcher(embed, inline_below=1.0)
    batcher._clock = clock
    log: list[str] = []
    y_started, y_release = threading.Event(), threading.Event()

    class HeldStart(Staged):
        def __call__(self) -> Staged:
            y_started.set()
            assert y_release.wait(30)
            return super().__call__()

    async def main() -> list[Any]:
        first = asyncio.ensure_future(batcher.run("first", echo("first")))
        await asyncio.to_thread(entered["first"].wait, 30)  # the thread's first call runs
        x = asyncio.ensure_future(batcher.run_staged("x", Staged("x", True, log)))
        y = asyncio.ensure_future(batcher.run_staged(None, HeldStart("y", False, log)))
        await asyncio.to_thread(y_started.wait, 30)  # x waits for the model; y holds the worker
        gates["first"].set()  # the first call returns, measured cheap...
        for _ in range(10_000):
            if batcher.embeds_inline:
                break
            await asyncio.sleep(0.001)
        y_release.set()  # ...and, before y's batch ends, "x" goes to the thread
        await asyncio.to_thread(entered["x"].wait, 30)
        z = asyncio.ensure_future(batcher.run_staged("z", Staged("z", True, log)))
        overlapped = await asyncio.to_thread(entered["z"].wait, 0.2)
        gates["x"].set()
        return [overlapped, *await asyncio.gather(first, x, y, z)]

    outcomes = asyncio.run(main())
    batcher.close()
    assert outcomes == [False, "first:5", "x:1", "y:None", "z:1"]
    assert most[0] == 1 and batcher.inline_batches == 1


class _Starlette:
    """What :func:`attach_batcher` needs of an app: a ``state`` to keep the batcher on."""

    def __init__(self) -> None:
        self.state = types.SimpleNamespace()


class _Waiting(HashEmbedder):
    """A hash embedder that does not say it holds the GIL (as a model or a provider)."""

    holds_gil = False


@pytest.mark.parametrize(
    ("embedder", "inline_below"),
    [(HashEmbedder(dim=32), INLINE_EMBED_SECONDS), (_Waiting(dim=32), 0.0), (None, 0.0)],
)
def test_attach_batcher_embeds_on_the_worker_only_for_an_embedder_that_holds_the_gil(
    tmp_path: Path, embedder: HashEmbedder | None, inline_below: float
) -> None:
    """A server's batcher calls the hash embedder on its worker; any other embedder (one
    that may wait: a model's threads, a provider's round trip) keeps its own thread."""
    with Memory(tmp_path / "m", embedder=embedder) as memory:
        memory.add(Item(kind="fact", content="the deploy runs at noon"))
        app = _Starlette()
        batcher = attach_batcher(app, memory)
        try:
            assert app.state.query_batcher is batcher
            assert batcher.inline_below == inline_below

            async def main() -> list[str]:
                def search(vec: Any) -> str:
                    hits = memory.search("deploy noon", query_vector=vec)
                    return hits[0].item.content

                return list(
                    await asyncio.gather(*(batcher.run("deploy noon", search) for _ in range(3)))
                )

            assert asyncio.run(main()) == ["the deploy runs at noon"] * 3
        finally:
            close_batcher(app)


class _LocalModel(_Waiting):
    """An embedder that says a query embedded for nothing costs only CPU (as a local model)."""

    look_ahead = True


class _Provider(_Waiting):
    """An embedder that does not say it (as a provider billed by the text)."""


@pytest.mark.parametrize(
    ("embedder", "look_ahead"),
    [(_LocalModel(dim=32), True), (_Provider(dim=32), False), (None, False)],
)
def test_attach_batcher_looks_ahead_only_for_an_embedder_that_says_it_may(
    tmp_path: Path, embedder: HashEmbedder | None, look_ahead: bool
) -> None:
    """The queued requests' texts are embedded ahead only for an embedder whose
    ``look_ahead`` is ``True``: a text sent ahead is wasted for a confident lexical
    answer, and a provider bills it."""
    with Memory(tmp_path / "m", embedder=embedder) as memory:
        memory.add(Item(kind="fact", content="the deploy runs at noon"))
        app = _Starlette()
        batcher = attach_batcher(app, memory)
        try:
            assert batcher.look_ahead is look_ahead

            async def main() -> list[str]:
                def search(vec: Any) -> str:
                    return memory.search("deploy noon", query_vector=vec)[0].item.content

                jobs = (batcher.run("deploy noon", search) for _ in range(3))
                return list(await asyncio.gather(*jobs))

            assert asyncio.run(main()) == ["the deploy runs at noon"] * 3
        finally:
            close_batcher(app)


def test_the_local_model_says_it_may_be_embedded_ahead() -> None:
    """The class attribute :func:`attach_batcher` reads (no model is loaded to read it)."""
    onnx = pytest.importorskip("memstore_index.onnx_embedder")
    assert onnx.OnnxMiniLMEmbedder.look_ahead is True
    assert getattr(HashEmbedder, "look_ahead", False) is False
