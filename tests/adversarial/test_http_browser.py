"""Browser-side attacks on a loopback server: DNS rebinding (Host) and cross-site pages (Origin).

A web page cannot set ``Host``; after DNS rebinding the browser sends the
attacker's domain there. Nor can it drop ``Origin`` from a cross-site
request. So a loopback server that answers only loopback names (and
``--allow-host``) and only its own origin (and ``--allow-origin``) is out of
reach of other sites' pages, ``/healthz`` included. Before, any Host and any
Origin were answered.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.adversarial.http_probe import Raw, serving

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("MEMSTORE_PROTOCOL_URL")), reason="starts a server of its own"
)

AUTH = ("Authorization", "Bearer tok-a")
JSON = ("Content-Type", "application/json")
APP = "https://app.test"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    flags = ("--allow-host", "memory.test", "--allow-host", "pinned.test:9", "--allow-origin", APP)
    with serving(tmp_path_factory.mktemp("browser"), *flags) as (_, p, _):
        yield p


@pytest.fixture
def conn(port: int) -> Iterator[Raw]:
    c = Raw(port)
    yield c
    c.close()


def recall(c: Raw, host: str | None, *headers: tuple[str, str]) -> int:
    return c.request(
        "POST", "/v1/recall", body=b'{"query": "q"}', headers=[AUTH, JSON, *headers], host=host
    ).status


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.0.0.1:{port}",
        "localhost",
        "LOCALHOST:{port}",
        "[::1]",
        "[::1]:{port}",
        "memory.test",
        "memory.test:{port}",
        "pinned.test:9",
    ],
)
def test_loopback_names_and_allowed_hosts_are_served(conn: Raw, port: int, host: str) -> None:
    name = host.format(port=port)
    assert conn.request("GET", "/healthz", host=name).status == 200
    assert recall(conn, name) == 200


@pytest.mark.parametrize(
    "host",
    [
        "evil.test",
        "evil.test:{port}",
        "127.0.0.1.evil.test",
        "localhost.evil.test:{port}",
        "pinned.test",
        "pinned.test:10",
        "127.0.0.2",
        "a b",
        "",
    ],
)
def test_other_hosts_are_403_forbidden_host(conn: Raw, port: int, host: str) -> None:
    name = host.format(port=port)
    for a in (
        conn.request("GET", "/healthz", host=name),
        conn.request("POST", "/v1/recall", body=b'{"query": "q"}', headers=[AUTH, JSON], host=name),
    ):
        assert a.status == 403, (name, a.status)
        assert a.json()["error"] == "forbidden_host"


def test_a_request_without_host_or_with_two_is_refused(port: int) -> None:
    c = Raw(port)
    try:
        c.send(b"GET /healthz HTTP/1.0\r\n\r\n")
        a = c.answer()
        assert a.status == 403 and a.json()["error"] == "forbidden_host"
    finally:
        c.close()
    c = Raw(port)
    try:
        a = c.request("GET", "/healthz", headers=[("Host", "evil.test")])  # a second Host
        assert a.status in (400, 403), a.status  # the parser or the guard, never served
    finally:
        c.close()


def test_other_origins_are_403(conn: Raw) -> None:
    for origin in ("https://evil.test", "null", "http://app.test", "https://app.test:8443"):
        a = conn.request("GET", "/healthz", headers=[("Origin", origin)])
        assert a.status == 403, origin
        assert a.json()["error"] == "forbidden_origin"
        assert recall(conn, "default", ("Origin", origin)) == 403


def test_the_servers_own_origin_is_served_without_cors(conn: Raw, port: int) -> None:
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        host = origin.removeprefix("http://")
        a = conn.request("GET", "/healthz", headers=[("Origin", origin)], host=host)
        assert a.status == 200, origin
        assert "access-control-allow-origin" not in a.headers


def test_an_allowed_origin_gets_cors(conn: Raw) -> None:
    a = conn.request(
        "OPTIONS",
        "/v1/recall",
        headers=[
            ("Origin", APP),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "authorization, content-type"),
        ],
    )
    assert a.status == 200
    assert a.headers["access-control-allow-origin"] == APP
    assert "authorization" in a.headers["access-control-allow-headers"].lower()
    b = conn.request(
        "POST", "/v1/recall", body=b'{"query": "q"}', headers=[AUTH, JSON, ("Origin", APP)]
    )
    assert b.status == 200 and b.headers["access-control-allow-origin"] == APP


@pytest.mark.parametrize(
    ("asked", "what"),
    [
        ([("Access-Control-Request-Method", "DELETE")], "asks for a method this server"),
        (
            [("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", "x-a")],
            "asks for headers this server",  # was "asks for a headers"
        ),
        (
            [
                ("Access-Control-Request-Method", "DELETE"),
                ("Access-Control-Request-Headers", "x-a"),
            ],
            "asks for a method and headers this server",
        ),
    ],
)
def test_a_preflight_for_what_is_not_allowed_is_a_json_400(
    conn: Raw, asked: list[tuple[str, str]], what: str
) -> None:
    a = conn.request("OPTIONS", "/v1/recall", headers=[("Origin", APP), *asked])
    assert a.status == 400 and a.headers["content-type"] == "application/json", a.body
    body = a.json()
    assert body["error"] == "invalid_request" and what in body["message"], body
    assert conn.request("GET", "/healthz").status == 200


def test_a_preflight_from_another_origin_is_403(conn: Raw) -> None:
    a = conn.request(
        "OPTIONS",
        "/v1/recall",
        headers=[("Origin", "https://evil.test"), ("Access-Control-Request-Method", "POST")],
    )
    assert a.status == 403 and "access-control-allow-origin" not in a.headers
