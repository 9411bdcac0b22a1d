"""memstore.web.batching.QueryBatcher: one worker thread, the queued queries embedded together.

The worker is held busy with a :class:`threading.Event` where a test needs
requests to queue behind it, so what forms a batch is decided by the test,
not by timing.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore.web.batching import BatcherClosed, QueryBatcher, _Job, _Turn


class Embedder:
    """Texts to their lengths, recording each call's batch (a real function, no mock)."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail_on = fail_on

    def __call__(self, texts: Sequence[str]) -> list[int]:
        self.calls.append(list(texts))
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return [len(t) for t in texts]


def held() -> tuple[threading.Event, threading.Event, Callable[[int | None], str]]:
    """A search that signals it started, then waits to be released."""
    started, release = threading.Event(), threading.Event()

    def search(vec: int | None) -> str:
        started.set()
        assert release.wait(30), "the test never released the worker"
        return f"held:{vec}"

    return started, release, search


async def queue_behind_held_search(
    batcher: QueryBatcher[int], jobs: list[tuple[str | None, Callable[[int | None], Any]]]
) -> tuple[Any, list[Any]]:
    """Run a held search, queue ``jobs`` while it holds the worker, release; all outcomes."""
    started, release, search = held()
    first = asyncio.ensure_future(batcher.run(None, search))
    await asyncio.to_thread(started.wait, 30)
    rest = [asyncio.ensure_future(batcher.run(text, job)) for text, job in jobs]
    await asyncio.sleep(0)  # every job is queued (run appends before its first await)
    release.set()
    outcomes = await asyncio.gather(*rest, return_exceptions=True)
    return await first, outcomes


async def stage_behind_held_search(
    batcher: QueryBatcher[int], stages: Sequence[tuple[str | None, Callable[[], Any]]]
) -> tuple[Any, list[Any]]:
    """:func:`queue_behind_held_search` for staged searches (``run_staged``)."""
    started, release, search = held()
    first = asyncio.ensure_future(batcher.run(None, search))
    await asyncio.to_thread(started.wait, 30)
    rest = [asyncio.ensure_future(batcher.run_staged(t, s)) for t, s in stages]
    await asyncio.sleep(0)
    release.set()
    return await first, list(await asyncio.gather(*rest, return_exceptions=True))


def echo(tag: str) -> Callable[[int | None], str]:
    return lambda vec: f"{tag}:{vec}"


def test_a_failing_search_fails_its_own_request_only() -> None:
    batcher: QueryBatcher[int] = QueryBatcher(Embedder())

    def broken(vec: int | None) -> str:
        raise KeyError("this request's own failure")

    jobs: list[tuple[str | None, Callable[[int | None], Any]]] = [
        ("a", echo("a")),
        ("bb", broken),
        ("ccc", echo("c")),
    ]
    _, outcomes = asyncio.run(queue_behind_held_search(batcher, jobs))
    batcher.close()
    assert outcomes[0] == "a:1" and outcomes[2] == "c:3"
    assert isinstance(outcomes[1], KeyError)


def test_a_cancelled_request_is_skipped() -> None:
    ran: list[str] = []
    batcher: QueryBatcher[int] = QueryBatcher(Embedder())

    async def main() -> list[Any]:
        started, release, search = held()
        first = asyncio.ensure_future(batcher.run(None, search))
        await asyncio.to_thread(started.wait, 30)
        gone = asyncio.ensure_future(batcher.run("gone", lambda v: ran.append("gone")))
        kept = asyncio.ensure_future(batcher.run("kept", lambda v: ran.append("kept")))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.sleep(0)
        release.set()
        return await asyncio.gather(first, gone, kept, return_exceptions=True)

    outcomes = asyncio.run(main())
    batcher.close()
    assert isinstance(outcomes[1], asyncio.CancelledError)
    assert ran == ["kept"]


def test_close_finishes_queued_requests_then_refuses_new_ones() -> None:
    batcher: QueryBatcher[int] = QueryBatcher(Embedder())

    async def main() -> tuple[list[Any], bool]:
        started, release, search = held()
        first = asyncio.ensure_future(batcher.run(None, search))
        await asyncio.to_thread(started.wait, 30)
        queued = [asyncio.ensure_future(batcher.run(t, echo(t))) for t in ("a", "bb", "ccc")]
        await asyncio.sleep(0)
        closer = threading.Thread(target=batcher.close)  # blocks until the queue is drained
        closer.start()
        while not batcher.closed:
            await asyncio.sleep(0.001)
        refused = False
        try:
            await batcher.run("late", echo("late"))
        except BatcherClosed:
            refused = True
        release.set()
        outcomes = await asyncio.gather(first, *queued)
        await asyncio.to_thread(closer.join, 30)
        return outcomes, refused and not closer.is_alive()

    outcomes, refused_and_joined = asyncio.run(main())
    assert outcomes == ["held:None", "a:1", "bb:2", "ccc:3"]
    assert refused_and_joined
    batcher.close()  # idempotent


