"""memstore.web.batching.QueryBatcher's look-ahead: queued requests' texts embedded early.

When the worker gives the model its next call, it adds the texts of requests still
queued (not started) whose vector is not at hand, so a new query's model run overlaps
its wait in the queue. What is queued and when the model returns are decided by the
tests (searches and a model that wait on :class:`threading.Event`), not by timing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore.web.batching import QueryBatcher
from tests.test_web_batching import Embedder, HeldModel, Staged, held


class SeesTheModel(Staged):
    """A staged search whose start records which texts the model had been given by then."""

    def __init__(self, tag: str, wants: bool, log: list[str], model: Embedder | HeldModel) -> None:
        super().__init__(tag, wants, log)
        self.model = model
        self.sent_before_start: list[str] = []

    def __call__(self) -> Staged:
        self.sent_before_start = [t for call in self.model.calls for t in call]
        return super().__call__()


async def release_a_queue(
    batcher: QueryBatcher[int], stages: Sequence[tuple[str | None, Callable[[], Any]]]
) -> list[Any]:
    """Hold the worker with a search that needs no vector, queue ``stages`` behind it,
    cancel none, release; their outcomes (the model is free when the worker takes them)."""
    started, release, search = held()
    first = asyncio.ensure_future(batcher.run(None, search))
    await asyncio.to_thread(started.wait, 30)
    rest = [asyncio.ensure_future(batcher.run_staged(t, s)) for t, s in stages]
    await asyncio.sleep(0)
    release.set()
    await first
    return list(await asyncio.wait_for(asyncio.gather(*rest, return_exceptions=True), 30))


@pytest.mark.parametrize("look_ahead", [True, False])
def test_a_queued_requests_text_is_embedded_while_it_waits(look_ahead: bool) -> None:
    """Requests queue while the worker is busy and the model free. With look-ahead, the
    call the worker makes before starting the first of them holds every queued text: the
    model (here held until the test lets it go) embeds the second request's query while
    the first request's first step runs, and the second's own first step runs with its
    query already sent. Without look-ahead a text waits for its request's first step."""
    model = HeldModel()
    batcher: QueryBatcher[int] = QueryBatcher(model, look_ahead=look_ahead)
    log: list[str] = []
    first, second = SeesTheModel("a", True, log, model), SeesTheModel("b", True, log, model)

    async def main() -> list[Any]:
        started, release, search = held()
        hold = asyncio.ensure_future(batcher.run(None, search))
        await asyncio.to_thread(started.wait, 30)
        rest = [
            asyncio.ensure_future(batcher.run_staged(t, s))
            for t, s in (("x", first), ("yy", second))
        ]
        await asyncio.sleep(0)
        release.set()  # the worker takes both while the model is free
        await asyncio.to_thread(model.running.wait, 30)
        for _ in range(10_000):  # the worker starts both while the model holds its call
            if "start b" in log:
                break
            await asyncio.sleep(0.001)
        assert not model.release.is_set() and len(model.calls) == 1
        model.release.set()
        await hold
        return list(await asyncio.wait_for(asyncio.gather(*rest), 30))

    assert asyncio.run(main()) == ["a:1", "b:2"]
    batcher.close()
    if look_ahead:
        assert model.calls == [["x", "yy"]]
        assert first.sent_before_start == second.sent_before_start == ["x", "yy"]
        assert (batcher.ahead, batcher.ahead_unused) == (2, 0)
    else:
        assert model.calls == [["x"], ["yy"]]
        assert (first.sent_before_start, second.sent_before_start) == ([], ["x"])
        assert batcher.ahead == 0


