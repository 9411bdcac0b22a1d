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
from pathlib import Path
from typing import Any

import httpx
import pytest
from ulid import ULID

from memstore import Memory
from memstore.client import (
    AsyncMemoryClient,
    AuthenticationError,
    ChangeEvent,
    ClientClosedError,
    ForbiddenError,
    Hit,
    InvalidConfirmationTokenError,
    InvalidRequestError,
    MemoryClient,
    NotFoundError,
    ProtocolTransportError,
    RateLimitedError,
    RetryPolicy,
    ServerError,
)
from memstore.client._wire import STREAM_RECONNECTS
from memstore.errors import MemstoreError
from memstore.journal import Lsn
from memstore.protocol.models import IngestRequest, RecallRequest
from memstore.protocol.verbs import Verbs
from tests.protocol.conftest import Server, make_tokens, start_server, stop_server
from tests.tcpcut import CutProxy


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
    # The message names where it went (before: "POST /v1/recall: [Errno 111] ...", no
    # host or port, so a wrong port did not show) and what to check.
    assert str(e.value).startswith(f"POST http://127.0.0.1:{port}/v1/recall: "), e.value
    assert str(e.value).endswith("(is the server running there?)"), e.value


def test_no_server_is_a_transport_error_naming_the_url_async() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

        async def main() -> None:
            async with AsyncMemoryClient(f"http://127.0.0.1:{port}/mem", token="t") as c:
                with pytest.raises(ProtocolTransportError) as e:
                    await c.recall("anyone?")
            assert str(e.value).startswith(f"POST http://127.0.0.1:{port}/mem/v1/recall: ")

        asyncio.run(main())


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
    ("recall relevance 2", lambda c: c.recall("q", min_relevance=2), "from 0 to 1"),
    ("recall relevance -0.1", lambda c: c.recall("q", min_relevance=-0.1), "from 0 to 1"),
    ("stream relevance 2", lambda c: c.recall_stream("q", min_relevance=1.5), "from 0 to 1"),
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


# ------------------------------------------------- construction, tokens, closed clients

_SECRET = "s3cr\u00e9t-token"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"token": b"tok"}, "token must be"),
        ({"token": 5}, "token must be"),
        ({"token": ""}, "token must be"),
        ({"token": _SECRET}, "token must be"),
        ({"token": "tok\r\nX-Injected: 1"}, "token must be"),
        ({"token": "two words"}, "token must be"),
        ({"timeout": "30"}, "timeout must be"),
        ({"timeout": float("nan")}, "timeout must be"),
        ({"timeout": -1}, "timeout must be"),
        ({"timeout": 0}, "timeout must be"),
        ({"timeout": True}, "timeout must be"),
        # httpx takes these; the socket refused them at the first request (a bare ValueError)
        ({"timeout": httpx.Timeout(5.0, read=-1)}, "timeout must be"),
        ({"timeout": httpx.Timeout(float("nan"))}, "timeout must be"),
        ({"timeout": httpx.Timeout(0)}, "timeout must be"),
        ({"retry": 3}, "retry must be"),
        ({"headers": {"X-Trace": "a\nb"}}, "headers"),
        ({"headers": {"X-Trace": 5}}, "headers"),
        ({"headers": "X-Trace: 1"}, "headers"),
        ({"base_url": "127.0.0.1:8080"}, "base_url must be"),
        ({"base_url": "ftp://127.0.0.1:8080"}, "base_url must be"),
        ({"base_url": 8080}, "base_url must be"),
        ({"base_url": "http://"}, "base_url must be"),
        # httpx would send the URL's user and password as Basic auth in place of the
        # token (every request a 401) and name them in every transport error
        ({"base_url": "http://user:s3cr@127.0.0.1:8080"}, "base_url must not"),
        ({"base_url": "http://s3cr@127.0.0.1:8080"}, "base_url must not"),
        # a query or a fragment would swallow the verb's path: GET /?x=1/healthz
        ({"base_url": "http://127.0.0.1:8080/memory?x=1"}, "base_url must not"),
        ({"base_url": "http://127.0.0.1:8080/#top"}, "base_url must not"),
        # what httpx cannot put in a header raised its own error (UnicodeEncodeError)
        ({"headers": {"X-Trace": "caf\u00e9"}}, "headers"),
        ({"headers": {"X Trace": "1"}}, "headers"),
        ({"headers": {"": "1"}}, "headers"),
        ({"headers": {"X-Trace": "a\x01b"}}, "headers"),
    ],
)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_client_options_are_checked_when_it_is_made(
    options: dict[str, object], words: str, kind: str
) -> None:
    """Refused at once (status 0), never at the first request, and no token is ever quoted."""
    args: dict[str, object] = {"base_url": _NOWHERE, "token": "t", **options}
    make = MemoryClient if kind == "sync" else AsyncMemoryClient
    with pytest.raises(InvalidRequestError) as e:
        make(**args)  # type: ignore[arg-type]
    assert e.value.status == 0 and words in str(e.value)
    assert "s3cr" not in str(e.value) and "tok\r" not in str(e.value)


