"""memstore.client against a server that answers 200 with what the protocol does not say.

A real HTTP server on loopback (the standard library's) plays a broken or
foreign MemoryProtocol server: a body that is not JSON, JSON of the wrong
shape, a snapshot line that is not an entry, a recall stream cut before its
``done``. Each is a :class:`~memstore.client.ProtocolTransportError` (no
usable answer), never a bare ``KeyError`` or a partial result passed off as
complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memstore.client import AsyncMemoryClient, MemoryClient, ProtocolTransportError

HIT = (
    '{"id": [1,86,62,58,53,174,214,182,78,97,239,185,146,94,87,27], "score": 0.5, '
    '"text": "the zebra crossing", "source": "a/one"}'
)
"""One recall hit as the server sends it."""
STREAM = f"event: hit\ndata: {HIT}\n\n"
"""A recall stream of one hit whose ``done`` event never comes."""


def _canned(answers: dict[str, tuple[str, str]]) -> type[BaseHTTPRequestHandler]:
    """A handler answering 200 with ``answers[path]``: ``(content type, body)``."""

    class Canned(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            ctype, body = answers[self.path]
            raw = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    return Canned


@contextlib.contextmanager
def serving(answers: dict[str, tuple[str, str]]) -> Iterator[str]:
    """A loopback server answering ``answers``; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _canned(answers))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


JSON = "application/json"
NDJSON = "application/x-ndjson"
SSE = "text/event-stream"


@pytest.mark.parametrize(
    ("path", "ctype", "body", "verb"),
    [
        ("/v1/snapshot/1.0", NDJSON, "not json\n", "snapshot"),
        ("/v1/snapshot/1.0", NDJSON, '{"key": "chunk:x", "value": {}}\n{"key": 1}\n', "snapshot"),
        ("/v1/snapshot/1.0", NDJSON, "[1, 2]\n", "snapshot"),
        ("/v1/ingest", JSON, '{"nope": 1}', "ingest"),
        ("/v1/ingest", JSON, '{"lsn": "soon"}', "ingest"),
        ("/v1/recall", JSON, '{"hits": []}', "recall"),
        ("/v1/recall", JSON, '[{"id": "x"}]', "recall"),
        ("/v1/recall", JSON, "[1]", "recall"),
        ("/v1/episode/e", JSON, "[]", "episode"),
        ("/v1/recall", SSE, STREAM, "recall_stream"),
        ("/v1/recall", SSE, 'event: hit\ndata: {"id": 3}\n\n', "recall_stream"),
        ("/healthz", JSON, "[]", "applied"),
        ("/healthz", JSON, '{"ok": true}', "applied"),
        ("/healthz", JSON, '{"lsn": "later"}', "applied"),
    ],
)
def test_an_answer_off_the_protocol_is_a_transport_error(
    path: str, ctype: str, body: str, verb: str
) -> None:
    calls: dict[str, Any] = {
        "snapshot": lambda c: c.snapshot("1.0"),
        "ingest": lambda c: c.ingest("s", "text"),
        "recall": lambda c: c.recall("zebra"),
        "episode": lambda c: c.episode("e"),
        "recall_stream": lambda c: c.recall_stream("zebra"),
        "applied": lambda c: c.applied(),
    }

    async def drain(got: Any) -> Any:
        if hasattr(got, "__aiter__"):
            return [x async for x in got]
        return await got

    with serving({path: (ctype, body)}) as url:
        with MemoryClient(url, token="t") as c, pytest.raises(ProtocolTransportError):
            got = calls[verb](c)
            if isinstance(got, Iterator):
                list(got)

        async def run() -> None:
            async with AsyncMemoryClient(url, token="t") as c:
                with pytest.raises(ProtocolTransportError):
                    await drain(calls[verb](c))

        asyncio.run(run())


