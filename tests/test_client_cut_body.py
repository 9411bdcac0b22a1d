"""memstore.client when the server dies while sending an answer's body.

A real loopback server (a raw socket, so that it can stop anywhere) sends an
answer's status line and headers, part of its body, and closes the
connection: what a client sees when the server is killed mid-answer. Every
verb, blocking and asyncio, then raises
:class:`~memstore.client.ProtocolTransportError` (the client's documented
"no usable answer"), never a raw ``httpx`` or ``json`` error; a caller
catching the documented error catches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memstore.client import AsyncMemoryClient, MemoryClient, ProtocolTransportError

ULID = "01HZY3N8D4W5X6Y7Z8A9B0C1D2"


def _read_request(conn: socket.socket) -> None:
    """Read one request (headers and a Content-Length body) from ``conn``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


@contextlib.contextmanager
def cutting(answer: bytes) -> Iterator[str]:
    """A loopback server that answers every request with ``answer`` and then closes
    the connection (``answer`` is the head and the part of the body sent before the
    cut); yields its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)  # a closed listener does not wake a blocked accept()
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(10)
            with conn:
                _read_request(conn)
                with contextlib.suppress(OSError):
                    conn.sendall(answer)
                    conn.shutdown(socket.SHUT_WR)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
        thread.join(10)


def head(status: str, ctype: str, framing: str) -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n{framing}\r\n\r\n".encode()


JSON, NDJSON, SSE = "application/json", "application/x-ndjson", "text/event-stream"
ERROR = b'{"error": "rate_limited", "message": "slow down", "details": {"retry_af'
"""An error answer's body, cut off mid-way."""

# Each answer: the head promises more than is sent (a Content-Length, or chunks
# whose last one never comes), and the connection closes after the part sent.
ANSWERS: dict[str, bytes] = {
    "ok-length": head("200 OK", JSON, "Content-Length: 400") + b'{"lsn": {"wall_ms": 1, "co',
    "ok-chunked": head("200 OK", JSON, "Transfer-Encoding: chunked") + b'10\r\n[{"id": [1,86,62',
    "error-length": head("429 Too Many Requests", JSON, "Content-Length: 400") + ERROR,
    "error-chunked": head("500 Internal Server Error", JSON, "Transfer-Encoding: chunked")
    + b"40\r\n"
    + ERROR[:30],
    "stream-length": head("200 OK", SSE, "Content-Length: 900") + b'event: hit\ndata: {"id',
    "ndjson-chunked": head("200 OK", NDJSON, "Transfer-Encoding: chunked")
    + b'30\r\n{"key": "chunk:x", "va',
}

Verb = Callable[[MemoryClient], Any]
VERBS: dict[str, Verb] = {
    "health": lambda c: c.health(),
    "ingest": lambda c: c.ingest("notes/a", "hello", id=ULID),
    "recall": lambda c: c.recall("hello"),
    "recall_stream": lambda c: list(c.recall_stream("hello")),
    "forget": lambda c: c.forget(id=ULID),
    "episode": lambda c: c.episode(ULID),
    "snapshot": lambda c: list(c.snapshot("1.0")),
    "events": lambda c: next(iter(c.events())),
}


async def _first(events: Any) -> Any:
    async for event in events:
        return event
    return None


async def _collect(items: Any) -> list[Any]:
    return [item async for item in items]


AsyncVerb = Callable[[AsyncMemoryClient], Any]
ASYNC_VERBS: dict[str, AsyncVerb] = {
    "health": lambda c: c.health(),
    "ingest": lambda c: c.ingest("notes/a", "hello", id=ULID),
    "recall": lambda c: c.recall("hello"),
    "recall_stream": lambda c: _collect(c.recall_stream("hello")),
    "forget": lambda c: c.forget(id=ULID),
    "episode": lambda c: c.episode(ULID),
    "snapshot": lambda c: _collect(c.snapshot("1.0")),
    "events": lambda c: _first(c.events()),
}


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("answer", sorted(ANSWERS))
def test_a_body_cut_off_mid_way_is_a_transport_error(answer: str, verb: str) -> None:
    with (
        cutting(ANSWERS[answer]) as url,
        MemoryClient(url, "tok", timeout=10.0) as client,
        pytest.raises(ProtocolTransportError),
    ):
        VERBS[verb](client)


@pytest.mark.parametrize("verb", sorted(ASYNC_VERBS))
@pytest.mark.parametrize("answer", sorted(ANSWERS))
def test_the_async_client_raises_the_same_for_a_cut_body(answer: str, verb: str) -> None:
    async def run() -> None:
        async with AsyncMemoryClient(url, "tok", timeout=10.0) as client:
            await ASYNC_VERBS[verb](client)

    with cutting(ANSWERS[answer]) as url, pytest.raises(ProtocolTransportError):
        asyncio.run(run())