def test_accepted_options(server: Server) -> None:
    token = server.tenants.take()
    for timeout in (None, 5, 2.5, httpx.Timeout(5.0)):
        with MemoryClient(server.url + "/", token=token, timeout=timeout) as c:  # type: ignore[arg-type]
            assert c.recall("anything") == []


def test_an_authorization_header_beside_the_token_is_replaced_not_repeated(
    server: Server,
) -> None:
    """The token wins, whatever the header's case: the server refuses a repeated one."""
    token = server.tenants.take()
    for name in ("authorization", "Authorization", "AUTHORIZATION"):
        with MemoryClient(server.url, token=token, headers={name: "Bearer nope"}) as c:
            assert c.recall("anything") == []
    with MemoryClient(server.url, headers={"authorization": f"Bearer {token}"}) as c:
        assert c.recall("anything") == []  # no token=: the caller's own header is sent


_EVERY_VERB: list[tuple[str, Callable[[MemoryClient], object]]] = [
    ("health", lambda c: c.health()),
    ("ingest", lambda c: c.ingest("s", "x")),
    ("recall", lambda c: c.recall("x")),
    ("recall_stream", lambda c: list(c.recall_stream("x"))),
    ("forget", lambda c: c.forget(source="s")),
    ("episode", lambda c: c.episode(str(ULID()))),
    ("snapshot", lambda c: list(c.snapshot(_AT))),
    ("events", lambda c: next(iter(c.events()))),
    ("wait_applied", lambda c: c.wait_applied(_AT)),
]


@pytest.mark.parametrize(("verb", "call"), _EVERY_VERB, ids=[v for v, _ in _EVERY_VERB])
def test_a_closed_client_refuses_every_verb(server: Server, verb: str, call: Any) -> None:
    c = MemoryClient(server.url, token=server.tenants.take())
    with c:
        c.health()
    with pytest.raises(ClientClosedError) as e:
        call(c)
    assert isinstance(e.value, MemstoreError) and isinstance(e.value, RuntimeError)
    assert "closed" in str(e.value)
    c.close()  # idempotent
    with pytest.raises(ClientClosedError), c:
        pass


def test_a_closed_async_client_refuses_work_and_close_is_a_coroutine(server: Server) -> None:
    async def run() -> None:
        c = AsyncMemoryClient(server.url, token=server.tenants.take())
        assert (await c.health())["ok"] is True
        await c.close()  # the blocking client's name, as a coroutine
        await c.aclose()
        with pytest.raises(ClientClosedError):
            await c.recall("x")
        with pytest.raises(ClientClosedError):
            [e async for e in c.snapshot(_AT)]
        with pytest.raises(ClientClosedError):
            async with c:
                pass

    asyncio.run(run())


