"""Both HTTP servers under kills and shutdowns, with real clients writing through HTTP.

``memstore serve`` (MemoryProtocol) and ``memstore serve --api mindlayer``
each run as a subprocess on loopback, over the data folder's SQLite journal
or a PostgreSQL journal (a fresh schema). Writers send distinct writes
until enough are acknowledged; the server is then killed (SIGKILL) or asked
to stop (SIGTERM), and started again on the same data: every acknowledged
write is there, whole, and a write that was not acknowledged is either
whole or absent, never half there.

And a request still running when the shutdown's grace period ends (here: a
client that sent half its body) is answered 503 ``unavailable`` in the
surface's own error shape, with ``Retry-After``: a client knows to send it
again, where uvicorn alone answered a bare 500; and the server's log says
so in one line, where uvicorn logged a ``CancelledError`` traceback.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from ulid import ULID

from tests.mindlayer.conftest import start as start_mindlayer
from tests.pgtest import Schemas
from tests.protocol.conftest import make_tokens, start_server

TOKEN = "tok-full-0"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ENOUGH = 30
"""Acknowledged writes before the signal: enough that some are in flight when it lands."""


def _journal(kind: str, request: pytest.FixtureRequest) -> tuple[str, ...]:
    """The server's journal flags: none (the folder's SQLite), or a fresh PostgreSQL schema."""
    if kind == "sqlite":
        return ()
    schemas: Schemas = request.getfixturevalue("pg_schemas")
    place = schemas.new("servecrash")
    return ("--journal", place.dsn, "--journal-schema", place.schema)


class Protocol:
    """``memstore serve``: episodes through ``/v1/ingest``, read back by id."""

    def __init__(self, root: Path, journal: tuple[str, ...], *extra: str) -> None:
        make_tokens(root / "tokens.json")
        self.root, self.args = root, (*journal, "--rate-per-second", "1000", *extra)
        self.start()

    def start(self) -> None:
        self.proc, self.url = start_server(
            self.root / "data", self.root / "tokens.json", *self.args
        )

    def write(self, client: httpx.Client, key: str) -> httpx.Response:
        body = {"id": key, "source": "crash", "content": f"# crash\nepisode {key}\n"}
        return client.post("/v1/ingest", json=body, headers=AUTH)

    def key(self) -> str:
        return str(ULID())

    def stored(self, client: httpx.Client, keys: list[str]) -> dict[str, str]:
        found = {}
        for key in keys:
            r = client.get(f"/v1/episode/{key}", headers=AUTH)
            assert r.status_code in (200, 404), r.text
            if r.status_code == 200:
                found[key] = r.json()["content"]
        return found

    def expected(self, key: str) -> str:
        return f"# crash\nepisode {key}\n"

    def half_request(self) -> bytes:
        return (
            f"POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
            '{"source": "s", "con'
        ).encode()


class MindLayer:
    """``memstore serve --api mindlayer``: memories through ``/v1/memories``, read by export."""

    scope: ClassVar[dict[str, str]] = {"agent": "crash", "user": "synthetic-user"}

    def __init__(self, root: Path, journal: tuple[str, ...], *extra: str) -> None:
        self.root, self.args = root, (*journal, *extra)
        self.start()

    def start(self) -> None:
        server = start_mindlayer(self.root / "data", *self.args)
        self.proc, self.url = server.proc, server.url

    def write(self, client: httpx.Client, key: str) -> httpx.Response:
        return client.post(
            "/v1/memories", json={"scope": self.scope, "text": f"memory {key}", "id": key}
        )

    def key(self) -> str:
        return uuid.uuid4().hex

    def stored(self, client: httpx.Client, keys: list[str]) -> dict[str, str]:
        r = client.get("/v1/export", params=self.scope)
        assert r.status_code == 200, r.text
        return {m["id"]: m["text"] for m in r.json()["memories"]}

    def expected(self, key: str) -> str:
        return f"memory {key}"

    def half_request(self) -> bytes:
        return (
            b"POST /v1/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
            b'{"scope": {"agent": "a", "us'
        )


SERVERS: dict[str, Callable[..., Protocol | MindLayer]] = {
    "protocol": Protocol,
    "mindlayer": MindLayer,
}


@pytest.mark.parametrize("journal", ["sqlite", "postgres"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("kind", sorted(SERVERS))
def test_a_kill_or_stop_under_writes_keeps_every_acknowledged_write_whole(
    tmp_path: Path, kind: str, sig: signal.Signals, journal: str, request: pytest.FixtureRequest
) -> None:
    server = SERVERS[kind](tmp_path, _journal(journal, request))
    acknowledged: list[str] = []
    sent: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer() -> None:
        with httpx.Client(base_url=server.url, timeout=30.0) as client:
            while not stop.is_set():
                key = server.key()
                with lock:
                    sent.append(key)
                try:
                    r = server.write(client, key)
                except httpx.TransportError:
                    return  # the server is gone: this write was never acknowledged
                if r.status_code == 200:
                    with lock:
                        acknowledged.append(key)
                else:  # refused: only for the shutdown, and in the envelope
                    assert r.status_code == 503, r.text
                    assert r.json()["error"] == "unavailable"

    threads = [threading.Thread(target=writer) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        while True:
            with lock:
                if len(acknowledged) >= ENOUGH:
                    break
            stop.wait(0.01)
        server.proc.send_signal(sig)
        code = server.proc.wait(timeout=60)
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    finally:
        stop.set()
        for t in threads:
            t.join()
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30.0) as client:
            found = server.stored(client, list(sent))
        missing = [key for key in acknowledged if key not in found]
        assert missing == [], f"acknowledged writes lost: {missing}"
        assert set(found) <= set(sent), "something stored that no writer sent"
        for key, text in found.items():  # acknowledged or not: whole, or not there
            assert text == server.expected(key)
    finally:
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0


@pytest.mark.parametrize("kind", sorted(SERVERS))
def test_a_request_still_running_when_the_grace_ends_is_told_to_retry(
    tmp_path: Path, kind: str
) -> None:
    """Before: uvicorn cancelled it and answered a bare 500 (h11's "Internal Server Error")."""
    server = SERVERS[kind](tmp_path, (), "--shutdown-grace", "0.5", "--body-timeout", "120")
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(server.half_request())  # the rest of the body never comes
        assert httpx.get(f"{server.url}/healthz").status_code == 200  # the request is in
        server.proc.send_signal(signal.SIGTERM)
        answer = _read_answer(sock)
    assert server.proc.wait(timeout=60) == 0
    status, headers, body = answer
    assert status == 503, (status, body)
    assert headers.get("retry-after") == "1"
    assert headers.get("content-type") == "application/json"
    envelope: dict[str, Any] = json.loads(body)
    assert envelope["error"] == "unavailable" and "shutting down" in envelope["message"]
    # The operator reads one calm line, not uvicorn's CancelledError traceback.
    log = "".join(path.read_text() for path in tmp_path.glob("*.log"))
    assert "Traceback" not in log, log
    assert log.count("was still running when the grace period ran out; answered 503") == 1, log


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of the HTTP answer on ``sock`` (read until it closes)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body