def test_without_an_embedder_every_search_gets_none() -> None:
    batcher: QueryBatcher[int] = QueryBatcher(None)

    async def main() -> list[str]:
        return list(await asyncio.gather(*(batcher.run(t, echo(t)) for t in ("a", "b"))))

    assert asyncio.run(main()) == ["a:None", "b:None"]
    batcher.close()


def test_searches_run_off_the_event_loop_thread() -> None:
    batcher: QueryBatcher[int] = QueryBatcher(Embedder())

    async def main() -> tuple[int, int]:
        worker = await batcher.run("q", lambda v: threading.get_ident())
        return worker, threading.get_ident()

    worker, loop_thread = asyncio.run(main())
    batcher.close()
    assert worker != loop_thread


@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_max_batch_must_be_a_positive_whole_number(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_batch"):
        QueryBatcher(Embedder(), max_batch=bad)


class Staged:
    """A two-step search: its first step records itself; ``wants`` says if it wants a vector."""

    def __init__(self, tag: str, wants: bool, log: list[str], fail: str = "") -> None:
        self.tag, self.wants_vector, self.log, self.fail = tag, wants, log, fail

    def __call__(self) -> Staged:  # the start
        self.log.append(f"start {self.tag}")
        if self.fail == "start":
            raise KeyError(f"{self.tag} failed to start")
        return self

    def finish(self, vec: int | None) -> str:
        self.log.append(f"finish {self.tag}")
        if self.fail == "finish":
            raise KeyError(f"{self.tag} failed to finish")
        return f"{self.tag}:{vec}"


class HeldModel:
    """Texts to their lengths, recording each call; the first call waits to be released.

    What the worker starts while the model runs is then decided by the test, not
    by timing. ``fail_on``: a text whose call raises.
    """

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.running, self.release = threading.Event(), threading.Event()
        self.second = threading.Event()  # the second call has begun
        self.fail_on = fail_on

    def __call__(self, texts: Sequence[str]) -> list[int]:
        self.calls.append(list(texts))
        if len(self.calls) == 2:
            self.second.set()
        if len(self.calls) == 1:
            self.running.set()
            assert self.release.wait(30), "the test never released the model"
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return [len(t) for t in texts]


async def start_while_the_model_runs(
    batcher: QueryBatcher[int],
    model: HeldModel,
    stages: Sequence[tuple[str | None, Callable[[], Any]]],
    log: list[str],
) -> tuple[Any, list[Any]]:
    """Hold the model on a first text, let the worker start every one of ``stages``
    (each logs its start), release the model; the first answer and the stages' outcomes."""
    first = asyncio.ensure_future(batcher.run("first", echo("first")))
    await asyncio.to_thread(model.running.wait, 30)
    rest = [asyncio.ensure_future(batcher.run_staged(t, s)) for t, s in stages]
    for _ in range(10_000):  # the worker is free: it starts them all while the model runs
        if sum(e.startswith("start") for e in log) == len(stages):
            break
        await asyncio.sleep(0.001)
    assert not model.release.is_set()
    model.release.set()
    answers = asyncio.gather(*rest, return_exceptions=True)
    return await first, list(await asyncio.wait_for(answers, 30))  # a lost search: fail, not hang


def test_searches_started_while_the_model_runs_are_embedded_together_in_its_next_call() -> None:
    """Every search started while the model runs joins the next call: the texts of those
    that still want a vector (each distinct text once), as soon as the model is free;
    those that want none finish at once with None; a failure in either step fails its
    own request only."""
    model = HeldModel()
    batcher: QueryBatcher[int] = QueryBatcher(model)
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("confident", Staged("a", False, log)),
        ("fused", Staged("b", True, log)),
        ("also fused", Staged("c", True, log)),
        ("fused", Staged("d", True, log)),  # the same text: embedded once
        ("bad start", Staged("e", True, log, fail="start")),
        ("bad finish", Staged("f", True, log, fail="finish")),
        (None, Staged("g", True, log)),  # no text: nothing to embed
    ]
    first, outcomes = asyncio.run(start_while_the_model_runs(batcher, model, stages, log))
    batcher.close()
    assert first == "first:5"
    assert outcomes[:4] == ["a:None", "b:5", "c:10", "d:5"] and outcomes[6] == "g:None"
    assert isinstance(outcomes[4], KeyError) and isinstance(outcomes[5], KeyError)
    assert model.calls == [["first"], ["fused", "also fused", "bad finish"]]
    assert (batcher.batches, batcher.embedded) == (2, 4)
    first_wanting = log.index("finish b")  # after the second call
    assert all(log.index(e) < first_wanting for e in log if e.startswith("start"))
    assert log.index("finish a") < first_wanting and log.index("finish g") < first_wanting
    assert "finish e" not in log