_LAZY_WRONG: list[tuple[str, Callable[[Any], object], str]] = [
    ("snapshot", lambda c: c.snapshot(None), "lsn must be"),
    ("recall_stream", lambda c: c.recall_stream(b"q"), "query must be a str"),
    ("events id", lambda c: c.events(last_event_id=5), "last_event_id must be"),
    ("events newline", lambda c: c.events(last_event_id="1\nX: y"), "last_event_id must be"),
]


@pytest.mark.parametrize(
    ("call", "words"), [w[1:] for w in _LAZY_WRONG], ids=[w[0] for w in _LAZY_WRONG]
)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_stream_checks_its_arguments_when_called_not_when_iterated(
    call: Callable[[Any], object], words: str, kind: str
) -> None:
    async def run() -> None:
        async with AsyncMemoryClient(_NOWHERE, token="t") as c:
            call(c)

    with pytest.raises(InvalidRequestError) as e:
        if kind == "sync":
            with MemoryClient(_NOWHERE, token="t") as c:
                call(c)  # no iteration: the refusal comes from the call itself
        else:
            asyncio.run(run())
    assert e.value.status == 0 and words in str(e.value)


_UNENCODABLE: list[tuple[str, Callable[[MemoryClient], object], str]] = [
    ("metadata nan", lambda c: c.ingest("s", "x", metadata={"n": float("nan")}), "metadata"),
    ("metadata inf", lambda c: c.ingest("s", "x", metadata={"n": [float("inf")]}), "metadata"),
    ("metadata bytes", lambda c: c.ingest("s", "x", metadata={"b": b"1"}), "metadata"),
    ("metadata set", lambda c: c.ingest("s", "x", metadata={"s": {1, 2}}), "metadata"),
    ("relevance nan", lambda c: c.recall("q", min_relevance=float("nan")), "min_relevance"),
    ("confirm text", lambda c: c.confirm_forget("{}"), "preview must be a ForgetReceipt"),
]


@pytest.mark.parametrize(
    ("call", "words"), [w[1:] for w in _UNENCODABLE], ids=[w[0] for w in _UNENCODABLE]
)
def test_what_json_cannot_carry_is_refused_before_any_request(
    call: Callable[[MemoryClient], object], words: str
) -> None:
    with MemoryClient(_NOWHERE, token="t") as c, pytest.raises(InvalidRequestError) as e:
        call(c)
    assert e.value.status == 0 and words in str(e.value)


class PrefixTransport(httpx.BaseTransport):
    """A reverse proxy on a path: only ``/memory/v1/...`` and ``/memory/healthz`` pass."""

    def __init__(self, upstream: str) -> None:
        self.upstream = httpx.URL(upstream)
        self.inner = httpx.HTTPTransport()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode("ascii")
        self.paths.append(path)
        if not path.startswith("/memory/") or "//" in path:
            return httpx.Response(404, json={"error": "not_found", "message": path})
        request.url = request.url.copy_with(
            scheme=self.upstream.scheme,
            host=self.upstream.host,
            port=self.upstream.port,
            raw_path=path[len("/memory") :].encode("ascii"),
        )
        request.headers["Host"] = self.upstream.netloc.decode("ascii")
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("base", ["http://proxy.test/memory", "http://proxy.test/memory/"])
def test_every_verb_keeps_the_base_urls_path(server: Server, base: str) -> None:
    transport = PrefixTransport(server.url)
    with MemoryClient(base, token=server.tenants.take(), transport=transport) as c:
        ep = str(ULID())
        at = c.ingest("p/doc", "behind a path prefix", id=ep).lsn
        assert c.recall("prefix")[0].source == "p/doc"
        assert [h.source for h in c.recall_stream("prefix")] == ["p/doc"]
        assert c.episode(ep).content == "behind a path prefix"
        assert len(list(c.snapshot(at))) == 2
        c.wait_applied(at)
        assert c.forget(id=ep, dry_run=True).rows_deleted == 2
    assert {p.split("/")[2] for p in transport.paths} == {"v1", "healthz"}