def test_a_free_model_takes_the_queued_texts_before_their_first_steps() -> None:
    """The worker takes queued requests while the model is free: their texts go to it in
    one call before the first of them starts, each distinct text once, and those that
    are at hand (``known``) or have no text are not sent. The searches then finish in the
    order they came."""
    model = Embedder()
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("x", SeesTheModel("a", True, log, model)),
        ("yy", Staged("b", True, log)),
        ("x", Staged("c", True, log)),  # the same text: sent once
        ("cached", Staged("d", True, log)),
        (None, Staged("e", True, log)),
    ]
    batcher: QueryBatcher[int] = QueryBatcher(
        model,
        known=lambda texts: [100 if t == "cached" else None for t in texts],
        look_ahead=True,
    )
    outcomes = asyncio.run(release_a_queue(batcher, stages))
    batcher.close()
    assert outcomes == ["a:1", "b:2", "c:1", "d:100", "e:None"]
    assert model.calls == [["x", "yy"]]
    first = stages[0][1]
    assert isinstance(first, SeesTheModel) and first.sent_before_start == ["x", "yy"]
    assert (batcher.batches, batcher.embedded, batcher.ahead, batcher.at_hand) == (1, 2, 2, 1)
    assert log.index("finish a") < log.index("finish b") < log.index("finish c")


def test_a_lone_request_at_an_idle_server_is_embedded_once_its_search_wants_it() -> None:
    """Nothing else queued: the text is not sent before the request's first step (half of
    the requests need no vector), so one that needs none costs no model run."""
    model = Embedder()
    log: list[str] = []
    batcher: QueryBatcher[int] = QueryBatcher(model, look_ahead=True)

    async def main() -> list[str]:
        confident = SeesTheModel("a", False, log, model)
        fused = SeesTheModel("b", True, log, model)
        answers = [await batcher.run_staged("confident", confident)]
        answers.append(await batcher.run_staged("fused", fused))
        assert confident.sent_before_start == fused.sent_before_start == []
        return answers

    assert asyncio.run(main()) == ["a:None", "b:5"]
    batcher.close()
    assert model.calls == [["fused"]]
    assert batcher.ahead == 0


def test_texts_sent_for_requests_that_use_none_are_counted() -> None:
    """A text sent ahead whose request then needs no vector (a confident first step) or
    fails to start was embedded for nothing: :attr:`QueryBatcher.ahead_unused` counts it
    (a benchmark reports the fraction); the requests' answers are their own."""
    model = Embedder()
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("confident", Staged("a", False, log)),
        ("fused", Staged("b", True, log)),
        ("broken", Staged("c", True, log, fail="start")),
    ]
    batcher: QueryBatcher[int] = QueryBatcher(model, look_ahead=True)
    outcomes = asyncio.run(release_a_queue(batcher, stages))
    batcher.close()
    assert outcomes[:2] == ["a:None", "b:5"] and isinstance(outcomes[2], KeyError)
    assert model.calls == [["confident", "fused", "broken"]]
    assert (batcher.ahead, batcher.ahead_unused) == (3, 2)


def test_a_request_whose_text_the_running_call_holds_joins_it() -> None:
    """A request that starts while the model embeds its very text (another request's)
    waits for that call, not the next one: the text is embedded once."""
    model = HeldModel()
    batcher: QueryBatcher[int] = QueryBatcher(model, look_ahead=True)
    log: list[str] = []

    async def main() -> list[Any]:
        first = asyncio.ensure_future(batcher.run("same", lambda v: f"first:{v}"))
        await asyncio.to_thread(model.running.wait, 30)
        again = asyncio.ensure_future(batcher.run_staged("same", Staged("again", True, log)))
        for _ in range(10_000):  # the worker is free: it starts it while the model runs
            if "start again" in log:
                break
            await asyncio.sleep(0.001)
        model.release.set()
        return list(await asyncio.wait_for(asyncio.gather(first, again), 30))

    assert asyncio.run(main()) == ["first:4", "again:4"]
    batcher.close()
    assert model.calls == [["same"]]