def test_a_search_that_needs_no_model_run_is_answered_while_the_model_runs() -> None:
    """A request that arrives while the model embeds other queries, and needs no model
    run (a confident lexical answer), is answered at once: the worker does not wait
    for the model while a request is queued."""
    model = HeldModel()
    batcher: QueryBatcher[int] = QueryBatcher(model)
    log: list[str] = []

    async def main() -> tuple[bool, list[Any]]:
        started, release, search = held()
        first = asyncio.ensure_future(batcher.run(None, search))
        await asyncio.to_thread(started.wait, 30)
        fused = [  # two texts: every worker sends them to the model thread
            asyncio.ensure_future(batcher.run_staged(t, Staged(t, True, log)))
            for t in ("ab", "abc")
        ]
        await asyncio.sleep(0)
        release.set()
        await asyncio.to_thread(model.running.wait, 30)
        confident = asyncio.ensure_future(batcher.run_staged("c", Staged("c", False, log)))
        done, _ = await asyncio.wait([confident], timeout=5)
        answered_meanwhile = confident in done and not model.release.is_set()
        model.release.set()
        return answered_meanwhile, list(await asyncio.gather(first, confident, *fused))

    answered_meanwhile, outcomes = asyncio.run(main())
    batcher.close()
    assert outcomes == ["held:None", "c:None", "ab:2", "abc:3"]
    assert answered_meanwhile


def test_the_next_call_is_made_before_the_last_ones_searches_finish() -> None:
    """When a call returns, the texts that came meanwhile go to the model before the
    worker finishes the returned call's searches: the model works meanwhile. Here the
    first call's search finishes only once the second call has begun."""
    model = HeldModel()
    batcher: QueryBatcher[int] = QueryBatcher(model)
    log: list[str] = []
    overlapped: list[bool] = []

    class WaitsForTheNextCall(Staged):
        def finish(self, vec: int | None) -> str:
            overlapped.append(model.second.wait(5))
            return super().finish(vec)

    async def main() -> list[Any]:
        first = asyncio.ensure_future(
            batcher.run_staged("first", WaitsForTheNextCall("first", True, log))
        )
        await asyncio.to_thread(model.running.wait, 30)
        later = asyncio.ensure_future(batcher.run_staged("later", Staged("later", True, log)))
        for _ in range(10_000):
            if "start later" in log:
                break
            await asyncio.sleep(0.001)
        model.release.set()
        return list(await asyncio.gather(first, later))

    assert asyncio.run(main()) == ["first:5", "later:5"]
    batcher.close()
    assert model.calls == [["first"], ["later"]]
    assert overlapped == [True]


def test_max_batch_caps_a_call() -> None:
    model = HeldModel()
    batcher: QueryBatcher[int] = QueryBatcher(model, max_batch=2)
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("x" * n, Staged(str(n), True, log)) for n in range(1, 6)
    ]
    _, outcomes = asyncio.run(start_while_the_model_runs(batcher, model, stages, log))
    batcher.close()
    assert outcomes == [f"{n}:{n}" for n in range(1, 6)]
    assert model.calls == [["first"], ["x", "xx"], ["xxx", "xxxx"], ["xxxxx"]]


def test_a_failing_call_leaves_each_search_to_embed_its_own() -> None:
    model = HeldModel(fail_on="poison")
    batcher: QueryBatcher[int] = QueryBatcher(model)
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("ok", Staged("a", True, log)),
        ("poison", Staged("b", True, log)),
    ]
    _, outcomes = asyncio.run(start_while_the_model_runs(batcher, model, stages, log))
    batcher.close()
    # No vector for anyone: each search falls back to embedding its own query.
    assert outcomes == ["a:None", "b:None"]
    assert model.calls[-1] == ["ok", "poison"]


