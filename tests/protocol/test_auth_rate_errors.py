"""The seed's Authentication, Rate limiting and Errors sections, over real HTTP."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstore.protocol.gate import _ROUTES, route_of

from .conftest import RATE_BURST, Server

ROUTES = [
    ("POST", "/v1/ingest", {"source": "s", "content": "c"}),
    ("POST", "/v1/recall", {"query": "q"}),
    ("POST", "/v1/forget", {"target": {"Id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}, "dry_run": True}),
    ("GET", "/v1/snapshot/1.0", None),
    ("GET", "/v1/episode/01HZZZZZZZZZZZZZZZZZZZZZZZ", None),
]
SCOPE_OF = {
    "/v1/ingest": "ingest",
    "/v1/recall": "recall",
    "/v1/forget": "forget",
    "/v1/snapshot/1.0": "recall",
    "/v1/episode/01HZZZZZZZZZZZZZZZZZZZZZZZ": "recall",
}


def assert_error(r: object, status: int, code: str) -> dict[str, object]:
    import httpx

    assert isinstance(r, httpx.Response)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["error"] == code
    assert isinstance(body["message"], str) and body["message"]
    assert set(body) <= {"error", "message", "details"}
    return dict(body)


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_missing_authorization_is_401(server: Server, method: str, path: str, body: object) -> None:
    r = server.client.request(method, path, json=body)
    assert_error(r, 401, "unauthorized")
    assert r.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer two words",
        "Bearer tök".encode("latin-1"),
        "tok-full-0",
    ],
)
def test_malformed_authorization_is_401(server: Server, header: str | bytes) -> None:
    r = server.client.post("/v1/recall", json={"query": "q"}, headers={"Authorization": header})
    assert_error(r, 401, "unauthorized")


def test_unknown_token_is_401_and_never_echoed(server: Server) -> None:
    r = server.call("POST", "/v1/recall", "no-such-token-xyz", json={"query": "q"})
    body = assert_error(r, 401, "unauthorized")
    assert "no-such-token-xyz" not in str(body)


def test_unauthenticated_bad_body_is_still_401(server: Server) -> None:
    r = server.client.post("/v1/ingest", content=b"{not json", headers={"Authorization": "x y"})
    assert_error(r, 401, "unauthorized")


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_missing_scope_is_403(server: Server, method: str, path: str, body: object) -> None:
    r = server.call(method, path, server.tenants.noscope, json=body)
    details = assert_error(r, 403, "forbidden")["details"]
    assert details == {"required_scope": SCOPE_OF[path]}


def test_recall_only_token(server: Server) -> None:
    reader = server.tenants.reader
    assert server.call("POST", "/v1/recall", reader, json={"query": "q"}).status_code == 200
    r = server.call("POST", "/v1/ingest", reader, json={"source": "s", "content": "c"})
    assert_error(r, 403, "forbidden")
    r = server.call("POST", "/v1/forget", reader, json={"target": {"Scope": {"BySource": "s"}}})
    assert_error(r, 403, "forbidden")


def test_healthz_needs_no_auth_and_is_not_rate_limited(server: Server) -> None:
    for _ in range(3 * RATE_BURST):
        r = server.client.get("/healthz")
        assert r.status_code == 200
        assert r.json()["ok"] is True
        assert isinstance(r.json()["version"], str)


def test_metrics_needs_no_auth(server: Server) -> None:
    r = server.client.get("/metrics")
    assert r.status_code == 200
    # The seed names the exact media type: the Prometheus text format 0.0.4.
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "memstore_http_requests_total" in r.text


def test_metric_labels_are_bounded(server: Server) -> None:
    for n in range(3):
        server.client.get(f"/nowhere-{n}")
        server.client.get(f"/v1/episode/{n}", headers={"Authorization": f"Bearer ghost-{n}"})
    text = server.client.get("/metrics").text
    assert "nowhere" not in text and "ghost" not in text
    assert 'route="other"' in text
    labels = [line for line in text.splitlines() if line.startswith("memstore_http_requests_total")]
    tenants = {line.split('tenant="', 1)[1].split('"', 1)[0] for line in labels}
    assert tenants <= {"-"} | set(server.tenants.tenant_of.values())


def test_burst_then_429_with_retry_after(server: Server) -> None:
    token = server.tenants.take()
    statuses = []
    retry_after = None
    for _ in range(3 * RATE_BURST):
        r = server.client.get(
            "/v1/episode/01HZZZZZZZZZZZZZZZZZZZZZZZ", headers={"Authorization": f"Bearer {token}"}
        )
        statuses.append(r.status_code)
        if r.status_code == 429:
            body = assert_error(r, 429, "rate_limited")
            retry_after = r.headers["Retry-After"]
            assert retry_after.isdigit() and int(retry_after) >= 1
            assert body["details"] == {"retry_after": int(retry_after)}
            break
    assert statuses[:RATE_BURST] == [404] * RATE_BURST, "a full bucket admits a burst"
    assert retry_after is not None, "past the burst the tenant is refused"
    # Another tenant's bucket is untouched.
    other = server.call("POST", "/v1/recall", server.tenants.take(), json={"query": "q"})
    assert other.status_code == 200


def test_unknown_route_and_method(server: Server) -> None:
    assert_error(server.client.get("/v2/nothing"), 404, "not_found")
    token = server.tenants.take()
    r = server.client.get("/v1/ingest", headers={"Authorization": f"Bearer {token}"})
    assert_error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"  # RFC 9110 15.5.6: a 405 names the methods allowed
    r = server.client.post("/healthz")
    assert_error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "GET"


def test_a_trailing_slash_is_an_unknown_route(server: Server) -> None:
    """Not a 307 with an empty body: no answer carries a code outside the table."""
    token = server.tenants.take()
    for method, path in (
        ("POST", "/v1/ingest/"),
        ("POST", "/v1/recall/"),
        ("GET", f"/v1/episode/{'0' * 26}/"),
        ("GET", "/healthz/"),
    ):
        r = server.call(method, path, token, json={"query": "q"} if method == "POST" else None)
        assert_error(r, 404, "not_found")


def test_openapi_document(server: Server) -> None:
    r = server.client.get("/openapi.json")
    assert r.content.endswith(b"}\n"), "every JSON answer ends with a newline (README)"
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    assert {
        "/v1/ingest",
        "/v1/recall",
        "/v1/forget",
        "/v1/snapshot/{lsn}",
        "/v1/episode/{id}",
    } <= set(doc["paths"])


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"{not json", "application/json", 400, "invalid_request"),
        (b"[1, 2]", "application/json", 400, "invalid_request"),
        (b'{"query": "q", "bogus": 1}', "application/json", 400, "invalid_request"),
        (b'{"query": "q", "k": "10"}', "application/json", 400, "invalid_request"),
        (b'{"query": "q", "k": 0}', "application/json", 400, "invalid_request"),
        (b'{"query": "q", "k": 101}', "application/json", 400, "invalid_request"),
        (b'{"query": "q", "mode": "psychic"}', "application/json", 400, "invalid_request"),
        (b'{"k": 3}', "application/json", 400, "invalid_request"),
        (b'{"query": "q"}', "text/plain", 415, "unsupported_media_type"),
        (b'{"query": "' + b"x" * 300_000 + b'"}', "application/json", 413, "payload_too_large"),
    ],
)
def test_bad_bodies(server: Server, body: bytes, content_type: str, status: int, code: str) -> None:
    r = server.call(
        "POST",
        "/v1/recall",
        server.tenants.take(),
        content=body,
        headers={"Content-Type": content_type},
    )
    assert_error(r, status, code)


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
@pytest.mark.parametrize("query", ["k=1", "id=01HZZZZZZZZZZZZZZZZZZZZZZZ", "as_of=x&as_of=y", "x"])
def test_a_query_parameter_is_refused_not_ignored(
    server: Server, method: str, path: str, body: object, query: str
) -> None:
    """No route reads one: before, ``POST /v1/recall?k=1`` answered ten hits and
    ``POST /v1/ingest?id=...`` stored the episode under another id (a 200 each)."""
    token = server.tenants.take()
    source = f"query-{query}"
    sent = {**body, "source": source} if path == "/v1/ingest" and isinstance(body, dict) else body
    r = server.call(method, f"{path}?{query}", token, json=sent)
    message = str(assert_error(r, 400, "invalid_request")["message"])
    assert message.startswith(f"unknown query parameter {query.split('=')[0]!r}")
    if path == "/v1/ingest":  # nothing was stored
        now = server.client.get("/healthz").json()["lsn"]  # every write so far applied
        snapshot = server.call("GET", f"/v1/snapshot/{now}", token)
        assert snapshot.status_code == 200 and source not in snapshot.text
    # Without a token it is still the seed's 401 first; a bare "?" is no parameter.
    assert_error(server.client.request(method, f"{path}?{query}", json=body), 401, "unauthorized")
    assert server.call(method, f"{path}?", token, json=body).status_code in (200, 404)


@pytest.mark.parametrize("encoding", ["gzip", "br", "deflate, identity", "x-custom"])
def test_a_compressed_body_is_415_and_stores_nothing(server: Server, encoding: str) -> None:
    """The body is read as the bytes sent: before, a gzip body was "not UTF-8 text" (400),
    and a plain body claiming ``br`` was stored as if the header were not there (200)."""
    import gzip

    token = server.tenants.take()
    source = f"encoded-{encoding}"
    plain = json.dumps({"source": source, "content": "compressed?"}).encode()
    for body in (plain, gzip.compress(plain)):
        headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
        r = server.call("POST", "/v1/ingest", token, content=body, headers=headers)
        assert_error(r, 415, "unsupported_media_type")
        assert r.headers["accept-encoding"] == "identity"
    now = server.client.get("/healthz").json()["lsn"]
    snapshot = server.call("GET", f"/v1/snapshot/{now}", token)
    assert snapshot.status_code == 200 and source not in snapshot.text
    # identity (any case) is the body as sent
    r = server.call(
        "POST",
        "/v1/recall",
        token,
        content=b'{"query": "q"}',
        headers={"Content-Type": "application/json", "Content-Encoding": "Identity"},
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/v1/ingest", b'{"source": "dup-a", "content": "x", "source": "dup-b"}', "source"),
        ("/v1/ingest", b'{"source": "dup-m", "content": "x", "metadata": {"k": 1, "k": 2}}', "k"),
        ("/v1/ingest", b'{"source": "dup-e", "content": "x", "\\u0073ource": "dup-f"}', "source"),
        ("/v1/recall", b'{"query": "q", "k": 1, "k": 100}', "k"),
        (
            "/v1/forget",
            b'{"target": {"Id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}, '
            b'"target": {"Before": {"wall_ms": 18446744073709551615, "counter": 0}}}',
            "target",
        ),
    ],
)
def test_a_key_named_twice_is_refused(server: Server, path: str, body: bytes, key: str) -> None:
    """JSON parsers differ on ``{"k": 1, "k": 100}`` (Python keeps the last): a proxy that
    checked the first key saw another request than the server ran. Before, each was a 200
    (the forget above a soft delete of everything the tenant held, not of one id)."""
    token = server.tenants.take()
    kept = server.call("POST", "/v1/ingest", token, json={"source": "kept", "content": "kept"})
    assert kept.status_code == 200
    r = server.call("POST", path, token, content=body, headers={"Content-Type": "application/json"})
    details = assert_error(r, 400, "invalid_request")["details"]
    assert details == {"key": key}
    now = server.client.get("/healthz").json()["lsn"]
    snapshot = server.call("GET", f"/v1/snapshot/{now}", token).text
    assert '"source":"kept"' in snapshot and "dup-" not in snapshot  # nothing changed
    # The same key in two objects is no repetition.
    fine = b'{"source": "s", "content": "c", "metadata": {"a": {"k": 1}, "b": {"k": 2}}}'
    r = server.call(
        "POST", "/v1/ingest", token, content=fine, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text


@given(
    method=st.sampled_from(["GET", "POST", "PUT", "post"]),
    path=st.one_of(
        st.sampled_from(
            ["/v1/ingest", "/v1/recall", "/v1/forget", "/v1/events", "/v1/recall/", "/v1/snapshot/"]
        ),
        st.builds(
            lambda head, tail: head + tail,
            st.sampled_from(["/v1/snapshot/", "/v1/episode/", "/v1/", "/"]),
            st.text(alphabet="ab/-_", max_size=6),
        ),
    ),
)
def test_the_gate_finds_a_route_as_its_patterns_do(method: str, path: str) -> None:
    """The fixed paths found by a dict lookup are the routes the patterns match."""
    by_patterns = next(
        (key for m, pattern, key in _ROUTES if m == method and pattern.fullmatch(path)), None
    )
    assert route_of(method, path) == by_patterns
