"""Slow clients against a real ``memstore serve``: half-sent headers and bodies, idle sockets.

One server with small limits (``--max-connections 60``,
``--max-connections-per-client 40``, 2 s header and body timeouts, 1 s
keep-alive) so that every cap and timer is reached within seconds. Other
clients are other loopback source addresses (127.0.0.2, 127.0.0.3): the
server is only ever reached at 127.0.0.1. Every wait is bounded by
:data:`~tests.adversarial.http_probe.HANG_GUARD_S`; before these defences, each
of the probes below hung there (the server never closed such a socket).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from tests.adversarial.http_probe import Raw, serving

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("MEMSTORE_PROTOCOL_URL")), reason="starts a server of its own"
)

MAX_CONNECTIONS = 60
PER_CLIENT = 40
HEADER_TIMEOUT = 2
HALF_HEADER = b"POST /v1/recall HTTP/1.1\r\nHost: x\r\nX-Slow: "
AUTH = ("Authorization", "Bearer tok-a")


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    limits = (
        "--max-connections",
        str(MAX_CONNECTIONS),
        "--max-connections-per-client",
        str(PER_CLIENT),
        "--header-timeout",
        str(HEADER_TIMEOUT),
        "--body-timeout",
        "2",
        "--keepalive-timeout",
        "1",
    )
    with serving(tmp_path_factory.mktemp("slow"), *limits) as (_, p, _):
        yield p


def healthy(port: int, source: str = "127.0.0.1") -> int:
    c = Raw(port, source)
    try:
        return c.request("GET", "/healthz").status
    finally:
        c.close()


def half_headers(port: int, n: int, source: str) -> list[Raw]:
    socks = [Raw(port, source) for _ in range(n)]
    for s in socks:
        s.send(HALF_HEADER)
    return socks


def test_half_header_sockets_are_answered_408_and_closed(port: int) -> None:
    socks = half_headers(port, 30, "127.0.0.1")
    start = time.monotonic()
    try:
        answers = [s.drain() for s in socks]  # each until the server closes it
    finally:
        for s in socks:
            s.close()
    elapsed = time.monotonic() - start
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[0][:200]
    body = json.loads(answers[0].partition(b"\r\n\r\n")[2])
    assert body["error"] == "request_timeout"
    print(f"30 half-header sockets closed {elapsed:.2f} s after they were opened")
    assert healthy(port) == 200


def test_a_trickled_header_does_not_keep_the_socket(port: int) -> None:
    c = Raw(port)
    c.send(b"GET /healthz HTTP/1.1\r\n")
    closed = False
    try:
        for i in range(HEADER_TIMEOUT * 20):  # a header byte every 0.25 s, up to 10 s
            c.send(b"X-%d: y\r\n" % i)
            time.sleep(0.25)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    try:
        assert closed or c.closed_by_server(), "a trickling client must be cut off"
    finally:
        c.close()


def test_connections_over_the_caps_are_refused_at_once_and_the_server_recovers(
    port: int,
) -> None:
    attacker = half_headers(port, PER_CLIENT, "127.0.0.2")
    others: list[Raw] = []
    try:
        # One more from the same address: 503 without sending a byte, then closed.
        extra = Raw(port, "127.0.0.2")
        answer = extra.drain()
        extra.close()
        assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["error"] == "unavailable"
        # Another address is still served while the first is at its cap.
        assert healthy(port, "127.0.0.1") == 200
        # Fill the server's own cap from a third address: then everyone gets 503.
        others = half_headers(port, MAX_CONNECTIONS - PER_CLIENT, "127.0.0.3")
        refused = Raw(port, "127.0.0.1")
        answer = refused.drain()
        refused.close()
        assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
        assert b"retry-after: 1" in answer.lower()
        # The attackers stay, but the server closes their sockets at the header timeout...
        assert all(s.drain().startswith(b"HTTP/1.1 408 ") for s in attacker + others)
        # ... and serves again.
        assert healthy(port) == 200
    finally:
        for s in attacker + others:
            s.close()


def test_a_half_sent_body_is_cut_off(port: int) -> None:
    c = Raw(port)
    head = (
        f"POST /v1/recall HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{AUTH[0]}: {AUTH[1]}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    c.send(head.encode() + b'{"query": ')
    try:
        assert c.closed_by_server(), "a body that stops coming must not hold the connection"
        assert b"HTTP/1.1 200" not in c.drain()
    finally:
        c.close()
    assert healthy(port) == 200


def test_the_next_request_on_a_kept_alive_connection_must_come_whole(port: int) -> None:
    c = Raw(port)
    try:
        assert c.request("GET", "/healthz").status == 200
        c.send(b"G")  # the first byte of a request that never comes
        rest = c.drain()
        assert rest.startswith(b"HTTP/1.1 408 "), rest[:200]
    finally:
        c.close()


def test_an_idle_kept_alive_connection_is_closed(port: int) -> None:
    c = Raw(port)
    try:
        assert c.request("GET", "/healthz").status == 200
        assert c.closed_by_server()
    finally:
        c.close()


def test_oversized_headers_are_431(port: int) -> None:
    c = Raw(port)
    try:
        c.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = b""
        try:
            for _ in range(80):
                c.send(b"X-Pad: " + b"a" * 1000 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = c.drain()
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    finally:
        c.close()


def test_help_documents_every_defence() -> None:
    import subprocess
    import sys

    from tests.protocol.conftest import ROOT

    out = subprocess.run(
        [sys.executable, "-m", "memstore.cli", "serve", "--help"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    flags = (
        "--header-timeout",
        "--body-timeout",
        "--keepalive-timeout",
        "--max-connections",
        "--max-connections-per-client",
        "--allow-host",
        "--allow-origin",
        "--metrics-disabled",
    )
    for flag in flags:
        assert flag in out, flag
    assert "(default 10)" in out and "(default 512" in out
