"""Bad input over real HTTP: lone surrogates, invalid UTF-8, deep JSON, odd headers.

Each probe goes over one raw keep-alive connection and is followed by a
second request on the *same* connection: a refusal must be an answer in the
documented taxonomy (400 ``invalid_request``), never a 500, and must leave
the connection usable (before, a lone surrogate in ingest content was a 500
logged twice, and the connection was reset).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstore.protocol.errors import ERROR_KINDS
from tests.adversarial.http_probe import Answer, Raw, log_of, serving

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("MEMSTORE_PROTOCOL_URL")), reason="starts a server of its own"
)

AUTH = ("Authorization", "Bearer tok-a")
JSON = ("Content-Type", "application/json")
SURROGATE = "\\udc00"  # as the JSON escape: six characters on the wire
ULID = "01HZZZZZZZZZZZZZZZZZZZZZZZ"

# Every text field of every route, with a lone surrogate in it (JSON text).
SURROGATE_BODIES = [
    ("/v1/ingest", f'{{"source": "s", "content": "c{SURROGATE}"}}'),
    ("/v1/ingest", f'{{"source": "s{SURROGATE}", "content": "c"}}'),
    ("/v1/ingest", f'{{"id": "{SURROGATE}", "source": "s", "content": "c"}}'),
    ("/v1/ingest", f'{{"source": "s", "content": "c", "t_ref": "{SURROGATE}"}}'),
    ("/v1/ingest", f'{{"source": "s", "content": "c", "metadata": {{"k": "{SURROGATE}"}}}}'),
    ("/v1/ingest", f'{{"source": "s", "content": "c", "metadata": {{"{SURROGATE}": 1}}}}'),
    (
        "/v1/ingest",
        f'{{"source": "s", "content": "c", "metadata": {{"a": [{{"b": "x{SURROGATE}"}}]}}}}',
    ),
    ("/v1/recall", f'{{"query": "q{SURROGATE}"}}'),
    ("/v1/recall", f'{{"query": "q", "filter": "source = \'{SURROGATE}\'"}}'),
    ("/v1/recall", f'{{"query": "q", "as_of": "{SURROGATE}"}}'),
    ("/v1/forget", f'{{"target": {{"Id": "{SURROGATE}"}}}}'),
    ("/v1/forget", f'{{"target": {{"Scope": {{"BySource": "{SURROGATE}"}}}}}}'),
    (
        "/v1/forget",
        f'{{"target": {{"Id": "{ULID}"}}, "hard": true, "confirmation_token": "{SURROGATE}"}}',
    ),
]
POSTS = ("/v1/ingest", "/v1/recall", "/v1/forget")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    root = tmp_path_factory.mktemp("input")
    with serving(root) as (_, port, _):
        yield port, root


@pytest.fixture
def conn(server: tuple[int, Path]) -> Iterator[Raw]:
    c = Raw(server[0])
    yield c
    c.close()


def post(c: Raw, path: str, body: bytes, *headers: tuple[str, str]) -> Answer:
    return c.request("POST", path, body=body, headers=[*headers] or [AUTH, JSON])


def still_usable(c: Raw) -> None:
    assert c.request("GET", "/healthz").status == 200, "the connection must survive the refusal"


def assert_invalid_request(a: Answer) -> None:
    assert a.status == 400, (a.status, a.body[:300])
    assert a.json()["error"] == "invalid_request"


@pytest.mark.parametrize(("path", "text"), SURROGATE_BODIES)
def test_a_lone_surrogate_in_any_text_field_is_400(conn: Raw, path: str, text: str) -> None:
    assert_invalid_request(post(conn, path, text.encode("ascii")))
    still_usable(conn)


def test_surrogates_were_not_logged_as_failures(server: tuple[int, Path], conn: Raw) -> None:
    post(conn, "/v1/ingest", SURROGATE_BODIES[0][1].encode())
    log = log_of(server[1], server[0])
    assert "Traceback" not in log and "failed" not in log, log[-2000:]


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize(
    "raw",
    [b'{"query": "\xff"}', b'{"query": "\xed\xb3\x80"}', b'{"query": "\xc3"}'],
    ids=["0xff", "utf8-surrogate", "truncated"],
)
def test_invalid_utf8_is_400_invalid_request(conn: Raw, path: str, raw: bytes) -> None:
    assert_invalid_request(post(conn, path, raw))
    still_usable(conn)


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize("depth", [100, 2000, 100_000])
def test_deep_json_is_400_invalid_request(conn: Raw, path: str, depth: int) -> None:
    body = b"[" * depth + b"]" * depth
    assert_invalid_request(post(conn, path, body))
    still_usable(conn)


def test_deep_metadata_is_400(conn: Raw) -> None:
    deep = '{"a":' * 80 + "1" + "}" * 80
    body = f'{{"source": "s", "content": "c", "metadata": {deep}}}'.encode()
    assert_invalid_request(post(conn, "/v1/ingest", body))
    still_usable(conn)


def test_http_error_is_not_a_code_the_taxonomy_lacks() -> None:
    assert "http_error" not in ERROR_KINDS


def test_a_post_without_content_type_is_read_as_json(conn: Raw) -> None:
    body = json.dumps({"source": "fs/n.md", "content": "# N\nNo header here."}).encode()
    a = post(conn, "/v1/ingest", body, AUTH)
    assert a.status == 200, a.body[:300]
    a = post(conn, "/v1/recall", b'{"query": "header"}', AUTH)
    assert a.status == 200, a.body[:300]
    assert [h["source"] for h in a.json()] == ["fs/n.md"]


@pytest.mark.parametrize(
    "pair",
    [("Bearer nope", "Bearer tok-a"), ("Bearer tok-a", "Bearer tok-a"), ("Bearer tok-a", "")],
    ids=["bad-then-good", "good-twice", "good-then-empty"],
)
def test_repeated_authorization_is_400(conn: Raw, pair: tuple[str, str]) -> None:
    headers = [("Authorization", pair[0]), ("Authorization", pair[1]), JSON]
    assert_invalid_request(post(conn, "/v1/recall", b'{"query": "q"}', *headers))
    a = conn.request("GET", f"/v1/episode/{ULID}", headers=[("Authorization", pair[0])] * 2)
    assert_invalid_request(a)
    still_usable(conn)


def test_no_cors_unless_configured(conn: Raw, server: tuple[int, Path]) -> None:
    preflight = [
        ("Origin", f"http://127.0.0.1:{server[0]}"),
        ("Access-Control-Request-Method", "POST"),
    ]
    a = conn.request("OPTIONS", "/v1/recall", headers=preflight)
    assert "access-control-allow-origin" not in a.headers
    a = conn.request("GET", "/healthz", headers=[("Origin", f"http://127.0.0.1:{server[0]}")])
    assert a.status == 200 and "access-control-allow-origin" not in a.headers


def test_answers_carry_security_headers(conn: Raw) -> None:
    for a in (conn.request("GET", "/healthz"), conn.request("GET", "/healthz", host="evil.test")):
        assert a.headers["x-content-type-options"] == "nosniff"
        assert a.headers["x-frame-options"] == "DENY"
