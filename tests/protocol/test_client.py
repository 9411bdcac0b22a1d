"""memstore.client against a real ``memstore serve``: every verb, every error class.

Runs on the conformance suite's server (5 requests per second per tenant,
burst 10), so the client's 429 retries are exercised for real.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import socket
import threading
import time
from collections.abc import Callable

import pytest
from ulid import ULID

from memstore.client import (
    AsyncMemoryClient,
    AuthenticationError,
    ChangeEvent,
    ForbiddenError,
    InvalidConfirmationTokenError,
    InvalidRequestError,
    MemoryClient,
    NotFoundError,
    ProtocolTransportError,
    RateLimitedError,
    RetryPolicy,
    ServerError,
)
from memstore.errors import MemstoreError
from memstore.journal import Lsn
from tests.protocol.conftest import Server


def client(server: Server, token: str | None, **kw: object) -> MemoryClient:
    return MemoryClient(server.url, token=token, **kw)  # type: ignore[arg-type]


def test_ingest_recall_episode_and_snapshot(server: Server) -> None:
    token = server.tenants.take()
    with client(server, token) as c:
        assert c.health()["ok"] is True
        doc = "# Deploy\nThe orders service deploy is on Friday at noon.\n"
        ep = str(ULID())
        at = c.ingest("notes/deploy.md", doc, id=ep, metadata={"project": "orders"}).lsn
        hits = c.recall("when is the orders deploy?", k=3)
        assert hits and hits[0].source == "notes/deploy.md"
        assert "Friday" in hits[0].text
        assert hits[0].heading_path == ("Deploy",)
        ULID.from_str(hits[0].id)  # a chunk id as ULID text
        assert hits[0].valid_from is not None and hits[0].valid_from.lsn <= at
        assert c.episode(ep).content == doc
        assert c.episode(ep.lower()).metadata == {"project": "orders"}
        entries = list(c.snapshot(at))
        assert sorted(e.kind for e in entries) == ["chunk", "episode"]
        assert f"episode:{ep}" in {e.key for e in entries}
        assert list(c.snapshot("1.0")) == [], "nothing existed at the epoch's first ms"


def test_recall_filter_as_of_graph_and_stream(server: Server) -> None:
    token = server.tenants.take()
    with client(server, token) as c:
        before = _dt.datetime.now(_dt.UTC)
        time.sleep(0.01)
        c.ingest("a/one", "the zebra crossing is painted white", metadata={"n": 1})
        c.ingest("b/two", "the zebra enclosure opens at nine", metadata={"n": 2})
        assert {h.source for h in c.recall("zebra")} == {"a/one", "b/two"}
        assert [h.source for h in c.recall("zebra", filter="metadata.n = 2")] == ["b/two"]
        assert [h.source for h in c.recall("zebra", filter="source LIKE 'a/%'")] == ["a/one"]
        assert c.recall("zebra", as_of=before) == []
        now = c.recall("zebra", as_of=_dt.datetime.now(_dt.UTC))
        assert {h.source_op for h in now} == {"AsOf"}
        assert len(c.recall("zebra", mode="graph")) >= 2
        streamed = list(c.recall_stream("zebra", k=5))
        assert [h.id for h in streamed] == [h.id for h in c.recall("zebra", k=5)]
        found = c.recall("zebra crossing")
        assert all(h.relevance is not None and 0.0 <= h.relevance <= 1.0 for h in found)
        assert c.recall("zebra crossing", min_relevance=1.0) == []
        assert list(c.recall_stream("zebra crossing", min_relevance=1.0)) == []
        with pytest.raises(InvalidRequestError) as bad:
            c.recall("zebra", filter="source LIKE")
        assert bad.value.code == "invalid_filter" and bad.value.details["column"] >= 1
        with pytest.raises(InvalidRequestError, match="timezone-aware"):
            c.recall("zebra", as_of=_dt.datetime(2024, 1, 1))


def test_forget_soft_dry_run_and_confirmed_hard_delete(server: Server) -> None:
    token = server.tenants.take()
    with client(server, token) as c:
        ep = str(ULID())
        at = c.ingest("tmp/x", "a secret to erase later", id=ep).lsn
        soft_preview = c.forget(source="tmp/", dry_run=True)
        assert soft_preview.preview and soft_preview.rows_deleted == 2
        assert c.recall("secret erase"), "a dry run changes nothing"
        soft = c.forget(source="tmp/")
        assert not soft.preview and soft.rows_written == 2
        assert c.recall("secret erase") == []
        assert len(list(c.snapshot(at))) == 2, "a soft forget keeps the past"
        preview = c.preview_hard_forget(id=ep)
        assert preview.confirmation and preview.rows_deleted == 2
        done = c.confirm_forget(preview)
        assert done.rows_deleted == 2
        assert list(c.snapshot(at)) == [], "a hard forget erases the past too"
        with pytest.raises(InvalidConfirmationTokenError):
            c.confirm_forget(preview)  # one preview, one hard delete
        with pytest.raises(InvalidRequestError, match="exactly one of"):
            c.forget(id="x", source="y")
        with pytest.raises(InvalidRequestError, match="exactly one of"):
            c.forget()


def test_error_answers_are_typed_memstore_errors(server: Server) -> None:
    token = server.tenants.take()
    with client(server, "not-a-token") as c, pytest.raises(AuthenticationError) as e:
        c.recall("anything")
    assert e.value.status == 401 and e.value.code == "unauthorized"
    assert isinstance(e.value, MemstoreError) and isinstance(e.value, PermissionError)
    with client(server, server.tenants.reader) as c, pytest.raises(ForbiddenError) as f:
        c.ingest("s", "readers cannot write")
    assert f.value.details["required_scope"] == "ingest"
    with client(server, token) as c:
        with pytest.raises(NotFoundError) as nf:
            c.episode(str(ULID()))
        assert nf.value.code == "episode_not_found"
        with pytest.raises(InvalidRequestError):
            c.ingest("", "a blank source")


def test_rate_limited_requests_are_retried_after_retry_after(server: Server) -> None:
    token = server.tenants.take()
    with client(server, token, retry=RetryPolicy(max_retries=0)) as strict:
        with pytest.raises(RateLimitedError) as e:
            for _ in range(40):
                strict.recall("burst")
        assert e.value.retry_after >= 1
    with client(server, token) as patient:
        for _ in range(3):  # the bucket is empty: each waits out its Retry-After
            assert patient.recall("burst") == []
    with client(server, token, retry=RetryPolicy(max_wait=0.0)) as hasty:
        for _ in range(40):
            try:
                hasty.recall("burst")
            except RateLimitedError:
                break  # a wait over max_wait is raised, never slept through
        else:
            pytest.fail("no 429 within 40 requests at 5 per second")


def test_events_stream_and_resume(server: Server) -> None:
    token = server.tenants.take()
    got: list[ChangeEvent] = []
    with client(server, token, timeout=30.0) as reader, client(server, token) as writer:
        stream = reader.events()

        def consume() -> None:
            for event in stream:
                got.append(event)
                if sum(ev.event == "change" for ev in got) >= 2:
                    return

        worker = threading.Thread(target=consume, daemon=True)
        worker.start()
        deadline = time.monotonic() + 30
        while worker.is_alive() and time.monotonic() < deadline:
            writer.ingest("ev/one", f"event at {time.monotonic()}")
            worker.join(0.5)
        assert not worker.is_alive(), "no change event arrived"
        changes = [ev for ev in got if ev.event == "change"]
        assert changes[0].data["item"]["data"]["source"] == "ev/one"
        assert changes[0].id is not None
        writer.ingest("ev/two", "after the disconnect")
        resumed = reader.events(last_event_id=changes[-1].id)
        sources = set()
        for event in resumed:
            if event.event == "change":
                sources.add(event.data["item"]["data"]["source"])
                if "ev/two" in sources:
                    break
        assert "ev/two" in sources


def test_async_client_speaks_the_same_verbs(server: Server) -> None:
    token = server.tenants.take()

    async def run() -> None:
        async with AsyncMemoryClient(server.url, token=token) as c:
            at = (await c.ingest("async/doc", "asynchronous penguins waddle")).lsn
            hits = await c.recall("penguins", k=2)
            assert [h.source for h in hits] == ["async/doc"]
            assert await c.recall("penguins", min_relevance=1.0) == []
            streamed = [h async for h in c.recall_stream("penguins", k=2)]
            assert [h.id for h in streamed] == [h.id for h in hits]
            assert len([e async for e in c.snapshot(at)]) == 2
            await c.wait_applied(at)
            preview = await c.preview_hard_forget(source="async/")
            assert (await c.confirm_forget(preview)).rows_deleted == 2
            with pytest.raises(NotFoundError):
                await c.episode(str(ULID()))
        async with AsyncMemoryClient(server.url, token="nope") as bad:
            with pytest.raises(AuthenticationError):
                await bad.recall("x")

    asyncio.run(run())


def test_no_server_is_a_transport_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        with (
            MemoryClient(f"http://127.0.0.1:{port}", token="t", timeout=2.0) as c,
            pytest.raises(ProtocolTransportError) as e,
        ):
            c.recall("anyone?")
    assert isinstance(e.value, ConnectionError) and not isinstance(e.value, ServerError)


# Port 1: nothing listens, so only a refusal before any request answers with status 0.
_NOWHERE = "http://127.0.0.1:1"
_AT = Lsn(5, 0)
_WRONG_CALLS: list[tuple[str, Callable[[MemoryClient], object], str]] = [
    ("ingest bytes", lambda c: c.ingest("notes/a.md", b"text"), "content must be a str"),
    ("ingest metadata", lambda c: c.ingest("s", "x", metadata="p=1"), "metadata must be a mapping"),
    ("ingest t_ref", lambda c: c.ingest("s", "x", t_ref=1_700_000_000), "a time must be"),
    ("recall query", lambda c: c.recall(b"deploy"), "query must be a str"),
    ("recall k", lambda c: c.recall("deploy", k=True), "k must be a whole number"),
    ("recall k str", lambda c: c.recall("deploy", k="3"), "k must be a whole number"),
    ("recall relevance", lambda c: c.recall("q", min_relevance="0.5"), "min_relevance must be"),
    ("forget before", lambda c: c.forget(before="5.0"), "before must be an Lsn"),
    ("forget dry_run", lambda c: c.forget(source="notes/", dry_run="yes"), "dry_run must be"),
    ("forget id", lambda c: c.forget(id=5), "id must be a str"),
    ("episode id", lambda c: c.episode(None), "id must be a str"),
    ("snapshot lsn", lambda c: list(c.snapshot(None)), "lsn must be an Lsn"),
    ("wait lsn", lambda c: c.wait_applied("5.0"), "lsn must be an Lsn"),
    ("wait nan", lambda c: c.wait_applied(_AT, timeout=float("nan")), "timeout must be"),
    ("wait str", lambda c: c.wait_applied(_AT, timeout="30"), "timeout must be"),
    ("wait poll", lambda c: c.wait_applied(_AT, poll=-1), "poll must be"),
    ("wait poll 0", lambda c: c.wait_applied(_AT, poll=0), "poll must be"),
]


@pytest.mark.parametrize(
    ("call", "words"), [w[1:] for w in _WRONG_CALLS], ids=[w[0] for w in _WRONG_CALLS]
)
def test_an_argument_of_the_wrong_type_is_refused_before_any_request(
    call: Callable[[MemoryClient], object], words: str
) -> None:
    with MemoryClient(_NOWHERE, token="t") as c, pytest.raises(InvalidRequestError) as e:
        call(c)
    assert e.value.status == 0 and words in str(e.value)


@pytest.mark.parametrize("words", ["wait nan", "forget before", "recall k"])
def test_the_async_client_refuses_the_same_arguments(words: str) -> None:
    calls = {
        "wait nan": lambda c: c.wait_applied(_AT, timeout=float("nan")),
        "forget before": lambda c: c.forget(before="5.0"),
        "recall k": lambda c: c.recall("deploy", k=True),
    }

    async def run() -> None:
        async with AsyncMemoryClient(_NOWHERE, token="t") as c:
            await calls[words](c)

    with pytest.raises(InvalidRequestError) as e:
        asyncio.run(run())
    assert e.value.status == 0


@pytest.mark.parametrize(
    "options",
    [
        {"max_retries": "3"},
        {"max_retries": -1},
        {"max_retries": True},
        {"max_wait": float("nan")},
        {"max_wait": -1.0},
        {"unavailable_wait": "0.5"},
        {"unavailable_wait": float("inf")},
    ],
)
def test_a_retry_policy_of_the_wrong_type_is_refused(options: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        RetryPolicy(**options)  # type: ignore[arg-type]