def test_a_recall_stream_with_its_done_event_is_complete() -> None:
    """The same stream, ended by ``done``, is the hits; an unknown event is skipped."""
    whole = STREAM + "event: progress\ndata: {}\n\n" + "event: done\ndata: {}\n\n"
    with serving({"/v1/recall": (SSE, whole)}) as url, MemoryClient(url, token="t") as c:
        assert [h.text for h in c.recall_stream("zebra")] == ["the zebra crossing"]


def _undecodable(status: int) -> type[BaseHTTPRequestHandler]:
    """A handler answering ``status`` with ``Content-Encoding: gzip`` and a body that is not."""

    class Undecodable(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            raw = b'{"error": "invalid_request", "message": "not gzip"}'
            self.send_response(status)
            self.send_header("Content-Type", JSON)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    return Undecodable


@pytest.mark.parametrize("status", [200, 400])
@pytest.mark.parametrize("verb", ["recall", "recall_stream"])
def test_a_body_whose_content_encoding_does_not_decode_is_a_transport_error(
    status: int, verb: str
) -> None:
    """A proxy's ``Content-Encoding: gzip`` over a body that is not gzip: no answer to read.

    httpx raises ``DecodingError`` for it, which is no ``TransportError``: it
    escaped the client as httpx's own exception, on a 200 and on an error status alike.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), _undecodable(status))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with MemoryClient(url, token="t") as c, pytest.raises(ProtocolTransportError) as e:
            if verb == "recall":
                c.recall("zebra")
            else:
                list(c.recall_stream("zebra"))
        assert "decompress" in str(e.value)

        async def run() -> None:
            async with AsyncMemoryClient(url, token="t") as c:
                with pytest.raises(ProtocolTransportError):
                    if verb == "recall":
                        await c.recall("zebra")
                    else:
                        [h async for h in c.recall_stream("zebra")]

        asyncio.run(run())
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


SEPARATORS = "a\u2028b\u2029c\u0085d"
"""Text with the three characters Python's ``splitlines`` breaks at and JSON allows raw."""


def _separated() -> dict[str, tuple[str, str]]:
    """A snapshot of two entries and a recall stream of one hit, all holding
    :data:`SEPARATORS` raw in a JSON string, some lines ended by CRLF (the ``\r`` is
    not part of the line)."""
    entry = '{"key": "chunk:x", "value": {"text": "' + SEPARATORS + '"}}'
    hit = HIT.replace("the zebra crossing", SEPARATORS)
    stream = f"event: hit\r\ndata: {hit}\r\n\r\nevent: done\ndata: {{}}\n\n"
    return {"/v1/snapshot/1.0": (NDJSON, f"{entry}\r\n{entry}\n"), "/v1/recall": (SSE, stream)}


def test_raw_line_separators_inside_json_strings_stay_in_their_line() -> None:
    """Before: both clients read streams with httpx's line iterators, which also break
    at U+2028, U+2029 and U+0085; a server sending them raw inside a JSON string (not
    today's memstore, which escapes them) cut a snapshot line or a recall ``data:``
    line in two, and ``snapshot()``/``recall_stream()`` raised ProtocolTransportError."""
    with serving(_separated()) as url, MemoryClient(url, token="t") as c:
        assert [e.value["text"] for e in c.snapshot("1.0")] == [SEPARATORS] * 2
        assert [h.text for h in c.recall_stream("zebra")] == [SEPARATORS]


def test_raw_line_separators_stay_in_their_line_for_the_async_client() -> None:
    """The same streams through :class:`AsyncMemoryClient` (``aiter_lines`` broke them too)."""

    async def run(url: str) -> None:
        async with AsyncMemoryClient(url, token="t") as c:
            assert [e.value["text"] async for e in c.snapshot("1.0")] == [SEPARATORS] * 2
            assert [h.text async for h in c.recall_stream("zebra")] == [SEPARATORS]

    with serving(_separated()) as url:
        asyncio.run(run(url))