def test_the_client_answers_as_the_in_process_verbs(tmp_path: Path) -> None:
    """The same episodes through a server and through Verbs on a local Memory: same hits.

    A server of its own (relevance is calibrated on everything a memory holds,
    so the session's shared server would differ), with the hash embedder on
    both sides: hits, order, scores, relevance and heading paths must agree,
    and so must episodes.
    """
    tokens = make_tokens(tmp_path / "tokens.json")
    token = next(t for t, e in tokens.items() if e["tenant"] == "t0")
    proc, url = start_server(tmp_path / "served", tmp_path / "tokens.json")
    docs = [
        ("notes/deploy.md", "# Deploy\nThe orders service deploys on Friday at noon.\n"),
        ("notes/billing.md", "# Billing\n## Region\nBilling runs in eu-west-1 only.\n"),
        ("notes/zoo.md", "The zebra enclosure opens at nine; penguins are fed at ten."),
        ("runbooks/cache.md", "# Cache\nRestart redis when the cache timeout alarm fires."),
    ]
    memory = Memory(tmp_path / "local", embedder="hash")
    verbs = Verbs(memory)
    try:
        with MemoryClient(url, token=token) as c:
            for n, (source, content) in enumerate(docs):
                ep, metadata = str(ULID()), {"n": n % 2}
                c.ingest(source, content, id=ep, metadata=metadata)
                verbs.ingest(
                    "t0", IngestRequest(source=source, content=content, id=ep, metadata=metadata)
                )
            assert c.episode(ep).content == verbs.episode("t0", ep)["content"]
            for query, options in [
                ("when does the orders service deploy?", {}),
                ("billing region", {"k": 2}),
                ("zebra penguins", {"filter": "metadata.n = 0"}),
                ("redis cache timeout", {"mode": "graph"}),
            ]:
                remote = c.recall(query, **options)  # type: ignore[arg-type]
                local = [
                    Hit.from_json(h)
                    for h in verbs.recall("t0", RecallRequest(query=query, **options))
                ]
                assert remote, query
                assert [_comparable(h) for h in remote] == [_comparable(h) for h in local], query
    finally:
        memory.close()
        assert stop_server(proc) == 0


def _comparable(hit: Hit) -> tuple[object, ...]:
    relevance = None if hit.relevance is None else round(hit.relevance, 6)
    return (hit.source, hit.text, round(hit.score, 6), hit.heading_path, hit.source_op, relevance)


def test_a_change_stream_that_breaks_resumes_where_it_was_without_loss(server: Server) -> None:
    """The connection drops before any change came (a proxy's timeout, a network blip):
    the client reconnects from the position the server gave it, and the changes made
    while it was away arrive, once each. No change id was ever in the caller's hands."""
    token = server.tenants.take()
    host, port = server.url.removeprefix("http://").split(":")
    got: list[ChangeEvent] = []
    failed: list[BaseException] = []
    with (
        CutProxy(host, int(port)) as proxy,
        client(server, token) as writer,
        MemoryClient(proxy.url, token=token, timeout=30.0) as reader,
    ):
        stream = reader.events()

        def consume() -> None:
            try:
                for event in stream:
                    got.append(event)
                    if len(got) >= 2:
                        return
            except BaseException as e:  # handed to the test
                failed.append(e)

        worker = threading.Thread(target=consume, daemon=True)
        worker.start()
        # The server's first frame (an id, no event: its chunk ends "\n\n" CR LF) went
        # through to the client; then the connection is cut.
        assert proxy.wait_answer(b"\n\n\r\n", 30), "the stream never opened"
        proxy.hold()  # the reconnect waits until the write is in
        proxy.cut()
        writer.ingest("gone/while-away.md", "written while the stream was down")
        proxy.release()
        worker.join(30)
        stream.close()
    assert failed == []
    assert [ev.event for ev in got] == ["change", "change"]  # the episode and its chunk
    assert {ev.data["item"]["data"]["source"] for ev in got} == {"gone/while-away.md"}
    assert len({ev.data["id"] for ev in got}) == 2