def test_a_failed_call_leaves_each_search_to_embed_its_own() -> None:
    """A text that breaks the model, sent ahead with others, fails their call: each of
    those searches gets no vector and embeds its own query (as a search does), so only
    the request whose text breaks the model fails, whoever it was sent for."""
    model = Embedder(fail_on="poison")

    class EmbedsItsOwn(Staged):
        def __init__(self, tag: str, text: str, wants: bool, log: list[str]) -> None:
            super().__init__(tag, wants, log)
            self.text = text

        def finish(self, vec: int | None) -> str:
            if vec is None and self.wants_vector:
                vec = model([self.text])[0]  # raises for "poison" only
            return super().finish(vec)

    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("ok", EmbedsItsOwn("a", "ok", True, log)),
        ("poison", EmbedsItsOwn("b", "poison", True, log)),
        ("fine", EmbedsItsOwn("c", "fine", True, log)),
    ]
    batcher: QueryBatcher[int] = QueryBatcher(model, look_ahead=True)
    outcomes = asyncio.run(release_a_queue(batcher, stages))
    batcher.close()
    assert outcomes[0] == "a:2" and outcomes[2] == "c:4"
    assert isinstance(outcomes[1], RuntimeError)
    assert model.calls[0] == ["ok", "poison", "fine"]  # the failed call, then one each
    assert sorted(map(tuple, model.calls[1:])) == [("fine",), ("ok",), ("poison",)]


def test_close_answers_requests_whose_texts_were_sent_ahead() -> None:
    """Closing while requests wait in the queue with their texts in a call still running:
    every one is answered with its vector, and nothing is kept once they are."""
    model = HeldModel()
    batcher: QueryBatcher[int] = QueryBatcher(model, look_ahead=True)
    log: list[str] = []

    async def main() -> list[Any]:
        started, release, search = held()
        hold = asyncio.ensure_future(batcher.run(None, search))
        await asyncio.to_thread(started.wait, 30)
        texts = ("a", "bb", "ccc", "bb")
        rest = [asyncio.ensure_future(batcher.run_staged(t, Staged(t, True, log))) for t in texts]
        await asyncio.sleep(0)
        release.set()  # the worker sends their texts to the model, which holds them
        await asyncio.to_thread(model.running.wait, 30)
        closing = asyncio.ensure_future(asyncio.to_thread(batcher.close, 30))
        await asyncio.sleep(0.05)
        model.release.set()
        await closing
        await hold
        return list(await asyncio.wait_for(asyncio.gather(*rest), 30))

    assert asyncio.run(main()) == ["a:1", "bb:2", "ccc:3", "bb:2"]
    assert model.calls == [["a", "bb", "ccc"]]
    assert batcher._ahead == {}  # each text kept only until its request started


def test_a_call_holds_at_most_max_batch_texts_queued_or_waiting() -> None:
    model = Embedder()
    log: list[str] = []
    stages: list[tuple[str | None, Callable[[], Any]]] = [
        ("x" * n, Staged(str(n), True, log)) for n in range(1, 6)
    ]
    batcher: QueryBatcher[int] = QueryBatcher(model, max_batch=2, look_ahead=True)
    outcomes = asyncio.run(release_a_queue(batcher, stages))
    batcher.close()
    assert outcomes == [f"{n}:{n}" for n in range(1, 6)]
    assert all(len(call) <= 2 for call in model.calls)
    assert sorted(t for call in model.calls for t in call) == ["x" * n for n in range(1, 6)]


@pytest.mark.parametrize("bad", [0, 1, None, "yes"])
def test_look_ahead_must_be_a_bool(bad: Any) -> None:
    with pytest.raises(ValueError, match="look_ahead"):
        QueryBatcher(Embedder(), look_ahead=bad)


# ------------------------------------------------------------------ the same answers

_request = st.tuples(
    st.sampled_from([None, "a", "bb", "ccc", "dddd", "poison"]),  # repeated texts share a row
    st.booleans(),  # wants a vector
    st.sampled_from(["", "", "", "start", "finish"]),  # where it fails, if it does
    st.booleans(),  # cancelled by its client right after it is queued
    st.integers(0, 3),  # event-loop turns to wait before the next request
)


