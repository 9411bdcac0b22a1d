"""memstore.client's retry rule against a server that refuses on cue.

A real HTTP server on loopback (the standard library's) answers each request
from a script: the MemoryProtocol's own ``503 unavailable`` (the server took
nothing), a 503 a proxy or load balancer sends in its own words (the request
may have reached the server behind it), a 429 with an odd ``Retry-After``.
The client retries what the server says it did not take, and a 503 of
unknown meaning only for a request that is safe to repeat: an ingest without
an ``id`` is never sent twice blindly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memstore.client import (
    AsyncMemoryClient,
    MemoryClient,
    ProtocolTransportError,
    RateLimitedError,
    RetryPolicy,
    UnavailableError,
)
from memstore.journal import Lsn

OK: dict[str, tuple[int, str, str]] = {
    "/v1/ingest": (200, "application/json", '{"lsn": {"wall_ms": 5, "counter": 0}}'),
    "/v1/recall": (200, "application/json", "[]"),
    "/v1/forget": (
        200,
        "application/json",
        json.dumps(
            {
                "target": {"Scope": {"BySource": "s"}},
                "indices_affected": [],
                "rows_written": 0,
                "rows_deleted": 0,
                "audit_lsn": {"wall_ms": 5, "counter": 0},
                "preview": True,
            }
        ),
    ),
    "/healthz": (200, "application/json", '{"ok": true, "version": "0.1.0", "lsn": "5.0"}'),
}
PROXY_503 = (503, "text/html", "<html><body>503 Service Temporarily Unavailable</body></html>")
PROTOCOL_503 = (
    503,
    "application/json",
    '{"error": "unavailable", "message": "the server is shutting down"}',
)


class Script:
    """What the server answers: the next refusal queued, else the path's 200."""

    def __init__(self) -> None:
        self.refusals: list[tuple[int, str, str, dict[str, str]]] = []
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def refuse(self, answer: tuple[int, str, str], times: int = 1, **headers: str) -> None:
        self.refusals += [(*answer, headers)] * times

    stall = 0.0
    """Seconds the next answer waits (then 0 again): a server that takes too long."""

    def next(self, path: str) -> tuple[int, str, str, dict[str, str]]:
        with self.lock:
            self.seen.append(path)
            if self.refusals:
                return self.refusals.pop(0)
        return (*OK[path], {})


@contextlib.contextmanager
def scripted() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, ctype, body, headers = script.next(self.path)
            stall, script.stall = script.stall, 0.0
            time.sleep(stall)
            raw = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(raw)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


FAST = RetryPolicy(max_retries=2, unavailable_wait=0.0)


def test_a_proxys_503_is_not_retried_for_an_ingest_without_an_id() -> None:
    """It may have come after the server behind the proxy took the ingest: raised at once."""
    with scripted() as (url, script), MemoryClient(url, token="t", retry=FAST) as c:
        script.refuse(PROXY_503)
        with pytest.raises(UnavailableError) as e:
            c.ingest("notes/a.md", "written once or not at all")
        assert e.value.status == 503 and e.value.code == "http_error"
        assert script.seen == ["/v1/ingest"]
        script.refuse(PROXY_503)
        with pytest.raises(UnavailableError):
            c.forget(source="notes/")  # a soft forget is a write too
        assert script.seen[1:] == ["/v1/forget"]


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.recall("a read"),
        lambda c: c.health(),
        lambda c: c.ingest("notes/a.md", "replaces its episode", id="01HZX3J5T9M8K7Q6R5P4N3M2K1"),
        lambda c: c.forget(source="notes/", dry_run=True),
    ],
    ids=["recall", "health", "ingest with id", "dry run"],
)
def test_a_proxys_503_is_retried_for_a_request_safe_to_repeat(call: Any) -> None:
    with scripted() as (url, script), MemoryClient(url, token="t", retry=FAST) as c:
        script.refuse(PROXY_503)
        call(c)
        assert len(script.seen) == 2 and script.seen[0] == script.seen[1]


def test_the_protocols_own_503_is_retried_for_any_request() -> None:
    """``unavailable`` from a MemoryProtocol server means it took nothing."""
    with scripted() as (url, script), MemoryClient(url, token="t", retry=FAST) as c:
        script.refuse(PROTOCOL_503, times=2)
        assert c.ingest("notes/a.md", "taken on the third try").lsn == Lsn(5, 0)
        assert script.seen == ["/v1/ingest"] * 3


def test_the_async_client_follows_the_same_rule() -> None:
    async def run(url: str, script: Script) -> None:
        async with AsyncMemoryClient(url, token="t", retry=FAST) as c:
            script.refuse(PROXY_503)
            with pytest.raises(UnavailableError):
                await c.ingest("notes/a.md", "not sent twice")
            script.refuse(PROXY_503)
            assert await c.recall("retried") == []
            script.refuse(PROTOCOL_503)
            await c.ingest("notes/a.md", "retried: the server took nothing")

    with scripted() as (url, script):
        asyncio.run(run(url, script))
        assert script.seen == ["/v1/ingest", "/v1/recall", "/v1/recall"] + ["/v1/ingest"] * 2


@pytest.mark.parametrize("retry_after", ["-5", "-0.5"])
def test_a_negative_retry_after_is_no_wait(retry_after: str) -> None:
    """A server's negative ``retry_after`` is retried at once, never a bare ValueError."""
    body = json.dumps(
        {"error": "rate_limited", "message": "slow down", "details": {"retry_after": -5}}
    )
    with scripted() as (url, script), MemoryClient(url, token="t", retry=FAST) as c:
        script.refuse((429, "application/json", body), **{"Retry-After": retry_after})
        assert c.recall("once more") == []
        assert script.seen == ["/v1/recall"] * 2
        script.refuse((429, "application/json", body), times=3)
        with pytest.raises(RateLimitedError):
            c.recall("too many refusals")


def test_a_write_that_times_out_is_raised_and_never_sent_again() -> None:
    """No answer within the timeout: the ingest may have been taken, so it is not re-sent."""
    with scripted() as (url, script), MemoryClient(url, token="t", timeout=0.2, retry=FAST) as c:
        script.stall = 0.6
        started = time.monotonic()
        with pytest.raises(ProtocolTransportError):
            c.ingest("notes/a.md", "the server is slow")
        assert time.monotonic() - started < 0.5
        time.sleep(0.6)  # the stalled answer is written; nothing else arrived
        assert script.seen == ["/v1/ingest"]
        assert c.recall("the client is usable after a timeout") == []