def test_the_async_change_stream_resumes_after_a_break_too(server: Server) -> None:
    token = server.tenants.take()
    host, port = server.url.removeprefix("http://").split(":")
    got: list[ChangeEvent] = []
    failed: list[BaseException] = []
    with CutProxy(host, int(port)) as proxy, client(server, token) as writer:

        async def follow() -> None:
            async with AsyncMemoryClient(proxy.url, token=token, timeout=30.0) as reader:
                async for event in reader.events():
                    got.append(event)
                    if len(got) >= 2:
                        return

        def consume() -> None:
            try:
                asyncio.run(follow())
            except BaseException as e:  # handed to the test
                failed.append(e)

        worker = threading.Thread(target=consume, daemon=True)
        worker.start()
        assert proxy.wait_answer(b"\n\n\r\n", 30), "the stream never opened"
        proxy.hold()
        proxy.cut()
        writer.ingest("gone/async.md", "written while the async stream was down")
        proxy.release()
        worker.join(30)
    assert failed == []
    assert {ev.data["item"]["data"]["source"] for ev in got} == {"gone/async.md"}
    assert len({ev.data["id"] for ev in got}) == 2


def test_a_quiet_change_stream_outlives_any_number_of_breaks(tmp_path: Path) -> None:
    """A tenant with no changes for a while, behind a proxy that cuts long connections:
    each connection lived (its keep-alives came through), so the client keeps
    reconnecting; only breaks in a row on connections that never got going give up."""
    tokens = make_tokens(tmp_path / "tokens.json")
    token = next(t for t in tokens if t.startswith("tok-full-"))
    proc, url = start_server(tmp_path / "data", tmp_path / "tokens.json", "--sse-keepalive", "0.05")
    host, port = url.removeprefix("http://").split(":")
    got: list[ChangeEvent] = []
    failed: list[BaseException] = []
    try:
        with (
            CutProxy(host, int(port)) as proxy,
            MemoryClient(url, token=token) as writer,
            MemoryClient(proxy.url, token=token, timeout=30.0) as reader,
        ):
            stream = reader.events()

            def consume() -> None:
                try:
                    for event in stream:
                        got.append(event)
                        return
                except BaseException as e:  # handed to the test
                    failed.append(e)

            worker = threading.Thread(target=consume, daemon=True)
            worker.start()
            for _ in range(2 * STREAM_RECONNECTS):
                assert proxy.wait_answer(b": keep-alive", 30), failed
                proxy.cut()
            assert proxy.wait_answer(b"\n\n\r\n", 30), failed
            writer.ingest("quiet/at-last.md", "a change after many breaks")
            worker.join(30)
            stream.close()
    finally:
        assert stop_server(proc) == 0
    assert failed == []
    assert got[0].data["item"]["data"]["source"] == "quiet/at-last.md"


def test_a_change_stream_whose_connections_never_get_going_gives_up(server: Server) -> None:
    token = server.tenants.take()
    host, port = server.url.removeprefix("http://").split(":")
    failed: list[BaseException] = []
    with (
        CutProxy(host, int(port)) as proxy,
        MemoryClient(proxy.url, token=token, timeout=30.0) as reader,
    ):

        def consume() -> None:
            try:
                for _ in reader.events():
                    pass
            except BaseException as e:  # handed to the test
                failed.append(e)

        worker = threading.Thread(target=consume, daemon=True)
        worker.start()
        for _ in range(STREAM_RECONNECTS + 1):  # each cut right after the first frame
            assert proxy.wait_answer(b"\n\n\r\n", 30), failed
            proxy.cut()
        worker.join(30)
    assert [type(e) for e in failed] == [ProtocolTransportError]
    assert "the stream broke" in str(failed[0])