def test_searches_whose_vectors_are_at_hand_finish_in_order_without_a_model_run() -> None:
    """A search whose query's vector ``known`` gives finishes as soon as it starts,
    before the next search starts; only the texts with no vector at hand go to the
    model, and their searches finish after."""
    model = HeldModel()
    cached = {"ab": 102, "cd": 104}
    looked_up: list[list[str]] = []

    def known(texts: list[str]) -> list[int | None]:
        looked_up.append(list(texts))
        return [cached.get(t) for t in texts]

    batcher: QueryBatcher[int] = QueryBatcher(model, known=known)
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("ab", Staged("a", True, log)),
        ("new", Staged("b", True, log)),
        ("cd", Staged("c", True, log)),
        ("confident", Staged("d", False, log)),
        ("newer", Staged("e", True, log)),
    ]
    _, outcomes = asyncio.run(start_while_the_model_runs(batcher, model, stages, log))
    batcher.close()
    assert outcomes == ["a:102", "b:3", "c:104", "d:None", "e:5"]
    assert model.calls == [["first"], ["new", "newer"]]
    assert ["confident"] not in looked_up  # a search that wants no vector looks up nothing
    assert log[:6] == ["start a", "finish a", "start b", "start c", "finish c", "start d"]
    assert log.index("finish d") < log.index("start e") < log.index("finish b")
    assert batcher.at_hand == 2


def test_turns_with_every_vector_at_hand_answer_in_the_order_asked() -> None:
    """No model run to overlap: a turn finishes before the next one starts."""
    emb = Embedder()
    batcher: QueryBatcher[int] = QueryBatcher(
        emb, known=lambda texts: [len(t) for t in texts], max_batch=2
    )
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        (f"{tag}-text", Staged(tag, True, log)) for tag in ("a1", "a2", "b1", "b2")
    ]
    _, outcomes = asyncio.run(stage_behind_held_search(batcher, stages))
    batcher.close()
    assert outcomes == ["a1:7", "a2:7", "b1:7", "b2:7"]
    assert emb.calls == []
    assert log == [
        f"{step} {tag}" for tag in ("a1", "a2", "b1", "b2") for step in ("start", "finish")
    ]


def test_a_failing_lookup_leaves_the_texts_to_the_model() -> None:
    emb = Embedder()

    def known(texts: list[str]) -> list[int | None]:
        raise RuntimeError("the cache is broken")

    batcher: QueryBatcher[int] = QueryBatcher(emb, known=known)
    jobs: list[tuple[str | None, Callable[[int | None], Any]]] = [
        ("ab", echo("a")),
        ("abc", echo("b")),
    ]
    _, outcomes = asyncio.run(queue_behind_held_search(batcher, jobs))
    batcher.close()
    assert outcomes == ["a:2", "b:3"]
    assert sorted(t for call in emb.calls for t in call) == ["ab", "abc"]


def test_a_turn_finishes_as_soon_as_its_vectors_are_ready() -> None:
    """The next searches' starts do not hold back searches whose rows are ready: a
    turn whose embedding is done finishes before the next search starts."""
    batcher: QueryBatcher[int] = QueryBatcher(Embedder())
    log: list[str] = []

    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()

        def job(tag: str, text: str) -> _Job[int]:
            return _Job(text, Staged(tag, True, log), loop, loop.create_future())

        a1, a2 = job("a1", "x"), job("a2", "yy")
        done: Future[dict[str, int]] = Future()
        done.set_result({"x": 1, "yy": 2})
        turn: _Turn[int] | None = _Turn([(a1, a1.start()), (a2, a2.start())], done)
        b1, b2 = job("b1", "zzz"), job("b2", "wwww")
        waiting: list[Any] = []
        with ThreadPoolExecutor(1) as embedder:
            turn = batcher._start([b1, b2], embedder, turn, waiting)
            while turn is not None:  # what the worker does until nothing waits
                turn.vectors.result()
                turn = batcher._advance(turn, embedder, waiting)
        return list(await asyncio.gather(a1.future, a2.future, b1.future, b2.future))

    assert asyncio.run(main()) == ["a1:1", "a2:2", "b1:3", "b2:4"]
    assert log[:5] == ["start a1", "start a2", "finish a1", "finish a2", "start b1"]
    assert log.index("finish b1") < log.index("finish b2")
    batcher.close()