def answers(
    requests: list[tuple[str | None, bool, str, bool, int]],
    max_batch: int,
    look_ahead: bool,
    hold_model: bool,
) -> tuple[list[Any], list[list[str]], QueryBatcher[str]]:
    """Each request's outcome (an answer, or its exception's type and arguments; ``None``
    for one its client cancelled), the model's calls, and the batcher."""
    calls: list[list[str]] = []
    gate = threading.Event()

    def embed(texts: Sequence[str]) -> list[str]:
        calls.append(list(texts))
        if hold_model and len(calls) == 1:  # the first call returns once all are queued
            assert gate.wait(30)
        if "poison" in texts:
            raise RuntimeError("the model cannot embed 'poison'")
        return [f"v({t})" for t in texts]

    def known(texts: list[str]) -> list[str | None]:  # a cache that remembers "bb"
        return [f"v({t})" if t == "bb" else None for t in texts]

    batcher: QueryBatcher[str] = QueryBatcher(
        embed, known=known, max_batch=max_batch, look_ahead=look_ahead
    )

    class Search:
        """A search that embeds its own query when given no vector (as Memory.search)."""

        def __init__(self, tag: int, text: str | None, wants: bool, fail: str) -> None:
            self.tag, self.text, self.wants_vector, self.fail = tag, text, wants, fail

        def start(self) -> Search:
            if self.fail == "start":
                raise KeyError(self.tag)
            return self

        def finish(self, vec: str | None) -> str:
            if self.fail == "finish":
                raise KeyError(self.tag)
            if vec is None and self.wants_vector and self.text is not None:
                if self.text == "poison":
                    raise RuntimeError("the model cannot embed 'poison'")
                vec = f"v({self.text})"
            return f"{self.tag}:{vec}"

    async def main() -> list[Any]:
        futures = []
        for tag, (text, wants, fail, cancel, pause) in enumerate(requests):
            search = Search(tag, text, wants, fail)
            fut = asyncio.ensure_future(batcher.run_staged(text, search.start))
            futures.append(fut)
            if cancel:
                await asyncio.sleep(0)  # queued first, then its client leaves
                fut.cancel()
            for _ in range(pause):
                await asyncio.sleep(0)
        gate.set()
        done = asyncio.gather(*futures, return_exceptions=True)
        return list(await asyncio.wait_for(done, 30))

    outcomes = asyncio.run(main())
    batcher.close(30)
    seen: list[Any] = []
    for (*_, cancel, _pause), got in zip(requests, outcomes, strict=True):
        if cancel:
            seen.append(None)
        elif isinstance(got, BaseException):
            seen.append((type(got).__name__, got.args))
        else:
            seen.append(got)
    return seen, calls, batcher


@settings(max_examples=60, deadline=None)
@given(st.lists(_request, min_size=1, max_size=40), st.integers(1, 8), st.booleans())
def test_look_ahead_on_and_off_give_the_same_answers(
    requests: list[tuple[str | None, bool, str, bool, int]], max_batch: int, hold_model: bool
) -> None:
    """Whatever the mix of texts (repeated, at hand, breaking the model, none), first
    steps that want a vector or not, failures, cancellations and arrival times, every
    request gets the same outcome with look-ahead as without; the model is given only
    texts that were asked for and are not at hand, each at most once a call and at most
    ``max_batch`` a call; and once the queue is drained nothing is kept."""
    on, on_calls, batcher = answers(requests, max_batch, True, hold_model)
    off, _, _ = answers(requests, max_batch, False, hold_model)
    assert on == off
    asked = {text for text, *_ in requests if text is not None}
    for call in on_calls:
        assert len(call) == len(set(call)) <= max_batch
        assert set(call) <= asked - {"bb"}
    assert batcher.ahead_unused <= batcher.ahead <= sum(map(len, on_calls))
    assert batcher._ahead == {}