def test_close_finishes_a_started_turn() -> None:
    emb = Embedder()
    batcher: QueryBatcher[int] = QueryBatcher(emb)
    log: list[str] = []

    async def main() -> list[Any]:
        started, release, search = held()
        first = asyncio.ensure_future(batcher.run(None, search))
        await asyncio.to_thread(started.wait, 30)
        rest = [
            asyncio.ensure_future(batcher.run_staged(t, Staged(t, True, log)))
            for t in ("xx", "yyy")
        ]
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(asyncio.to_thread(batcher.close))
        await asyncio.sleep(0.05)
        release.set()
        await closing
        await first
        return list(await asyncio.gather(*rest))

    assert asyncio.run(main()) == ["xx:2", "yyy:3"]
    assert sorted(t for call in emb.calls for t in call) == ["xx", "yyy"]


# ------------------------------------------------------------------ any mix, any timing

_request = st.tuples(
    st.sampled_from([None, "a", "bb", "ccc", "poison"]),  # repeated texts share a row
    st.booleans(),  # staged (run_staged) or whole (run)
    st.booleans(),  # wants a vector (staged only)
    st.sampled_from(["", "", "", "start", "finish"]),  # where it fails, if it does
    st.booleans(),  # cancelled by its client right after it is queued
    st.integers(0, 3),  # event-loop turns to wait before the next request
)


@pytest.mark.parametrize("inline_below", [0.0, math.inf])
@settings(max_examples=60, deadline=None)
@given(st.lists(_request, min_size=1, max_size=40), st.integers(1, 8))
def test_every_request_gets_its_own_answer_whatever_the_mix_and_timing(
    inline_below: float,
    requests: list[tuple[str | None, bool, bool, str, bool, int]],
    max_batch: int,
) -> None:
    """Whatever the mix of whole and staged searches, failures, cancellations and
    arrival times, each request gets its own outcome: its own search's answer with
    its own text's vector (or ``None``: alone in its turn, the batch's embedding
    failed, or it wants none), its own exception, or its cancellation; and the
    worker embeds only texts that were asked for and have no vector at hand
    (``known`` remembers "bb"), in calls of at most ``max_batch`` distinct texts; on the
    embedding thread (``inline_below`` 0) or, after the first call, on the worker (inf)."""
    calls: list[list[str]] = []

    def embed(texts: Sequence[str]) -> list[str]:
        calls.append(list(texts))
        if "poison" in texts:
            raise RuntimeError("the model cannot embed 'poison'")
        return [f"v({t})" for t in texts]

    def known(texts: list[str]) -> list[str | None]:  # a cache that remembers "bb"
        return [f"v({t})" if t == "bb" else None for t in texts]

    batcher: QueryBatcher[str] = QueryBatcher(
        embed, known=known, max_batch=max_batch, inline_below=inline_below
    )

    def search(tag: int, fail: str) -> Callable[[str | None], str]:
        def run(vec: str | None) -> str:
            if fail:
                raise KeyError(tag)
            return f"{tag}:{vec}"

        return run

    class Stage:
        def __init__(self, tag: int, wants: bool, fail: str) -> None:
            self.tag, self.wants_vector, self.fail = tag, wants, fail

        def start(self) -> Stage:
            if self.fail == "start":
                raise KeyError(self.tag)
            return self

        def finish(self, vec: str | None) -> str:
            if self.fail == "finish":
                raise KeyError(self.tag)
            return f"{self.tag}:{vec}"

    async def main() -> list[Any]:
        futures = []
        for tag, (text, staged, wants, fail, cancel, pause) in enumerate(requests):
            job = (
                batcher.run_staged(text, Stage(tag, wants, fail).start)
                if staged
                else batcher.run(text, search(tag, fail))
            )
            fut = asyncio.ensure_future(job)
            futures.append(fut)
            if cancel:
                await asyncio.sleep(0)  # queued first, then its client leaves
                fut.cancel()
            for _ in range(pause):
                await asyncio.sleep(0)
        done = asyncio.gather(*futures, return_exceptions=True)
        return list(await asyncio.wait_for(done, 30))

    outcomes = asyncio.run(main())
    batcher.close(30)
    for tag, ((text, staged, wants, fail, cancel, _), got) in enumerate(
        zip(requests, outcomes, strict=True)
    ):
        if isinstance(got, asyncio.CancelledError):
            assert cancel
        elif fail:
            assert isinstance(got, KeyError) and got.args == (tag,)
        else:
            vec = got.split(":", 1)[1]
            own = text is not None and (wants or not staged) and text != "poison"
            assert vec in (("None", f"v({text})") if own else ("None",)), (tag, got)
    asked = {text for text, *_ in requests if text is not None}
    for call in calls:
        assert len(call) == len(set(call)) <= max_batch
        assert set(call) <= asked - {"bb"}
